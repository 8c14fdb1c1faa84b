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
def _settings(sets: Optional[list[str]] = None, **flags) -> "Settings":
    """Flags given on the command line override env vars and the config file (rag.config)."""
    from rag.config import parse_assignments

    return load_settings({**parse_assignments(sets), **{k: v for k, v in flags.items() if v is not None}})


@app.command()
def ask(
    question: str = typer.Argument(..., help="The question to answer."),
    json_out: bool = typer.Option(False, "--json", help="Print the full prediction and trace as JSON."),
    trace: bool = typer.Option(False, "--trace", help="Show each decision (retrieve, grade, rewrite, answer) on stderr."),
    mode: Optional[str] = typer.Option(None, help="Retrieval mode: bm25, dense or hybrid."),
    k: Optional[int] = typer.Option(None, "--k", help="Passages shown to the grader and answerer."),
    max_rewrites: Optional[int] = typer.Option(None, help="Rewrites before refusing (default 2)."),
    reflection: Optional[bool] = typer.Option(None, "--reflection/--no-reflection", help="Grade and rewrite (default), or retrieve-then-answer."),
    index_dir: Optional[Path] = typer.Option(None, help="Index directory (default: see rag index --help)."),
    artifact: Optional[str] = typer.Option(None, help="Use this compiled artifact (name in artifacts/ or a path)."),
    no_artifact: bool = typer.Option(False, "--no-artifact", help="Run the uncompiled signatures."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the DSPy LM cache."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Any setting as key=value, e.g. --set grader_model=groq/openai/gpt-oss-20b."),
) -> None:
    """Answer a question from the indexed documents, with numbered sources, or refuse.

    Examples:

        rag ask "What does the nonlocal statement do?"

        rag ask "How do I make my object work with len()?" --trace

        rag ask "What does asyncio.gather return?" --json > answer.json

        rag ask "What is a lambda?" --no-reflection --mode bm25
    """
    from rag.agent import prediction_to_dict
    from rag.lm.roles import configure_dspy
    from rag.program import build_program

    settings = _settings(sets, mode=mode, top_k=k, max_rewrites=max_rewrites, reflection=reflection,
                         index_dir=index_dir, artifact=artifact, cache=False if no_cache else None)
    configure_dspy(settings)
    program = build_program(settings, use_artifact=not no_artifact)
    for message in program.messages:
        err(message)
    err(f"Using {program.description}; models: " + ", ".join(f"{r}={m}" for r, m in program.models.items()))
    pred = program.agent(question=question)
    if trace:
        err(pred.trace.render())
    if json_out:
        import json

        data = prediction_to_dict(pred)
        data["artifact"] = program.artifact.name if program.artifact else None
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    typer.echo(pred.answer)
    listed = pred.sources if not pred.refused else pred.closest
    if listed:
        typer.echo("\nSources:" if not pred.refused else "\nClosest passages (judged not relevant):")
        for i, src in enumerate(listed, 1):
            typer.echo(f"  [{i}] {src['title'] or src['chunk_id']} ({src['chunk_id']})")


# ---------------------------------------------------------------- evaluation: rag eval, rag report, rag calibrate
# (evaluation commands go here)


# ---------------------------------------------------------------- optimization: rag compile, rag artifacts
@app.command("compile")
def compile_cmd(
    optimizer: str = typer.Option("bootstrap", help="bootstrap, random-search, mipro or gepa."),
    roles: str = typer.Option("grader,rewriter,answerer", help="Comma-separated roles, or all (judge needs labels)."),
    golden: Path = typer.Option(Path("golden/python_ref.jsonl"), help="Golden set (JSONL) with train/dev/test splits."),
    labels: Optional[Path] = typer.Option(None, help="Human judge labels (default golden/judge_labels.jsonl)."),
    budget: Optional[int] = typer.Option(None, help="Cap on LM calls: splits are trimmed until the plan fits."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (LM calls, tokens, cost) and spend nothing."),
    out: Optional[str] = typer.Option(None, help="Artifact name (default <optimizer>-<timestamp>)."),
    index_dir: Optional[Path] = typer.Option(None, help="Index directory."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress output."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Any setting as key=value."),
) -> None:
    """Optimize the prompts of each role against the golden set and save an artifact.

    Trains on the train split, selects on dev, and reports before/after on test, which the optimizer never sees.

    Examples:

        rag compile --dry-run

        rag compile --optimizer bootstrap --budget 400 --out smollm2-bootstrap

        rag compile --optimizer mipro --roles grader --golden my_golden.jsonl
    """
    import json

    from optimize.compile import compile_program, parse_roles
    from rag.lm.roles import configure_dspy

    settings = _settings(sets, index_dir=index_dir)
    if not dry_run:
        configure_dspy(settings)
    result = compile_program(settings, golden=golden, optimizer=optimizer, roles=parse_roles(roles), budget=budget,
                             dry_run=dry_run, out=out, labels=labels, show_progress=not quiet)
    err(result.plan.render())
    if result.artifact is None:
        return
    typer.echo(f"Saved {result.artifact.path}")
    typer.echo(json.dumps(result.scores, indent=2))


@app.command("artifacts")
def artifacts_cmd(
    artifacts_dir: Optional[Path] = typer.Option(None, help="Where compiled programs live (default: the project's artifacts/)."),
) -> None:
    """List compiled programs with their optimizer, models and before/after scores.

    Examples:

        rag artifacts
    """
    from rag import artifacts as arts
    from rag.lm.roles import role_models

    settings = _settings(None, artifacts_dir=artifacts_dir)
    models = role_models(settings)
    found = arts.list_artifacts(Path(settings.artifacts_dir))
    if not found:
        err(f"No artifacts in {settings.artifacts_dir}. Make one with: rag compile")
        return
    for art in found:
        m = art.manifest
        problems = art.problems(models)
        typer.echo(f"{art.name}  optimizer={m.get('optimizer')}  created={m.get('created')}  "
                   f"{'fits this configuration' if not problems else 'does not fit: ' + '; '.join(problems)}")
        for role, sc in (m.get("scores") or {}).items():
            typer.echo(f"    {role:<9} dev {sc.get('dev_before')} -> {sc.get('dev_after')}   "
                       f"test {sc.get('test_before')} -> {sc.get('test_after')}")


def main() -> None:
    try:
        app()
    except SieveError as exc:
        typer.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        typer.echo("Interrupted; finished work was kept.", err=True)
        sys.exit(130)
