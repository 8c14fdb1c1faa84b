"""``rag report``, ``rag calibrate`` and ``rag notebook``: reading runs, labelling answers, the notebooks."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from rag.cli.common import (
    app,
    check_readable,
    clean_warnings,
    err,
)
from rag.errors import SieveError


@app.command()
def report(
    run_dirs: Optional[list[Path]] = typer.Argument(None, readable=False, help="run directories written by rag eval; default: every run under SIEVE_HOME/runs"),
    out: Optional[Path] = typer.Option(None, "--out", readable=False, help="write the Markdown here instead of stdout"),
    failures: int = typer.Option(3, "--failures", min=0, help="failure cases shown per run, each with trace and diagnosis"),
) -> None:
    """A Markdown report across eval runs: metric table, per-type breakdowns, latency per node, diagnosed failures.

    Examples:
      rag report                                  # every run under SIEVE_HOME/runs
      rag report ~/.cache/sieve/runs/full-1a2b3c4d5e6f --failures 5
      rag report runs/baseline-* runs/full-* --out report.md
    """
    from rag.paths import sieve_home
    from rag.report.markdown import report as build

    clean_warnings()
    for one in run_dirs or []:
        check_readable(one, "RUN_DIRS")
    dirs = list(run_dirs or []) or sorted(p.parent for p in (sieve_home() / "runs").glob("*/summary.json"))
    text = build(dirs, failures=failures)
    if out is None:
        typer.echo(text, nl=False)
    else:
        from rag.eval.runs import protected_by

        owner = protected_by(out)
        if owner is not None:
            raise SieveError(f"--out {out} is a file of {owner}; a report never overwrites one. Give --out a new "
                             "file, e.g. --out report.md")
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise SieveError(f"cannot write the report to {out} ({exc.strerror or exc}); give --out a writable file path") from None
        err(f"wrote {out}")


@app.command()
def calibrate(
    run: list[Path] = typer.Option(..., "--run", readable=False, help="a run directory written by rag eval (with judged answers); repeatable"),
    labels: Optional[Path] = typer.Option(None, "--labels", readable=False, help="a labels JSONL to import instead of labelling by hand"),
    no_label: bool = typer.Option(False, "--no-label", help="only report agreement with the labels already stored"),
    store: Optional[Path] = typer.Option(None, "--store", readable=False, help="Where labels are read and kept (default: read the project's golden/judge_labels.jsonl plus yours in $SIEVE_HOME/labels/, write yours there)."),
    max_items: int = typer.Option(200, "--max-items", min=1, help="most answers shown in one interactive session"),
    json_out: bool = typer.Option(False, "--json", help="print the agreement as JSON"),
) -> None:
    """Label answers by hand (or import labels) and report the judge's accuracy and Cohen's kappa against them,
    and those of the model-free reference-overlap rule (token F1 with the reference answer, rag.eval.overlap); on an
    index with tables, the grounding critic's verdicts against the "faithful" labels too.

    Interactive: each answered item shows question, reference and answer; reply y/n per field, s to skip, q to quit (labels are saved after each item). Labels match a record by id AND answer text (and its citations, where the label lists them). Two runs of the same config are told apart by their folder names.

    Examples:
      rag calibrate --run ~/.cache/sieve/runs/full-1a2b3c4d5e6f
      rag calibrate --run runs/full-1a2b3c4d5e6f --labels my_labels.jsonl --json
      rag calibrate --run runs/full-1a2b3c4d5e6f --run runs/baseline-1a2b3c4d5e6f --no-label
    """
    import json

    for path, flag in (*((one, "--run") for one in run), (labels, "--labels"), (store, "--store")):
        check_readable(path, flag)  # before any run is read or label written
    from rag.eval.calibrate import (
        agreement,
        critic_agreement,
        human_accuracy,
        human_paired,
        label_interactively,
        load_labels,
        overlap_agreement,
        save_labels,
    )
    from rag.eval.runs import names_apart, read_records

    clean_warnings()
    per_run = [read_records(one) for one in run]
    names = names_apart([str(recs[0].get("config") or "") if recs else "" for recs in per_run], run)
    records = [{**rec, "config": name} for recs, name in zip(per_run, names) for rec in recs]
    if not records:
        raise SieveError(f"{', '.join(map(str, run))} hold(s) no results; run rag eval first, or pass the run directory it printed")
    from rag.paths import labels_path, user_labels_path

    stores = [store] if store is not None else [labels_path(), user_labels_path()]
    store = stores[-1]  # new labels go here, never silently into the source tree
    have = [label for path in stores for label in load_labels(path)]
    if no_label:
        pass
    elif labels is not None:
        if not labels.is_file():
            raise SieveError(f"labels file {labels} does not exist")
        have = have + load_labels(labels)
        save_labels(store, have)
        err(f"imported labels from {labels} into {store}")
    else:
        added = label_interactively(records, have, store, show=typer.echo, max_items=max_items,
                                    ask=lambda p: typer.prompt(p, default="", show_default=False))
        err(f"{added} label(s) added to {store}")
    stored = [label for path in stores for label in load_labels(path)]
    result = agreement(records, stored)
    result["overlap"] = overlap_agreement(records, stored)
    result["critic"] = critic_agreement(records, stored)
    result["human_e2e"] = human_accuracy(records, stored)
    result["human_paired"] = human_paired(records, stored)
    result["human_e2e_grounded"] = human_accuracy(records, stored, grounded=True)
    result["human_paired_grounded"] = human_paired(records, stored, grounded=True)
    if json_out:
        typer.echo(json.dumps(result, indent=2))
        return
    if not any(rec.get("judge") for rec in records):
        typer.echo("judge: no answer in these runs was judged (rag eval --no-judge), so its agreement is not measured")
    else:
        typer.echo(f"labelled judged answers in these runs: {result['n']}")
        for name in ("correct", "faithful"):
            r = result[name]
            acc = "—" if r["accuracy"] is None else f"{r['accuracy']:.1%}"
            typer.echo(f"{name:<9} judge accuracy {acc}  Cohen's kappa {_kappa(r['kappa'])}  (judge yes {r['judge_yes']}, human yes {r['human_yes']})")
    o = result["overlap"]
    if o["n"]:
        typer.echo(f"correct by reference overlap (token F1 >= {o['threshold']}, no model), on {o['n']} labelled answers "
                   f"judged or not: accuracy {o['accuracy']:.1%}  Cohen's kappa {_kappa(o['kappa'])}  (overlap yes {o['overlap_yes']}, "
                   f"human yes {o['human_yes']})")
    c = result["critic"]
    if c["n"]:
        typer.echo(f"grounding critic vs faithful, on {c['n']} labelled answers it checked: accuracy {c['accuracy']:.1%}  "
                   f"Cohen's kappa {_kappa(c['kappa'])}  (critic grounded {c['critic_yes']}, human faithful {c['human_yes']}; "
                   f"unfaithful flagged {c['flagged_unfaithful']}, missed {c['missed_unfaithful']})")
    for suffix, right in (("", "right"), ("_grounded", "right and faithful to its citations")):
        for config, r in sorted(result["human_e2e" + suffix].items()):
            acc = "—" if r["accuracy"] is None else f"{r['accuracy']:.1%} [{r['interval'][0]:.1%}, {r['interval'][1]:.1%}]"
            missing = f"; {r['unlabelled']} answer(s) unlabelled, left out" if r["unlabelled"] else ""
            typer.echo(f"{config or 'run'}: {right} by human labels {acc}, {r['correct']} of n={r['n']} items "
                       f"that should be answered (refusals and errors count as wrong{missing})")
        for pair in result["human_paired" + suffix]:
            typer.echo(f"{pair['a']} vs {pair['b']} on the same {pair['n']} items: {pair['a_right']} vs "
                       f"{pair['b_right']} {right}; in one only: {pair['only_a']} vs {pair['only_b']}, "
                       f"exact McNemar p={pair['p']:.3g}")


def _kappa(value: float | None) -> str:
    return "— (undefined: one label only)" if value is None else f"{value:.3f}"


@app.command()
def notebook(
    name: str = typer.Argument("failure_analysis", help="failure_analysis or compile_report (a notebook in notebooks/)"),
    print_only: bool = typer.Option(False, "--print", help="only print the command that opens it"),
) -> None:
    """Open an analysis notebook in JupyterLab, on this Python's kernel (needs the notebooks extra).

    The notebooks read the latest runs under SIEVE_HOME/runs, or SIEVE_RUNS (a run directory or a folder of runs).

    Examples:
      rag notebook                                # notebooks/failure_analysis.ipynb
      rag notebook compile_report
      SIEVE_RUNS=~/.cache/sieve/runs/full-1a2b3c4d5e6f rag notebook --print
    """
    import importlib.util
    import subprocess

    from rag.paths import PROJECT_ROOT

    folder = PROJECT_ROOT / "notebooks"
    path = folder / (name if name.endswith(".ipynb") else f"{name}.ipynb")
    if not path.is_file():
        have = ", ".join(sorted(p.stem for p in folder.glob("*.ipynb"))) or "none"
        raise SieveError(f"no notebook {path}; available: {have}")
    cmd = [sys.executable, "-m", "jupyter", "lab", str(path)]
    if print_only:
        typer.echo(" ".join(cmd))
        return
    if importlib.util.find_spec("jupyterlab") is None:
        raise SieveError('JupyterLab is not installed in this environment; install the notebooks extra: '
                         f'pip install -e ".[notebooks]" (then run: {" ".join(cmd)})')
    err(" ".join(cmd))
    raise typer.Exit(subprocess.call(cmd))
