"""``rag compile`` and ``rag artifacts``: optimize the prompts, and list the compiled programs."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rag.cli.common import (
    app,
    check_readable,
    err,
    settings_from,
)


@app.command("compile")
def compile_cmd(
    optimizer: str = typer.Option("bootstrap", help="bootstrap, random-search, mipro or gepa."),
    roles: str = typer.Option("grader,rewriter,answerer",
                              help="Comma-separated roles (grader, rewriter, answerer, judge), all, agent (the "
                                   "whole program end to end), hyde (the HyDE query stage, scored by Recall@k: no "
                                   "judge), router and sql (the data route of an index with tables, scored by "
                                   "routing and SQL execution accuracy: no judge). The judge needs human labels."),
    golden: Optional[Path] = typer.Option(None, readable=False, help="Golden set (JSONL) with train/dev/test splits (default: the project's golden/python_ref.jsonl, wherever you run it)."),
    labels: Optional[Path] = typer.Option(None, readable=False, help="Human judge labels (default golden/judge_labels.jsonl)."),
    budget: Optional[int] = typer.Option(None, help="Cap on LM calls: splits are trimmed until the plan fits."),
    effort: str = typer.Option("light", help="How hard to search: light or medium (MIPROv2's auto mode, GEPA's "
                                            "iterations, random-search's candidates)."),
    max_examples: Optional[str] = typer.Option(None, help="At most N (or TRAIN,DEV,TEST) examples per split and "
                                                          "role; the same caps give every optimizer the same examples."),
    max_demos: int = typer.Option(2, help="At most N demos per predictor (0: instructions only). Each grader or "
                                          "answerer demo adds its passages to every call of that role."),
    demo_passage_chars: int = typer.Option(400, help="Train examples (the source of demos) show each passage cut "
                                                     "to N characters, so a demo costs few prompt tokens; 0: as the "
                                                     "agent shows them."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (LM calls, tokens, cost) and spend nothing."),
    fresh: bool = typer.Option(False, "--fresh", help="Redo roles an earlier run finished (cached LM calls stay free)."),
    out: Optional[str] = typer.Option(None, help="Artifact name (default <optimizer>-<timestamp>)."),
    index_dir: Optional[Path] = typer.Option(None, readable=False, help="Index directory."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress output."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Any setting as key=value."),
) -> None:
    """Optimize the prompts of each role against the golden set and save an artifact.

    Trains on the train split, selects on dev, and reports before/after on test, which the optimizer never sees.

    Examples:

        rag compile --dry-run

        rag compile --optimizer bootstrap --budget 400 --out smollm2-bootstrap

        rag compile --optimizer mipro --roles grader --golden my_golden.jsonl

        rag compile --optimizer gepa --roles grader --max-examples 4,4,10 --budget 150

        rag compile --roles agent --max-examples 4 --dry-run

        rag compile --roles hyde --out hyde-bootstrap

        rag compile --roles router,sql --golden ops/golden.jsonl --index-dir ops/index --max-demos 4 --set router=model

        rag compile --max-demos 1 --out qwen-bootstrap
    """
    import json

    for path, flag in ((golden, "--golden"), (labels, "--labels"), (index_dir, "--index-dir")):
        check_readable(path, flag)  # before any model, index or optimizer loads
    from optimize.compile import parse_max_examples, parse_roles
    from rag.api import compile_program

    settings = settings_from(sets, index_dir=index_dir)
    result = compile_program(settings, golden=golden, optimizer=optimizer, roles=parse_roles(roles), budget=budget,
                             dry_run=dry_run, out=out, labels=labels, show_progress=not quiet, effort=effort,
                             max_examples=parse_max_examples(max_examples), fresh=fresh, max_demos=max_demos,
                             demo_passage_chars=demo_passage_chars or None)
    if result.artifact is None:  # a dry run: the plan is the answer
        typer.echo(result.plan.render())
        return
    typer.echo(f"Saved {result.artifact.path}")
    typer.echo(json.dumps(result.scores, indent=2))


@app.command("artifacts")
def artifacts_cmd(
    artifacts_dir: Optional[Path] = typer.Option(None, readable=False, help="Where compiled programs live (default: the project's artifacts/)."),
) -> None:
    """List compiled programs with their optimizer, models and before/after scores, and whether each change is
    more than noise (a paired test over the split's examples). Selection uses dev only; test is reported.

    Examples:

        rag artifacts
    """
    check_readable(artifacts_dir, "--artifacts-dir")
    from rag.agent import artifacts as arts
    from rag.lm.configure import resolve_specs

    settings = settings_from(None, artifacts_dir=artifacts_dir)
    models = resolve_specs(settings)
    found = arts.list_artifacts(Path(settings.artifacts_dir))
    if not found:
        err(f"No artifacts in {settings.artifacts_dir}. Make one with: rag compile")
        return
    for art in found:
        m = art.manifest
        problems = art.problems(models)
        typer.echo(f"{art.name}  optimizer={m.get('optimizer')}  created={m.get('created')}  "
                   f"{'fits this configuration' if not problems else 'does not fit: ' + '; '.join(problems)}")
        for role in m.get("scores") or {}:
            typer.echo(f"    {art.describe(role)}")
        for what, roles in (("agent", arts.AGENT_ROLES), ("judge", arts.JUDGE_ROLES)):
            if art.roles(roles):
                ok, why = art.dev_verdict(roles)
                typer.echo(f"    {what}: {'selected automatically when it fits' if ok else 'not selected automatically'}"
                           f": {why}")
