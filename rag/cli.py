"""The ``rag`` command line. Commands are thin: they parse flags, call the library, print.

Answers go to stdout; progress and diagnostics to stderr. Domain errors (rag.errors.SieveError)
become one clean line on stderr and exit code 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from rag.config import load_settings
from rag.errors import SieveError

app = typer.Typer(
    name="rag",
    help="Sieve: a self-reflective RAG agent that grades its retrieval, rewrites failed queries and refuses rather than guesses.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def err(message: str) -> None:
    """Diagnostics and progress go to stderr."""
    typer.echo(message, err=True)


# ---------------------------------------------------------------- retrieval: rag index, rag search
# (retrieval commands go here)


# ---------------------------------------------------------------- models: rag models, rag usage
# (model commands go here)


# ---------------------------------------------------------------- agent: rag ask
# (agent commands go here)


# ---------------------------------------------------------------- evaluation: rag eval, rag report, rag calibrate
# (evaluation commands go here)


# ---------------------------------------------------------------- optimization: rag compile, rag artifacts
# (compile commands go here)


def main() -> None:
    try:
        app()
    except SieveError as exc:
        typer.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        typer.echo("Interrupted; finished work was kept.", err=True)
        sys.exit(130)
