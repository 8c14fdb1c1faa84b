"""The ``rag`` command line. Commands are thin: they parse flags, call the library, print.

Answers go to stdout; progress and diagnostics to stderr. Domain errors (rag.errors.SieveError)
become one clean line on stderr and exit code 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
import typer.core

from rag.config import PROJECT_ROOT, Settings, load_settings
from rag.errors import SieveError

class _Interrupted(Exception):
    """Ctrl-C inside a command, carried past click (which would print "Aborted!", exit 1) to main()."""


class _Group(typer.core.TyperGroup):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise _Interrupted() from None


app = typer.Typer(
    cls=_Group,
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


def _clean_warnings() -> None:
    """Show library warnings (skipped files, cut queries) as one plain stderr line each."""
    import warnings

    warnings.formatwarning = lambda message, category, *args, **kwargs: f"Warning: {message}\n"


_ON_INTERRUPT = [""]  # what main() says on Ctrl-C: what was kept and how to resume (set by each command)


def on_interrupt(note: str) -> None:
    _ON_INTERRUPT[0] = note


def _at_least(minimum: int, **flags: Optional[int]) -> None:
    """A flag below ``minimum`` is an error naming the flag (not the setting behind it)."""
    from rag.errors import InputError

    for name, value in flags.items():
        if value is not None and value < minimum:
            raise InputError(f"--{name.replace('_', '-')} must be >= {minimum}, got {value}")


def _quiet_loading() -> None:
    """No model-loading progress bars (transformers' "Loading weights", the hub's download bars)."""
    import os

    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass


@app.command("index")
def index_cmd(
    path: Optional[Path] = typer.Argument(None, help="Folder of .md/.markdown/.txt/.rst/.html/.pdf/.docx files "
                                          "(recursive). Omit to index the built-in demo corpus (Python language "
                                          "reference topics)."),
    chunks: Optional[Path] = typer.Option(None, "--chunks", help="Pre-chunked JSONL (one {id, text, ...} per line); ids kept verbatim."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", help="Where to write the index (default: $SIEVE_HOME/index, SIEVE_HOME defaulting to ~/.cache/sieve)."),
    embedding_model: Optional[str] = typer.Option(None, "--embedding-model", help="sentence-transformers name or path; 'default' = bundled all-MiniLM-L6-v2."),
    chunk_size: Optional[int] = typer.Option(None, "--chunk-size", help="Target characters per chunk (default: 1200)."),
    chunk_overlap: Optional[int] = typer.Option(None, "--chunk-overlap", help="Characters carried over between chunks of one section (default: 150)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Embed on a Ray cluster: --ray alone starts a local one, --ray auto joins `ray start`'s, or HOST:PORT (needs pip install -e \".[ray]\")."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray embedding workers (default: one per cluster CPU)."),
) -> None:
    """Build the search index (bm25s + FAISS) from the built-in corpus, a folder, or a chunks JSONL.

    Examples:
      rag index                           # built-in Python reference topics
      rag index ./docs --index-dir idx    # your Markdown/rST/HTML/text/PDF/Word files
      rag index --chunks chunks.jsonl     # pre-chunked elsewhere; ids kept
      rag index ./docs --ray auto         # embedding batches on the Ray cluster of `ray start`

    PDF and Word files keep their headings as section paths, their tables whole and their page numbers
    (cited as "p. 12"); an encrypted, corrupt, empty or scanned (no text layer) one is skipped with a
    warning and counted in the last line.
    """
    _clean_warnings()
    from rag.errors import InputError

    _at_least(1, chunk_size=chunk_size, workers=workers)
    _at_least(0, chunk_overlap=chunk_overlap)
    if workers is not None and ray is None:
        raise InputError("--workers needs --ray (workers are Ray actors)")
    settings = load_settings({"index_dir": index_dir, "embedding_model": embedding_model,
                              "chunk_size": chunk_size, "chunk_overlap": chunk_overlap})
    if path is not None and chunks is not None:
        raise InputError("give either a folder PATH or --chunks FILE.jsonl, not both")
    from rag.chunking import chunk_documents, load_chunks_jsonl
    from rag.corpus import load_builtin_topics, load_folder
    from rag.index import build_index
    from rag.index_dir import check_target

    target = Path(settings.index_dir).expanduser()
    check_target(target)  # before reading or embedding anything
    if quiet:
        _quiet_loading()
    on_interrupt(f"the index at {target} was not changed (a build replaces it only when complete); run the same "
                 "command again to build it (embeddings of unchanged chunks in an existing index are reused)")
    skipped = ""
    if chunks is not None:
        items, source = load_chunks_jsonl(chunks), f"jsonl:{chunks.expanduser().resolve()}"
    else:
        docs = (load_folder(path, show_progress=not quiet, max_bytes=settings.max_file_mb * 1_000_000)
                if path is not None else load_builtin_topics())
        source = f"folder:{path.expanduser().resolve()}" if path is not None else "builtin"
        items = chunk_documents(docs, settings.chunk_size, settings.chunk_overlap)
        skipped = docs.skipped_summary()
        if not quiet:
            err(f"{len(docs)} documents -> {len(items)} chunks" + (f" ({skipped})" if skipped else ""))
    embedder = None
    if ray is not None:
        from rag.distributed.embed import ray_embedder

        embedder = ray_embedder(ray, settings.embedding_model, workers=workers, show_progress=not quiet)
    index = build_index(items, settings.index_dir, settings, show_progress=not quiet, source=source, embedder=embedder)
    counts = index.manifest["counts"]
    typer.echo(f"Indexed {counts['chunks']} chunks ({counts['embeddings_reused']} embeddings reused) into {index.dir} "
               f"in {index.manifest['build_seconds']:.1f}s" + (f"; {skipped} (see the warnings above)" if skipped else ""))


@app.command("search")
def search_cmd(
    query: str = typer.Argument(..., help="The question or keywords."),
    mode: Optional[str] = typer.Option(None, "--mode", "-m", help="bm25 | dense | hybrid (default: hybrid)."),
    k: Optional[int] = typer.Option(None, "--k", "-k", help="How many chunks (default: 4)."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", help="Index folder (default: $SIEVE_HOME/index)."),
    as_json: bool = typer.Option(False, "--json", help="Print hits as JSON (with per-stage ranks and scores)."),
) -> None:
    """Show the chunks retrieval returns for a question (no language model involved).

    Examples:
      rag search "how does the with statement work?"
      rag search "walrus operator" --mode bm25 --k 8
      rag search "exception groups" --json | jq '.[0].stages'
    """
    _clean_warnings()
    import json

    from rag.chunking import page_label
    from rag.retrieve import Retriever

    _at_least(1, k=k)
    settings = load_settings({"index_dir": index_dir, "mode": mode, "top_k": k})
    retriever = Retriever.from_settings(settings)
    hits = retriever.search(query)
    if as_json:
        typer.echo(json.dumps([h.to_dict() for h in hits], indent=2, ensure_ascii=False))
        return
    if not hits:
        typer.echo("No matching chunks.")
    for h in hits:
        stages = ", ".join(f"{name} #{st['rank']}" for name, st in h.stages.items() if st["rank"] is not None)
        typer.echo(f"[{h.rank}] {h.chunk_id}  score={h.score:.4f}  ({stages})")
        where = ", ".join(x for x in (h.title, page_label(h.meta)) if x)
        if where:
            typer.echo(f"    {where}")
        if h.duplicates:
            typer.echo(f"    same words as {', '.join(h.duplicates)} (shown once)")
        body = " ".join(h.text.split())
        typer.echo(f"    {body[:400]}{'...' if len(body) > 400 else ''}\n")



@app.command("eval")
def eval_cmd(
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Named configuration: baseline, hybrid, hybrid_rerank, full (list: show them)."),
    golden: Optional[Path] = typer.Option(None, "--golden", help="Golden set JSONL (default: golden/python_ref.jsonl)."),
    split: Optional[str] = typer.Option(None, "--split", help="train | dev | test | all (default: test; all with --retrieval-only)."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only N items of the split (a sample stratified by question type)."),
    retrieval_only: bool = typer.Option(False, "--retrieval-only", help="Score retrieval only (Recall/MRR/hit/needle recall@k); no language model."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", help="Index folder (default: $SIEVE_HOME/index)."),
    k: Optional[int] = typer.Option(None, "--k", "-k", help="Cut-off k (default: top_k = 4)."),
    mode: Optional[str] = typer.Option(None, "--mode", "-m", help="bm25 | dense | hybrid (default: hybrid; with --config: the config's)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Override a setting, key=value (repeatable)."),
    gate: Optional[Path] = typer.Option(None, "--gate", help="Thresholds JSON; exit 1 when a metric is out of bounds."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Parallel items (default: 1 for the embedded model, else 4)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Run folder (default: $SIEVE_HOME/runs/<config>-<golden hash>)."),
    no_judge: bool = typer.Option(False, "--no-judge", help="Skip the judge (answer metrics become n/a)."),
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
    """
    _clean_warnings()
    import json

    _at_least(1, k=k, limit=limit, threads=threads, repeat=repeat, workers=workers)
    if ray is not None and threads is not None:
        raise SieveError("--threads runs items in this process and --ray on Ray workers; give one of them")
    if workers is not None and ray is None:
        raise SieveError("--workers needs --ray (workers are Ray actors); for parallel items here use --threads")
    if artifact is not None and no_artifact:
        raise SieveError("--artifact NAME runs that compiled program and --no-artifact none; give one of them")
    if quiet:
        _quiet_loading()
    if retrieval_only:
        from rag.config import PROJECT_ROOT
        from rag.errors import InputError
        from rag.eval_cli import check_gate, load_gate, select_items
        from rag.golden import load_golden
        from rag.metrics import retrieval_report
        from rag.retrieve import Retriever

        agent_only = {"--config": config, "--out": out, "--threads": threads, "--no-judge": no_judge or None,
                      "--artifact": artifact, "--no-artifact": no_artifact or None, "--repeat": repeat, "--ray": ray}
        if any(v is not None for v in agent_only.values()):
            raise InputError(f"--retrieval-only runs no agent, so {', '.join(f for f, v in agent_only.items() if v is not None)} "
                             "would be ignored; drop it, or drop --retrieval-only")
        settings = _settings(sets, index_dir=index_dir, mode=mode, top_k=k)
        kk = settings.top_k
        names = (f"recall@{kk}", f"mrr@{kk}", f"hit@{kk}", f"needle_recall@{kk}", f"all_needles@{kk}")
        if gate is not None:  # checked before any scoring
            load_gate(gate, names)
        items = select_items(load_golden(golden or PROJECT_ROOT / "golden" / "python_ref.jsonl"), split or "all")
        items = items[:limit] if limit is not None else items
        retriever = Retriever.from_settings(settings)
        on_interrupt("retrieval-only scoring keeps no partial results and spends no model calls; run the same command again")
        report = retrieval_report(items, retriever, k=kk, mode=settings.mode)
        if as_json:
            typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
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
        raise SieveError("rag eval needs --config NAME (baseline, hybrid, hybrid_rerank, full; --config list shows "
                         "them) or --retrieval-only")
    from rag.eval_cli import run_agent_eval_cli

    pairs = (list(sets or []) + ([f"top_k={k}"] if k else []) + ([f"mode={mode}"] if mode else [])
             + ([f"artifact={artifact}"] if artifact else []))
    on_interrupt("finished items are kept in the run folder; run the same command again to resume")
    code = run_agent_eval_cli(config, split=split or "test", limit=limit, golden=golden, index_dir=index_dir, json_out=as_json,
                              set_pairs=pairs, gate=gate, threads=threads, out=out, judge=not no_judge,
                              show_progress=not quiet, use_artifact=not no_artifact, repeat=repeat, ray=ray,
                              workers=workers)
    raise typer.Exit(code)


# ---------------------------------------------------------------- models: rag models, rag usage
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
    from rag.lm.check import check_spec
    from rag.lm.roles import resolve_specs

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
def _settings(sets: Optional[list[str]] = None, **flags) -> Settings:
    """Flags given on the command line override env vars and the config file (rag.config)."""
    from rag.config import parse_assignments

    return load_settings({**parse_assignments(sets), **{k: v for k, v in flags.items() if v is not None}})


class _InBackground:
    """``work()`` in a daemon thread, started at once; :meth:`result` waits for it and returns its value, or raises
    here what it raised (a SieveError then becomes the usual one-line error). Daemon: Ctrl-C in the main thread,
    which :meth:`result`'s wait lets through, exits without waiting for the work to finish."""

    def __init__(self, work, name: str) -> None:
        import threading

        self._outcome: tuple[bool, object] = (False, None)
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        self._thread.start()

    def _run(self, work) -> None:
        try:
            self._outcome = (True, work())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the waiting thread
            self._outcome = (False, exc)

    def result(self):
        self._thread.join()
        done, value = self._outcome
        if not done:
            raise value
        return value


def _load_retriever(settings: Settings):
    """The retriever for ``settings`` with its index parts and query encoder loaded (rag.retrieve.Retriever.warm_up)."""
    from rag.retrieve import Retriever

    return Retriever.from_settings(settings).warm_up()


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
    _clean_warnings()
    _at_least(1, k=k)
    _at_least(0, max_rewrites=max_rewrites)
    settings = _settings(sets, mode=mode, top_k=k, max_rewrites=max_rewrites, reflection=reflection,
                         index_dir=index_dir, artifact=artifact, cache=False if no_cache else None)
    # The index, its search libraries and the query encoder load while DSPy is imported and the LMs are made.
    retriever_load = _InBackground(lambda: _load_retriever(settings), name="sieve-load-retriever")
    from rag.agent import prediction_to_dict
    from rag.chunking import page_label
    from rag.lm.roles import configure_dspy
    from rag.program import build_program

    configure_dspy(settings)
    program = build_program(settings, use_artifact=not no_artifact, retriever=retriever_load.result())
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
            where = ", ".join(x for x in (src["title"] or src["chunk_id"], page_label(src)) if x)
            typer.echo(f"  [{i}] {where} ({src['chunk_id']})")


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

    _clean_warnings()
    dirs = list(run_dirs or []) or sorted(p.parent for p in (sieve_home() / "runs").glob("*/summary.json"))
    text = build(dirs, failures=failures)
    if out is None:
        typer.echo(text, nl=False)
    else:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise SieveError(f"cannot write the report to {out} ({exc.strerror or exc}); give --out a writable file path") from None
        err(f"wrote {out}")


@app.command()
def calibrate(
    run: list[Path] = typer.Option(..., "--run", help="a run directory written by rag eval (with judged answers); repeatable"),
    labels: Optional[Path] = typer.Option(None, "--labels", help="a labels JSONL to import instead of labelling by hand"),
    no_label: bool = typer.Option(False, "--no-label", help="only report agreement with the labels already stored"),
    store: Path = typer.Option(PROJECT_ROOT / "golden" / "judge_labels.jsonl", "--store", help="where labels are kept"),
    max_items: int = typer.Option(200, "--max-items", min=1, help="most answers shown in one interactive session"),
    json_out: bool = typer.Option(False, "--json", help="print the agreement as JSON"),
) -> None:
    """Label answers by hand (or import labels) and report the judge's accuracy and Cohen's kappa against them,
    and those of the model-free reference-overlap rule (token F1 with the reference answer, rag.overlap).

    Interactive: each answered item shows question, reference and answer; reply y/n per field, s to skip, q to quit (labels are saved after each item). Labels match a record by id AND answer text (and its citations, where the label lists them). Two runs of the same config are told apart by their folder names.

    Examples:
      rag calibrate --run ~/.cache/sieve/runs/full-1a2b3c4d5e6f
      rag calibrate --run runs/full-1a2b3c4d5e6f --labels my_labels.jsonl --json
      rag calibrate --run runs/full-1a2b3c4d5e6f --run runs/baseline-1a2b3c4d5e6f --no-label
    """
    import json

    from rag.calibrate import (agreement, human_accuracy, human_paired, label_interactively, load_labels,
                               overlap_agreement, save_labels)
    from rag.runs import names_apart, read_records

    _clean_warnings()
    per_run = [read_records(one) for one in run]
    names = names_apart([str(recs[0].get("config") or "") if recs else "" for recs in per_run], run)
    records = [{**rec, "config": name} for recs, name in zip(per_run, names) for rec in recs]
    if not records:
        raise SieveError(f"{', '.join(map(str, run))} hold(s) no results; run rag eval first, or pass the run directory it printed")
    have = load_labels(store)
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
    stored = load_labels(store)
    result = agreement(records, stored)
    result["overlap"] = overlap_agreement(records, stored)
    result["human_e2e"] = human_accuracy(records, stored)
    result["human_paired"] = human_paired(records, stored)
    result["human_e2e_grounded"] = human_accuracy(records, stored, grounded=True)
    result["human_paired_grounded"] = human_paired(records, stored, grounded=True)
    if json_out:
        typer.echo(json.dumps(result, indent=2))
        return
    typer.echo(f"labelled answers in these runs: {result['n']}")
    for name in ("correct", "faithful"):
        r = result[name]
        acc = "—" if r["accuracy"] is None else f"{r['accuracy']:.1%}"
        kappa = "— (undefined: one label only)" if r["kappa"] is None else f"{r['kappa']:.3f}"
        typer.echo(f"{name:<9} judge accuracy {acc}  Cohen's kappa {kappa}  (judge yes {r['judge_yes']}, human yes {r['human_yes']})")
    o = result["overlap"]
    if o["n"]:
        kappa = "— (undefined: one label only)" if o["kappa"] is None else f"{o['kappa']:.3f}"
        typer.echo(f"correct by reference overlap (token F1 >= {o['threshold']}, no model), on {o['n']} labelled answers "
                   f"judged or not: accuracy {o['accuracy']:.1%}  Cohen's kappa {kappa}  (overlap yes {o['overlap_yes']}, "
                   f"human yes {o['human_yes']})")
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

    from rag.config import PROJECT_ROOT

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


# ---------------------------------------------------------------- optimization: rag compile, rag artifacts
@app.command("compile")
def compile_cmd(
    optimizer: str = typer.Option("bootstrap", help="bootstrap, random-search, mipro or gepa."),
    roles: str = typer.Option("grader,rewriter,answerer",
                              help="Comma-separated roles (grader, rewriter, answerer, judge), all, or agent (the "
                                   "whole program end to end). The judge needs human labels."),
    golden: Path = typer.Option(Path("golden/python_ref.jsonl"), help="Golden set (JSONL) with train/dev/test splits."),
    labels: Optional[Path] = typer.Option(None, help="Human judge labels (default golden/judge_labels.jsonl)."),
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

        rag compile --optimizer gepa --roles grader --max-examples 4,4,10 --budget 150

        rag compile --roles agent --max-examples 4 --dry-run

        rag compile --max-demos 1 --out qwen-bootstrap
    """
    import json

    from optimize.compile import compile_program, parse_max_examples, parse_roles
    from rag.lm.roles import configure_dspy

    settings = _settings(sets, index_dir=index_dir)
    if not dry_run:
        configure_dspy(settings)
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
    artifacts_dir: Optional[Path] = typer.Option(None, help="Where compiled programs live (default: the project's artifacts/)."),
) -> None:
    """List compiled programs with their optimizer, models and before/after scores, and whether each change is
    more than noise (a paired test over the split's examples). Selection uses dev only; test is reported.

    Examples:

        rag artifacts
    """
    from rag import artifacts as arts
    from rag.lm.roles import resolve_specs

    settings = _settings(None, artifacts_dir=artifacts_dir)
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


# ---------------------------------------------------------------- web page: rag serve
@app.command("serve")
def serve_cmd(
    host: str = typer.Option("127.0.0.1", help="Address to listen on. Anything but loopback is reachable by others, "
                             "and there is no authentication."),
    port: int = typer.Option(8000, help="Port to listen on (0 picks a free one)."),
    runs: Optional[Path] = typer.Option(None, "--runs", help="Folder of eval runs to browse (default: SIEVE_RUNS, "
                                        "else SIEVE_HOME/runs), or one run folder."),
    config: str = typer.Option("full", help="The configuration selected when the page opens (rag eval --config list)."),
    index_dir: Optional[Path] = typer.Option(None, help="Index directory (default: see rag index --help)."),
    golden: Optional[Path] = typer.Option(None, help="Golden set the example questions come from."),
    queue: int = typer.Option(8, "--queue", min=0, help="Questions that may wait for the model; more get HTTP 503."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the DSPy LM cache."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Any setting as key=value, for every configuration."),
) -> None:
    """Serve a web page to ask questions and watch each decision stream in (retrieve, grade, rewrite, answer or
    refuse), and to browse evaluation runs and compiled artifacts. JSON API under /api/ (see the README).

    Examples:

        rag serve                                   # http://127.0.0.1:8000

        rag serve --port 8080 --runs ~/.cache/sieve/runs

        rag serve --config hybrid --set answerer_model=groq/openai/gpt-oss-120b
    """
    from rag.lm.roles import configure_dspy
    from rag.serve import build_app
    from rag.serve.server import serve_forever

    _clean_warnings()
    pairs = [*(sets or []), *([f"index_dir={index_dir}"] if index_dir else []), *(["cache=false"] if no_cache else [])]
    configure_dspy(_settings(pairs))
    serve_forever(lambda: build_app(runs=runs, sets=pairs, config=config, golden=golden, max_waiting=queue), host, port)


def main() -> None:
    _clean_warnings()
    on_interrupt("")
    from rag.distributed.cluster import LOCAL, optional_value

    sys.argv[1:] = optional_value(sys.argv[1:], "--ray", LOCAL)  # `--ray [ADDRESS]`: alone, a local cluster
    try:
        app()
    except SieveError as exc:
        typer.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except (_Interrupted, KeyboardInterrupt):
        typer.echo(f"Interrupted: {_ON_INTERRUPT[0] or 'finished work was kept'}.", err=True)
        sys.exit(130)
