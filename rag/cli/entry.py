"""The ``rag`` entry point: every command module registers on the one Typer app, and domain errors
(rag.errors.SieveError) become one clean line on stderr with exit code 1. Answers go to stdout."""

from __future__ import annotations

import sys

import typer

# each module registers its commands on the app; imported in the order `rag --help` lists them
import rag.cli.cmd_demo  # noqa: F401 - rag demo (offline demo datasets)
from rag.cli import cmd_ask, cmd_chat, cmd_compile, cmd_eval, cmd_golden, cmd_index, cmd_models, cmd_report, cmd_serve  # noqa: F401, I001
from rag.cli.common import _ON_INTERRUPT, Interrupted, app, clean_warnings, on_interrupt
from rag.errors import SieveError

__all__ = ["app", "main"]


def main() -> None:
    clean_warnings()
    on_interrupt("")
    from rag.distributed.cluster import LOCAL, optional_value

    sys.argv[1:] = optional_value(sys.argv[1:], "--ray", LOCAL)  # `--ray [ADDRESS]`: alone, a local cluster
    try:
        app()
    except SieveError as exc:
        typer.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except (Interrupted, KeyboardInterrupt):
        typer.echo(f"Interrupted: {_ON_INTERRUPT[0] or 'finished work was kept'}.", err=True)
        sys.exit(130)
