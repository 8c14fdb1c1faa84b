"""``rag models`` and ``rag usage``: the embedded models and what they run at, and the usage ledger."""

from __future__ import annotations

from typing import Optional

import typer

from rag.cli.common import (
    app,
)
from rag.config import load_settings
from rag.errors import SieveError


@app.command("models")
def models_cmd(
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Override a setting, e.g. --set judge_model=embedded"),
    check: bool = typer.Option(True, "--check/--no-check", help="Check that each model is usable (loads the embedded model)."),
) -> None:
    """Show which model plays each role (grader, rewriter, answerer, judge; proposer for rag compile) and whether it is usable.

    Precedence: --set > SIEVE_<ROLE>_MODEL > config file > default (embedded; Groq when GROQ_API_KEY is set).

    Examples:
      rag models
      rag models --set answerer_model=groq/openai/gpt-oss-120b
      SIEVE_JUDGE_MODEL=gguf:/models/other.gguf rag models --no-check
      rag models --set proposer_model=groq/llama-3.3-70b-versatile --no-check
    """
    from rag.config import parse_assignments
    from rag.lm.configure import check_spec, resolve_specs

    settings = load_settings(parse_assignments(set_))
    specs = resolve_specs(settings)
    if settings.proposer_model:  # rag compile only: writes MIPROv2's and GEPA's instructions
        specs = {**specs, "proposer": settings.proposer_model}
    failed = False
    width = max(len(spec) for spec in specs.values())
    checked: dict[str, tuple[bool, str]] = {}  # one check (and one speed measurement) per distinct model
    for role, spec in specs.items():
        if spec not in checked:
            checked[spec] = check_spec(spec, settings) if check else (True, "not checked")
        ok, detail = checked[spec]
        failed |= not ok
        typer.echo(f"{role:<9} {spec:<{width}}  {'ok' if ok else 'UNUSABLE'}: {detail}")
    if not settings.proposer_model:
        typer.echo("proposer  (the answerer's model; rag compile --optimizer mipro|gepa; set proposer_model)")
    if failed:
        raise SieveError("some role models are not usable (see above); fix them or pick others with --set <role>_model=...")


@app.command("usage")
def usage_cmd(days: int = typer.Option(7, "--days", min=1, help="How many days back, today included.")) -> None:
    """Show hosted-model usage per day and model from the ledger: calls, failed attempts, tokens, cost.

    Examples:
      rag usage
      rag usage --days 30
    """
    from rag.usage.ledger import Ledger

    ledger = Ledger()
    rows = ledger.daily(days)
    if not rows:
        typer.echo(f"no hosted-model calls in the last {days} day(s) (ledger: {ledger.path})")
        return
    typer.echo(f"{'day':<10}  {'model':<32} {'calls':>6} {'failed':>6} {'tokens in':>10} {'tokens out':>10} {'cost USD':>9}")
    for r in rows:
        typer.echo(f"{r.day:<10}  {r.model:<32} {r.calls:>6} {r.failed:>6} {r.input_tokens:>10} {r.output_tokens:>10} "
                   f"{r.cost_usd:>9.4f}")
