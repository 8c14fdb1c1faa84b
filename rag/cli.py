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
@app.command("models")
def models_cmd(
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Override a setting, e.g. --set judge_model=embedded"),
    check: bool = typer.Option(True, "--check/--no-check", help="Check that each model is usable (loads the embedded model)."),
) -> None:
    """Show which model plays each role (grader, rewriter, answerer, judge) and whether it is usable.

    Precedence: --set > SIEVE_<ROLE>_MODEL > config file > default (embedded; Groq when GROQ_API_KEY is set).

    Examples:
      rag models
      rag models --set answerer_model=groq/openai/gpt-oss-120b
      SIEVE_JUDGE_MODEL=gguf:/models/other.gguf rag models --no-check
    """
    from rag.config import parse_assignments
    from rag.lm.check import check_spec
    from rag.lm.roles import resolve_specs

    settings = load_settings(parse_assignments(set_))
    specs = resolve_specs(settings)
    failed = False
    width = max(len(spec) for spec in specs.values())
    for role, spec in specs.items():
        ok, detail = check_spec(spec, settings) if check else (True, "not checked")
        failed |= not ok
        typer.echo(f"{role:<9} {spec:<{width}}  {'ok' if ok else 'UNUSABLE'}: {detail}")
    if failed:
        raise SieveError("some role models are not usable (see above); fix them or pick others with --set <role>_model=...")


@app.command("usage")
def usage_cmd(days: int = typer.Option(7, "--days", min=1, help="How many days back, today included.")) -> None:
    """Show hosted-model usage per day and model from the ledger: calls, failed attempts, tokens, cost.

    Examples:
      rag usage
      rag usage --days 30
    """
    from rag.lm.ledger import Ledger

    ledger = Ledger()
    rows = ledger.daily(days)
    if not rows:
        typer.echo(f"no hosted-model calls in the last {days} day(s) (ledger: {ledger.path})")
        return
    typer.echo(f"{'day':<10}  {'model':<32} {'calls':>6} {'failed':>6} {'tokens in':>10} {'tokens out':>10} {'cost USD':>9}")
    for r in rows:
        typer.echo(f"{r.day:<10}  {r.model:<32} {r.calls:>6} {r.failed:>6} {r.input_tokens:>10} {r.output_tokens:>10} "
                   f"{r.cost_usd:>9.4f}")


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
