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
# The agent path of `rag eval` is rag.eval_cli.run_agent_eval_cli (wired into the eval command).


@app.command()
def report(
    run_dirs: Optional[list[Path]] = typer.Argument(None, help="run directories written by rag eval; default: every run under SIEVE_HOME/runs"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the Markdown here instead of stdout"),
    failures: int = typer.Option(3, "--failures", min=0, help="failure cases shown per run, each with trace and diagnosis"),
) -> None:
    """A Markdown report across eval runs: metric table, per-type breakdowns, latency per node, diagnosed failures.

    Examples:
      rag report                                  # every run under SIEVE_HOME/runs
      rag report ~/.cache/sieve/runs/full-1a2b3c4d5e6f --failures 5
      rag report runs/baseline-* runs/full-* --out report.md
    """
    from rag.config import sieve_home
    from rag.report import report as build

    dirs = list(run_dirs or []) or sorted(p.parent for p in (sieve_home() / "runs").glob("*/summary.json"))
    text = build(dirs, failures=failures)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        err(f"wrote {out}")


@app.command()
def calibrate(
    run: Path = typer.Option(..., "--run", help="a run directory written by rag eval (with judged answers)"),
    labels: Optional[Path] = typer.Option(None, "--labels", help="a labels JSONL to import instead of labelling by hand"),
    store: Path = typer.Option(Path("golden/judge_labels.jsonl"), "--store", help="where labels are kept"),
    max_items: int = typer.Option(200, "--max-items", min=1, help="most answers shown in one interactive session"),
    json_out: bool = typer.Option(False, "--json", help="print the agreement as JSON"),
) -> None:
    """Label answers by hand (or import labels) and report the judge's accuracy and Cohen's kappa against them.

    Interactive: each answered item shows question, reference and answer; reply y/n per field, s to skip, q to quit (labels are saved after each item). Labels match a record by id AND answer text.

    Examples:
      rag calibrate --run ~/.cache/sieve/runs/full-1a2b3c4d5e6f
      rag calibrate --run runs/full-1a2b3c4d5e6f --labels my_labels.jsonl --json
    """
    import json

    from rag.calibrate import agreement, label_interactively, load_labels, save_labels
    from rag.runs import read_records

    records = read_records(run)
    if not records:
        raise SieveError(f"{run} holds no results; run rag eval first, or pass the run directory it printed")
    have = load_labels(store)
    if labels is not None:
        if not labels.is_file():
            raise SieveError(f"labels file {labels} does not exist")
        have = have + load_labels(labels)
        save_labels(store, have)
        err(f"imported labels from {labels} into {store}")
    else:
        added = label_interactively(records, have, store, show=typer.echo, max_items=max_items,
                                    ask=lambda p: typer.prompt(p, default="", show_default=False))
        err(f"{added} label(s) added to {store}")
    result = agreement(records, load_labels(store))
    if json_out:
        typer.echo(json.dumps(result, indent=2))
        return
    typer.echo(f"labelled answers in this run: {result['n']}")
    for name in ("correct", "faithful"):
        r = result[name]
        acc = "—" if r["accuracy"] is None else f"{r['accuracy']:.1%}"
        kappa = "— (undefined: one label only)" if r["kappa"] is None else f"{r['kappa']:.3f}"
        typer.echo(f"{name:<9} judge accuracy {acc}  Cohen's kappa {kappa}  (judge yes {r['judge_yes']}, human yes {r['human_yes']})")


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
