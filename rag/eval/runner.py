"""Run the agent over golden items, judge and score each, and write the results as they finish.

Results go to a run directory (layout in rag.eval.runs; by default ``sieve_home()/runs/<config>-<golden hash>/``).
Running again with the same config and golden file resumes: items already in ``results.jsonl`` are
skipped. A directory that holds another config or golden hash is refused (use another ``--out``).
An item whose agent raises is recorded with ``status: "error"`` (it counts as wrong); a fatal error
(``is_fatal``: Ctrl-C, ModelError including QuotaExhausted, auth/billing/rate-limit/transport errors, a full disk)
stops the run, keeping what finished, and is raised again. Gold chunk ids the index does not hold are warned
about before anything runs (``strict_gold=True``: refused).
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from rag.agent.judging import AnswerJudge, answer_passages
from rag.agent.module import prediction_to_dict
from rag.errors import InputError, ModelError, SieveError
from rag.eval.agent_metrics import score_item
from rag.eval.data_metrics import DATA_KEYS
from rag.eval.golden import check_gold_in_index, gold_chunk_ids
from rag.eval.runs import (
    RESULTS,
    DiskFull,
    append_record,
    items_hash,
    now,
    open_run,
    read_records,
    repair_torn_tail,
    write_summary,
)
from rag.usage.latency import LatencyLedger

MAX_CAUSES = 10  # how deep an exception's cause chain is searched for a run-stopping error


def is_fatal(exc: BaseException) -> bool:
    """Errors that stop the whole run: Ctrl-C, Sieve's ModelError (QuotaExhausted...) and DiskFull, and DSPy's auth,
    billing, rate-limit, configuration and transport errors, also when DSPy wrapped them (searched along ``__cause__``)."""
    from dspy.utils.exceptions import (
        LMAuthError,
        LMBillingError,
        LMConfigurationError,
        LMRateLimitError,
        LMTransportError,
    )

    fatal = (KeyboardInterrupt, ModelError, DiskFull, LMAuthError, LMBillingError, LMConfigurationError, LMRateLimitError,
             LMTransportError)
    return _find(exc, fatal) is not None


def _find(exc: BaseException | None, kinds: tuple[type, ...]) -> BaseException | None:
    for _ in range(MAX_CAUSES):
        if exc is None or isinstance(exc, kinds):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def chunk_texts(chunks: Iterable[Any]) -> dict[str, str]:
    """``{chunk_id: text}`` from Index.chunks (objects with chunk_id/id and text) or dicts."""
    out = {}
    for c in chunks:
        if isinstance(c, Mapping):
            out[str(c.get("chunk_id") or c.get("id"))] = c.get("text", "")
        else:
            out[str(getattr(c, "chunk_id", None) or c.id)] = getattr(c, "text", "")
    return out


def run_eval(items: Sequence[Any], agent: Any, judge_lm: Any, out_dir: str | Path, config_name: str, *,
             chunks: Iterable[Any] = (), ghash: str = "", config: Mapping[str, Any] | None = None,
             k: int | None = None, threads: int = 1, limit: int | None = None, judge: bool = True,
             latency_ledger: str | Path | None = None, show_progress: bool = True,
             answer_judge: AnswerJudge | None = None, runner: "ItemRunner | None" = None,
             strict_gold: bool = False) -> dict[str, Any]:
    """Run, judge and score ``items`` (the first ``limit``), resuming what ``out_dir`` already holds.

    ``agent(question=...)`` returns the Sieve prediction; ``judge_lm`` grades answered items (None = the
    configured dspy LM; ``judge=False`` skips judging); ``answer_judge`` (e.g. a compiled one) replaces that judge.
    ``latency_ledger`` (a JSONL path, see rag.usage.latency) lets cached LM steps be charged their originally measured
    latency. Returns the summary also in summary.json: the selected items plus any other finished item of the
    run (a warning says so), so it always describes everything results.jsonl holds. Gold ids not in ``chunks``
    (the index) are a warning naming them, an InputError with ``strict_gold``. A full disk is ``DiskFull``.

    ``runner(todo, finish, **item_ctx)`` replaces the in-process loop (``rag.distributed.eval`` runs items on Ray
    workers, each building :func:`item_context` from ``item_ctx`` and its own program): it must call
    ``finish(record)`` once per finished item, on this thread (the only writer of results.jsonl), and return the
    run-stopping error, if any. ``agent`` is then used only for ``k`` and the rewrite bound.
    """
    if threads < 1:
        raise InputError(f"--threads must be >= 1, got {threads}")
    out_dir = Path(out_dir)
    selected = list(items)[:limit] if limit is not None else list(items)
    chunks = list(chunks)
    check_gold_in_index(selected, chunk_texts(chunks), strict=strict_gold)
    k = k or getattr(agent, "top_k", 4)
    max_rewrites = getattr(agent, "max_rewrites", 0) if getattr(agent, "use_reflection", True) else 0
    open_run(out_dir, {"config_name": config_name, "golden_hash": ghash, "items_hash": items_hash(selected),
                       "config": dict(config or {})})
    backup = repair_torn_tail(out_dir)
    if backup is not None:
        print(f"cut a torn last line off {out_dir / 'results.jsonl'} (a run stopped mid-write; its item runs again); "
              f"the file as it was is kept in {backup}", file=sys.stderr)
    done = {r["id"] for r in read_records(out_dir)}
    todo = [it for it in selected if it.id not in done]
    judge_fn = (answer_judge or AnswerJudge(judge_lm)) if judge and runner is None else None
    ctx = item_context(chunks=chunks, judge=judge_fn, latency_ledger=latency_ledger, k=k, max_rewrites=max_rewrites,
                       config_name=config_name)
    # The selection is on disk before the first item runs: a run killed outright (SIGKILL, power loss) still
    # says "n of 62 done" to rag report instead of passing off what finished as the whole selection.
    first = write_summary(out_dir, selected, config_name=config_name, ghash=ghash, k=k, max_rewrites=max_rewrites)
    if first["n_extra"]:
        warnings.warn(f"{out_dir / RESULTS} also holds {first['n_extra']} finished item(s) outside the "
                      f"{len(selected)} selected now (--split/--limit); the summary covers all {first['n_selected']} "
                      "it holds. For a summary of only the selection, use --out NEW_DIR", stacklevel=2)
    lock, count = threading.Lock(), [len(selected) - len(todo)]
    if show_progress and count[0]:
        print(f"resuming {out_dir}: {count[0]} of {len(selected)} items already done", file=sys.stderr)

    def finish(record: dict[str, Any]) -> None:
        with lock:
            append_record(out_dir, record, items_left=len(selected) - count[0])
            count[0] += 1
            if show_progress:
                s = record["scores"]
                state = "error" if record["status"] == "error" else ("refused" if s["refused"] else "answered")
                mark = {True: " correct", False: " wrong"}.get(s.get("judged_correct"), "")
                print(f"[{count[0]}/{len(selected)}] {record['id']}: {state}{mark} "
                      f"({record['wall_ms'] / 1000:.1f} s)", file=sys.stderr)

    failure: BaseException | None = None
    try:
        if runner is not None:
            failure = runner(todo, finish, latency_ledger=latency_ledger, k=k, max_rewrites=max_rewrites,
                             config_name=config_name)
        elif threads == 1:
            for it in todo:
                finish(run_item(it, agent, **ctx))
        else:
            failure = _run_parallel(todo, agent, threads, finish, ctx)
    except BaseException as exc:  # fatal errors, and bugs: keep what finished, then raise
        failure = exc
    summary = write_summary(out_dir, selected, config_name=config_name, ghash=ghash, k=k, max_rewrites=max_rewrites)
    if failure is not None:
        if show_progress:
            print(f"stopped after {summary['n_done']} of {summary['n_selected']} items: {failure!r}; "
                  "run the same command again to resume", file=sys.stderr)
        raise _find(failure, (SieveError,)) or failure  # the Sieve error DSPy wrapped, for a clean CLI message
    return summary


ItemRunner = Callable[..., "BaseException | None"]  # (todo, finish, **item_ctx) -> the run-stopping error


def item_context(*, chunks: Iterable[Any], judge: AnswerJudge | None, latency_ledger: str | Path | None, k: int,
                 max_rewrites: int, config_name: str) -> dict[str, Any]:
    """The keyword arguments :func:`run_item` takes besides the item and the agent."""
    chunks = list(chunks)
    return dict(chunks=chunks, texts=chunk_texts(chunks), judge=judge, ledger=LatencyLedger(latency_ledger), k=k,
                max_rewrites=max_rewrites, config_name=config_name)


def _run_parallel(todo, agent, threads, finish, ctx) -> BaseException | None:
    """Items on a bounded thread pool; the first aborting error cancels what has not started."""
    failure = None
    with ThreadPoolExecutor(max_workers=threads) as pool:
        pending: set[Future] = set()
        queue = list(todo)
        while queue or pending:
            while queue and len(pending) < threads and failure is None:
                run = contextvars.copy_context().run  # keep dspy.context() overrides inside the workers
                pending.add(pool.submit(run, run_item, queue.pop(0), agent, **ctx))
            if failure is not None:
                queue.clear()
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                try:
                    finish(fut.result())
                except BaseException as exc:
                    if not is_fatal(exc):
                        raise
                    failure = failure or exc
    return failure


def run_item(item: Any, agent: Any, *, chunks: Sequence[Any], texts: Mapping[str, str],
              judge: AnswerJudge | None, ledger: LatencyLedger, k: int, max_rewrites: int, config_name: str) -> dict[str, Any]:
    """Run, judge and score one item: its results.jsonl record. Agent errors are recorded; fatal ones raise."""
    start = time.perf_counter()
    gold = set(gold_chunk_ids(item, chunks))
    prediction, error, verdict = None, None, None
    try:
        asked = {"history": item.history} if getattr(item, "history", None) else {}  # a follow-up: its conversation
        prediction = prediction_to_dict(agent(question=item.question, **asked))
        ledger.apply(prediction["trace"]["question"], prediction["trace"]["steps"])
    except Exception as exc:  # recorded; the item counts as wrong
        if is_fatal(exc):
            raise
        error = f"{type(exc).__name__}: {exc}"
    if prediction is not None and not prediction["refused"] and judge is not None:
        try:
            verdict = judge(item.question, item.reference_answer, prediction["answer"],
                            answer_passages(prediction, texts))
        except Exception as exc:
            if is_fatal(exc):
                raise
            verdict = {"error": f"{type(exc).__name__}: {exc}"}
    usable = verdict if verdict and "error" not in verdict else None
    return {"id": item.id, "type": item.type, "split": item.split, "question": item.question,
            "reference_answer": item.reference_answer, "should_refuse": bool(item.should_refuse),
            "gold_ids": sorted(gold), "evidence": list(item.evidence), "config": config_name,
            **({"data_gold": {k: item.meta[k] for k in DATA_KEYS if k in item.meta}} if "route" in item.meta else {}),
            "status": "error" if prediction is None else "ok", "error": error, "prediction": prediction,
            "judge": verdict,
            "scores": score_item(item, prediction, gold, k=k, max_rewrites=max_rewrites, judge=usable,
                                 chunk_text=texts, error=error),
            "wall_ms": (time.perf_counter() - start) * 1000, "finished_at": now()}
