"""``rag golden``: draft an evaluation set for your own index, check it, review it by hand or by a model
(rag.curate.draft, rag.curate.review, rag.report.golden_checks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from rag.cli.common import app, at_least, check_readable, clean_warnings, err, on_interrupt, settings_from
from rag.errors import SieveError

golden_app = typer.Typer(help="Draft an evaluation set for your own documents, check it, and review it by hand or by a model.",
                         no_args_is_help=True)
app.add_typer(golden_app, name="golden")


@golden_app.command("draft")
def draft_cmd(
    out: Path = typer.Option(..., "--out", readable=False, help="The JSONL file to write (appended to as items are drafted; the same command resumes it). Drops go to OUT.dropped.jsonl."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", readable=False, help="Index folder (default: $SIEVE_HOME/index)."),
    n: int = typer.Option(60, "--n", help="How many items to draft (one seed passage each)."),
    types: str = typer.Option("answerable=0.6,vague=0.15,unanswerable=0.25", "--types", help="The mix of question types, type=fraction (normalised)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the passage sampling: the same seed and index give the same seeds."),
    pool: int = typer.Option(5, "--pool", help="Dense and BM25 hits pooled per question (each), plus the seed, for the gold labels."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Override a setting, key=value (repeatable), e.g. judge_model=groq/qwen/qwen3-32b."),
) -> None:
    """Draft a golden set from an index: questions by the answerer's model, gold passages labelled by the judge's.

    Seed passages are sampled across documents and sections. Each answerable item asks a fact its seed states (with a reference answer), each vague one asks it in loose words, each unanswerable one asks what the seed's document does not cover. The top --pool dense and BM25 hits plus the seed are labelled relevant or not, one at a time, by the judge role's model: relevant_chunk_ids are those labelled relevant, and an unanswerable draft that a pooled passage answers is dropped (with why). Splits are 40/20/40 train/dev/test, by type and document. The checks are printed at the end.

    Examples:
      rag golden draft --out mine.jsonl --index-dir ~/docs-index
      rag golden draft --out mine.jsonl --n 120 --types answerable=0.5,vague=0.25,unanswerable=0.25 --seed 3
      rag golden draft --out mine.jsonl --set judge_model=groq/qwen/qwen3-32b   # labels from another model
    """
    from rag.curate.draft import draft_set
    from rag.curate.plan import parse_types

    clean_warnings()
    at_least(1, n=n, pool=pool)
    check_readable(index_dir, "--index-dir")
    mix = parse_types(types)  # before the index or any model loads
    settings = settings_from(sets, index_dir=index_dir)
    from rag.retrieval.retriever import Retriever

    retriever = Retriever.from_settings(settings, reranker=None)  # the pool is first-stage hits, never reranked

    def models() -> dict[str, Any]:
        from rag.lm.configure import configure_dspy, lms_for_roles

        configure_dspy(settings)
        return lms_for_roles(settings)

    on_interrupt(f"the items drafted so far are kept in {out}; run the same command again to resume")
    result = draft_set(retriever, out, n=n, mix=mix, seed=seed, pool=pool, lms=models, log=err)
    err(f"{len(result.kept)} kept and {len(result.dropped)} dropped now, {result.resumed} done before, "
        f"{len(result.skipped)} skipped (unparsable replies; a rerun with --set cache=false asks again); "
        f"{result.calls} model calls")
    _print_checks(out, list(retriever.index.chunks))


@golden_app.command("check")
def check_cmd(
    file: Path = typer.Argument(..., readable=False, help="A golden set JSONL (drafted or hand-written)."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", readable=False, help="Index to count coverage against (default: the one the items were drafted from, when it is there)."),
) -> None:
    """Print the checks of a golden set: counts by type and split, coverage, items without gold, pools, near-duplicates, the review, drops.

    The review: decisions (accept, edit, reject) by reviewer (human or model), the share kept, and where a human decided items the model had reviewed, their agreement on those items with n.

    Examples:
      rag golden check mine.jsonl
      rag golden check golden/python_ref.jsonl --index-dir ~/.cache/sieve/index
    """
    clean_warnings()
    for path, flag in ((file, "FILE"), (index_dir, "--index-dir")):
        check_readable(path, flag)
    if not file.is_file():
        raise SieveError(f"no such golden file {file}; give the JSONL file rag golden draft wrote (or any golden set)")
    _print_checks(file, _chunks(file, index_dir))


@golden_app.command("review")
def review_cmd(
    file: Path = typer.Argument(..., readable=False, help="A golden set JSONL; each decision is written into it at once."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", readable=False, help="Index to show the passages from (default: the one the items were drafted from)."),
    max_items: int = typer.Option(200, "--max-items", help="Most items reviewed in one session (by hand or --auto)."),
    auto: bool = typer.Option(False, "--auto", help="Review by the judge role's model instead of by hand: keep or reject each item no one has reviewed yet, with a reason."),
    redo_auto: bool = typer.Option(False, "--redo-auto", help="With --auto (implied): also review again the items whose latest decision is the model's. A human's decision is never changed."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Override a setting for --auto, key=value (repeatable), e.g. judge_model=groq/qwen/qwen3-32b."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar (--auto)."),
) -> None:
    """Review a golden set: by hand (accept, edit, reject or skip each item no human has reviewed yet), or by a model (--auto).

    By hand, each item shows its question, type, reference answer, gold passages and, when the model reviewed it, the model's decision and reason; reply a (accept), e (edit the question and reference answer), r (reject), s (skip) or q (quit). Every decision is written into FILE as it is made (review, reviewed_by: human), so a session can stop anywhere and the next one resumes.

    With --auto the judge role's model reads each item not yet reviewed, with the text of its gold and seed passages, and keeps it (review: accept) or rejects it, with a reason (review_reason); reviewed_by is the model's name. A rerun skips reviewed items, a human's decision is never overwritten, and an output with no usable decision leaves the item unreviewed with a note. rag eval --golden FILE --reviewed-only then scores the accepted and edited items alone (--reviewed-by human: a human's decisions only).

    Examples:
      rag golden review mine.jsonl
      rag golden review mine.jsonl --index-dir ~/docs-index --max-items 20
      rag golden review mine.jsonl --auto --set judge_model=groq/qwen/qwen3-32b
      rag golden review mine.jsonl --redo-auto   # the model's own decisions again, e.g. after changing judge_model
    """
    from rag.curate.review import review_golden

    clean_warnings()
    at_least(1, max_items=max_items)
    for path, flag in ((file, "FILE"), (index_dir, "--index-dir")):
        check_readable(path, flag)
    auto = auto or redo_auto
    if sets and not auto:
        raise SieveError("--set applies to the automatic review only; add --auto, or drop --set")
    if not file.is_file():
        raise SieveError(f"no such golden file {file}; draft one with rag golden draft --out {file}")
    chunks = _chunks(file, index_dir)
    if auto:
        _auto_review(file, chunks, index_dir=index_dir, sets=sets, redo=redo_auto, max_items=max_items,
                     show_progress=not quiet)
        return
    by_id = {c.id: c for c in chunks or ()}
    on_interrupt(f"every decision made is saved in {file}; run the same command again to go on")
    done = review_golden(file, ask=lambda p: typer.prompt(p, default="", show_default=False), show=typer.echo,
                         passages=lambda ids: [(i, by_id[i].title, by_id[i].text) for i in ids if i in by_id],
                         max_items=max_items)
    typer.echo("decisions: " + (", ".join(f"{k} {v}" for k, v in sorted(done.items())) or "none"))
    _print_review(file)


def _auto_review(file: Path, chunks: Optional[list], *, index_dir: Optional[Path], sets: Optional[list[str]],
                 redo: bool, max_items: int, show_progress: bool) -> None:
    """``rag golden review FILE --auto``: the judge role's model reviews (rag.curate.review.auto_review_golden)."""
    from rag.curate.review import auto_review_golden

    if not chunks:
        raise SieveError(f"the automatic review reads each item's passages from an index and none is at hand for {file}; "
                         "give --index-dir (the index the items were drafted from)")
    settings = settings_from(sets, index_dir=index_dir)
    from rag.lm.configure import configure_dspy, lms_for_roles

    configure_dspy(settings)
    lm = lms_for_roles(settings)["judge"]
    model = str(lm.model)  # as the trace names it: embedded/qwen2.5-coder-1.5b, groq/..., gguf/<file stem>
    err(f"reviewing on the judge role's model: {model}")
    on_interrupt(f"every decision made is saved in {file}; run the same command again to go on")
    result = auto_review_golden(file, lm=lm, model=model, chunks=chunks, redo=redo, max_items=max_items,
                                show_progress=show_progress, log=err)
    kept, rejected = result.decided["accept"], result.decided["reject"]
    typer.echo(f"decisions: kept {kept}, rejected {rejected}, left unreviewed with a note {len(result.notes)} "
               f"(a rerun tries them again); {result.reviewed_before} reviewed before; {result.calls} model calls")
    _print_review(file)


def _print_review(file: Path) -> None:
    """The review of the whole file (rag.report.golden_checks.review_lines)."""
    from rag.curate.draft import read_lines
    from rag.report.golden_checks import review_lines, review_summary

    for line in review_lines(review_summary(read_lines(file))):
        typer.echo(line)


def _chunks(file: Path, index_dir: Optional[Path]) -> Optional[list]:
    """The chunks of ``--index-dir``, else of the index the items were drafted from (a warning, and None, when that
    one cannot be opened), else None."""
    from rag.config import load_settings
    from rag.curate.review import drafted_index
    from rag.index.store import Index

    if index_dir is not None:
        return list(Index.load(index_dir, load_settings({"index_dir": index_dir})).chunks)
    recorded = drafted_index(file)
    if recorded is None:
        return None  # not a drafted set: no index to read
    try:
        return list(Index.load(recorded, load_settings({"index_dir": recorded})).chunks)
    except SieveError as exc:
        err(f"the index the items were drafted from cannot be opened ({exc}); give --index-dir to show its passages")
        return None


def _print_checks(file: Path, chunks: Optional[list]) -> None:
    from rag.curate.draft import dropped_path, read_lines
    from rag.eval.golden import load_golden
    from rag.report.golden_checks import check_lines, set_checks

    items = load_golden(file) if file.is_file() and file.stat().st_size else []
    for line in check_lines(set_checks(items, read_lines(dropped_path(file)), chunks)):
        typer.echo(line)
