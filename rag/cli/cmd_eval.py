"""``rag eval``: the agent on a golden set (every decision scored), or retrieval alone; ``--gate`` and ``--repeat``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

import typer

from rag.cli.common import (
    app,
    at_least,
    check_readable,
    clean_warnings,
    dump_json,
    err,
    on_interrupt,
    quiet_loading,
    settings_from,
)
from rag.errors import SieveError


@app.command("eval")
def eval_cmd(
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Named configuration: baseline, hybrid, hybrid_rerank, full, deep (list: show them; with --retrieval-only: its retrieval settings)."),
    golden: Optional[Path] = typer.Option(None, "--golden", readable=False, help="Golden set JSONL (default: golden/python_ref.jsonl)."),
    split: Optional[str] = typer.Option(None, "--split", help="train | dev | test | all (default: test; all with --retrieval-only)."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only N items of the split (a sample stratified by question type)."),
    retrieval_only: bool = typer.Option(False, "--retrieval-only", help="Score retrieval only (Recall/MRR/hit/needle recall@k); no language model."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", readable=False, help="Index folder (default: $SIEVE_HOME/index)."),
    k: Optional[int] = typer.Option(None, "--k", "-k", help="Cut-off k (default: top_k = 4)."),
    mode: Optional[str] = typer.Option(None, "--mode", "-m", help="bm25 | dense | hybrid (default: hybrid; with --config: the config's)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Override a setting, key=value (repeatable)."),
    where: Optional[list[str]] = typer.Option(None, "--where", help="Search only passages whose metadata matches, field=value[,value] (repeatable; fields: rag index --info)."),
    gate: Optional[Path] = typer.Option(None, "--gate", readable=False, help="Thresholds JSON; exit 1 when a metric is out of bounds."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Parallel items (default: 1 for the embedded model, else 4)."),
    out: Optional[Path] = typer.Option(None, "--out", readable=False, help="Run folder (default: $SIEVE_HOME/runs/<config>-<golden hash>)."),
    no_judge: bool = typer.Option(False, "--no-judge", help="Skip the judge (answer metrics become n/a)."),
    strict_gold: bool = typer.Option(False, "--strict-gold", help="Gold chunk ids the index does not hold are an error (default: a warning)."),
    reviewed_only: bool = typer.Option(False, "--reviewed-only", help="Score only the items whose latest decision in rag golden review is accept or edit, by a human or the model (--auto)."),
    reviewed_by: Optional[str] = typer.Option(None, "--reviewed-by", help="With --reviewed-only (implied): only the items whose accept or edit is by this reviewer: human or model."),
    artifact: Optional[str] = typer.Option(None, "--artifact", help="Evaluate this compiled artifact (name in artifacts/ or a path), even if its dev gain does not clear noise."),
    no_artifact: bool = typer.Option(False, "--no-artifact", help="Evaluate the uncompiled signatures."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    repeat: Optional[int] = typer.Option(None, "--repeat", help="Run the evaluation N times with the LM cache off and print the spread of each metric (run-to-run variance)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run items on a Ray cluster: --ray alone starts a local one, --ray auto joins `ray start`'s, or HOST:PORT (needs pip install -e \".[ray]\")."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray workers (default: one per cluster CPU for hosted models, one per node for the embedded model)."),
) -> None:
    """Run the agent on a golden set and score every decision; or score retrieval alone.

    Results are written per item as they finish; rerunning the same command resumes.

    Examples:
      rag eval --config full --split test --limit 20
      rag eval --config baseline --json
      rag eval --config full --gate rag/configs/gate_ci.json --limit 2
      rag eval --config full --artifact qwen1.5b-bootstrap  # a compiled program, named
      rag eval --config full --limit 6 --repeat 3     # run-to-run spread, cache off
      rag eval --config full --ray auto --workers 8  # items on the Ray cluster of `ray start`
      rag eval --retrieval-only --golden golden/python_ref.jsonl --k 4 --mode bm25
      rag eval --retrieval-only --config deep --split dev    # a configuration's query stages, scored by Recall@k
      rag eval --config full --where category=travel --golden travel.jsonl
      rag eval --config full --golden mine.jsonl --reviewed-only --split all   # a reviewed drafted set
      rag eval --config full --golden mine.jsonl --reviewed-by human   # a human's accepts only
    """
    clean_warnings()
    at_least(1, k=k, limit=limit, threads=threads, repeat=repeat, workers=workers)
    for path, flag in ((golden, "--golden"), (gate, "--gate"), (index_dir, "--index-dir")):
        check_readable(path, flag)  # before any model or index loads
    if ray is not None and threads is not None:
        raise SieveError("--threads runs items in this process and --ray on Ray workers; give one of them")
    if workers is not None and ray is None:
        raise SieveError("--workers needs --ray (workers are Ray actors); for parallel items here use --threads")
    if artifact is not None and no_artifact:
        raise SieveError("--artifact NAME runs that compiled program and --no-artifact none; give one of them")
    if reviewed_by is not None:  # before any model or index loads
        from rag.curate.review import REVIEWERS

        if reviewed_by not in REVIEWERS:
            raise SieveError(f"--reviewed-by: unknown reviewer {reviewed_by!r}; give {' or '.join(REVIEWERS)}")
        reviewed_only = True
    if quiet:
        quiet_loading()
    where_set = [f"where={';'.join(where)}"] if where else []  # the `where` setting: every search of the run
    if retrieval_only:
        from rag.curate.review import keep_reviewed
        from rag.errors import InputError
        from rag.eval.golden import load_golden
        from rag.eval.metrics import retrieval_report
        from rag.eval.presets import check_gate, load_gate, select_items
        from rag.paths import golden_path
        from rag.retrieval.retriever import Retriever

        agent_only = {"--out": out, "--threads": threads, "--no-judge": no_judge or None,
                      "--artifact": artifact, "--no-artifact": no_artifact or None, "--repeat": repeat, "--ray": ray}
        if any(v is not None for v in agent_only.values()):
            raise InputError(f"--retrieval-only runs no agent, so {', '.join(f for f, v in agent_only.items() if v is not None)} "
                             "would be ignored; drop it, or drop --retrieval-only")
        if config is not None:  # the configuration's retrieval settings (its query stages), under --set/--mode/--k
            from rag.eval.presets import resolve_config

            settings, skipped = resolve_config(config, list(sets or []) + where_set + ([f"top_k={k}"] if k else [])
                                               + ([f"mode={mode}"] if mode else []), index_dir)
            if skipped:
                raise SieveError(skipped)
        else:
            settings = settings_from(list(sets or []) + where_set, index_dir=index_dir, mode=mode, top_k=k)
        kk = settings.top_k
        names = (f"recall@{kk}", f"mrr@{kk}", f"hit@{kk}", f"needle_recall@{kk}", f"all_needles@{kk}")
        if gate is not None:  # checked before any scoring
            load_gate(gate, names)
        items = load_golden(golden_path(golden))
        items = select_items(keep_reviewed(items, golden_path(golden), by=reviewed_by) if reviewed_only else items,
                             split or "all")
        items = items[:limit] if limit is not None else items
        retriever = Retriever.from_settings(settings)
        if settings.lm_stages:
            from rag.agent.program import with_query_stages

            with_query_stages(retriever, settings)  # the LM stages on the rewriter's model
        on_interrupt("retrieval-only scoring keeps no partial results and spends no model calls; run the same command again")
        report = retrieval_report(items, retriever, k=kk, mode=settings.mode, strict_gold=strict_gold)
        if as_json:
            typer.echo(dump_json(report, indent=2, ensure_ascii=False))
        else:
            typer.echo(f"retrieval  mode={report['mode']}  k={kk}  items={report['items']}  scored={report['scored']}  "
                       f"skipped (no gold)={report['skipped_no_gold']}")
            for metric in names:
                value, ci = report[metric], report.get("ci", {}).get(metric)
                interval = f" [{ci['lo']:.3f}, {ci['hi']:.3f}] n={ci['n']}" if ci and value is not None else ""
                typer.echo(f"  {metric:<18} {'n/a' if value is None else f'{value:.3f}'}{interval}")
        if gate is not None:
            why = {m: "no scored item has gold chunks" if "needle" not in m else "no scored item has evidence"
                   for m in names if report[m] is None}
            failures = check_gate({m: report[m] for m in names}, why, gate)
            for line in failures:
                err(f"gate failed: {line}")
            if failures:
                raise typer.Exit(1)
            err(f"gate passed ({gate})")
        return
    if config is None:
        raise SieveError("rag eval needs --config NAME (baseline, hybrid, hybrid_rerank, full, deep; --config list shows "
                         "them) or --retrieval-only")
    pairs = (list(sets or []) + where_set + ([f"top_k={k}"] if k else []) + ([f"mode={mode}"] if mode else [])
             + ([f"artifact={artifact}"] if artifact else []))
    on_interrupt("finished items are kept in the run folder; run the same command again to resume")
    code = run_agent_eval_cli(config, split=split or "test", limit=limit, golden=golden, index_dir=index_dir, json_out=as_json,
                              set_pairs=pairs, gate=gate, threads=threads, out=out, judge=not no_judge,
                              show_progress=not quiet, use_artifact=not no_artifact, repeat=repeat, ray=ray,
                              workers=workers, strict_gold=strict_gold, reviewed_only=reviewed_only,
                              reviewed_by=reviewed_by)
    raise typer.Exit(code)


def run_agent_eval_cli(config: str, *, split: str = "test", limit: int | None = None, golden: Path | None = None,
                       index_dir: Path | None = None, json_out: bool = False, set_pairs: list[str] | None = None,
                       gate: Path | None = None, threads: int | None = None, out: Path | None = None,
                       judge: bool = True, show_progress: bool = True, use_artifact: bool = True,
                       repeat: int | None = None, ray: str | None = None, workers: int | None = None,
                       strict_gold: bool = False, reviewed_only: bool = False, reviewed_by: str | None = None) -> int:
    """Everything ``rag eval --config NAME`` does; returns the exit code (1 when the gate fails).

    ``config="list"`` prints the named configurations instead; ``repeat`` runs the evaluation that many times with
    the LM cache off and prints the spread of each metric (rag.report.repeat)."""
    from rag.eval.presets import META_KEYS, agent_metric_names, load_eval_configs, load_gate, plan_eval

    if config in ("list", "?"):
        for name, table in load_eval_configs().items():
            values = ", ".join(f"{k}={v}" for k, v in table.items() if k not in META_KEYS)
            typer.echo(f"{name:<14} {table.get('description', '')}\n{'':<14} {values}")
        return 0
    if out is not None:  # before any model is fetched, hashed or loaded (a bad --out is refused in a moment)
        check_out(out)
    if gate is not None:  # a malformed gate file is reported before the run spends any model calls
        load_gate(gate, agent_metric_names())
    plan = plan_eval(config, split=split, golden=golden, out=out, set_pairs=set_pairs, index_dir=index_dir,
                     judge=judge, use_artifact=use_artifact, no_cache=bool(repeat), reviewed_only=reviewed_only,
                     reviewed_by=reviewed_by, log=err)
    if isinstance(plan, str):
        err(f"skipped: {plan}")
        if json_out:
            typer.echo(dump_json({"config_name": config, "skipped": plan}))
        return 0
    plan.strict_gold = strict_gold

    from rag.distributed.eval import plan_runner

    def run_in(folder: Path) -> dict[str, Any]:  # a runner of its own for each run, as each repeat is one
        runner = plan_runner(plan, ray, workers=workers, show_progress=show_progress)
        return plan.run(folder, limit=limit, threads=threads, show_progress=show_progress, runner=runner)

    if repeat:
        from rag.report.repeat import run_repeats

        base = out or plan.out_dir.with_name(plan.out_dir.name + "-repeat")
        return run_repeats(repeat, run_in, base, json_out=json_out,
                           gate=(lambda s: _gate(s, gate)) if gate is not None else None)
    summary = run_in(plan.out_dir)
    print_summary(summary, plan.out_dir, json_out)
    return _gate(summary, gate) if gate is not None else 0


def check_out(out: Path) -> None:
    """``--out`` must be a run folder rag eval may write (rag.eval.runs.check_run_folder), and one it can create:
    InputError naming the folder, so a path below a file or in a read-only folder is refused before any model is
    loaded rather than when the first result is written."""
    import os

    from rag.errors import InputError
    from rag.eval.runs import check_run_folder

    out = Path(out)
    if not (os.path.lexists(out) and not os.path.isdir(out)):  # a file is refused below, as not a run folder
        check_readable(out, "--out")  # an existing run folder is read too (the run resumes from it)
    check_run_folder(out)
    parent = out
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"cannot create the run folder {out}: {parent} is not a folder; give --out a folder path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot write the run folder {out}: {parent} is not writable; give --out another folder")


def _gate(summary: Mapping[str, Any], gate: Path) -> int:
    """Check ``summary`` against the gate file: 1 (and why, on stderr) when a metric is out of bounds, else 0."""
    from rag.eval.presets import check_gate

    failures = check_gate(summary["metrics"], summary["why"], gate)
    for line in failures:
        err(f"gate failed: {line}")
    if failures:
        return 1
    err(f"gate passed ({gate})")
    return 0


def print_summary(summary: Mapping[str, Any], out_dir: Path, json_out: bool) -> None:
    """JSON (``--json``) or a two-column table on stdout; the run directory on stderr."""
    if json_out:
        typer.echo(dump_json({**summary, "run_dir": str(out_dir)}, indent=2))
    else:
        from rag.report.markdown import fmt_ci, metric_rows

        rows = metric_rows([summary])  # an index with tables: the data route's too
        width = max(len(label) for _, label, _ in rows)
        typer.echo(f"{'config':<{width}}  {summary['config_name']} ({summary['n_done']}/{summary['n_selected']} items)"
                   "  value [95% interval] n")
        ci = summary.get("ci") or {}
        for key, label, kind in rows:
            label = label.replace("@k", f"@{summary.get('k')}")
            typer.echo(f"{label:<{width}}  {fmt_ci(summary['metrics'].get(key), kind, summary['why'].get(key), ci.get(key))}")
    err(f"results: {out_dir}")
