"""The failure catalogue, evaluation runs (issue 38, "Nothing lost", round 3: items 20, 8b, 12 and 13).

Each case runs the real CLI in this process (tests/catalogue_support.run_cli) on real files and the shared small
bm25s + FAISS index, the agent path on scripted language models (tests/test_failure_interrupts.scripted_lms), and
asserts what the catalogue asserts: the exit code, one message line naming the file, field or flag and the fix,
no traceback, and no user file changed outside the run folder being written.

* 20: a narrower ``--limit`` on a bigger finished run: summary.json still describes everything results.jsonl holds.
* 8b: a full disk (ENOSPC / EDQUOT from the low-level ``os.write``) while writing results.jsonl or summary.json:
  one line saying how many finished items are kept and about how much space is needed; results.jsonl intact.
* 12: a golden line that ``datasets`` would mangle (lone surrogate, NaN, a 100-bit integer, a string for a list)
  is an error naming file, line and field, never a silently coerced item.
* 13: gold chunk ids the index does not hold: a warning with the count and examples, ``--strict-gold`` an error.
* NaN or Infinity in a record, the summary or run.json is written as null: the run files are strict JSON.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from tests.catalogue_support import GOLDEN, check, checksums, golden, run_cli
from tests.retrieval_support import small_index
from tests.test_failure_interrupts import eval_args, scripted_lms


def result_ids(run: Path) -> list[str]:
    return [json.loads(line)["id"] for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines()]


def summary_of(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- item 20: the summary never contradicts results
def test_a_narrower_limit_on_a_finished_run_keeps_the_summary_true(user: Path, monkeypatch: pytest.MonkeyPatch):
    golden()(user)
    run = user / "run"
    scripted_lms(monkeypatch)
    assert run_cli(*eval_args(user)).code == 0
    assert summary_of(run)["n_done"] == 3
    results = (run / "results.jsonl").read_bytes()
    before = checksums(user, (run,))

    calls = scripted_lms(monkeypatch)
    res = run_cli(*eval_args(user), "--limit", "1")
    check(res, 0, r"^Warning: .*/run/results\.jsonl also holds 2 finished item\(s\) outside the 1 selected now "
                  r"\(--split/--limit\); the summary covers all 3 it holds\. .*use --out NEW_DIR")
    assert calls == []  # nothing ran again
    assert (run / "results.jsonl").read_bytes() == results
    s = summary_of(run)
    assert (s["n_done"], s["n_selected"], s["complete"], s["n_requested"], s["n_extra"]) == (3, 3, True, 1, 2)
    assert sorted(s["ids"]) == sorted(result_ids(run))
    assert "(3/3 items)" in res.out
    report = run_cli("report", run)
    assert report.code == 0 and "| Items (done / selected) | 3 / 3 |" in report.out, report.out[-2000:]
    assert checksums(user, (run,)) == before


def test_a_wider_selection_after_a_limited_run_counts_what_is_left(user: Path, monkeypatch: pytest.MonkeyPatch):
    golden()(user)
    run = user / "run"
    scripted_lms(monkeypatch)
    assert run_cli(*eval_args(user), "--limit", "1").code == 0
    s = summary_of(run)
    assert (s["n_done"], s["n_selected"], s["n_extra"]) == (1, 1, 0)
    res = run_cli(*eval_args(user))
    assert res.code == 0 and "Warning" not in res.err, res.err
    s = summary_of(run)
    assert (s["n_done"], s["n_selected"], s["complete"], s["n_requested"]) == (3, 3, True, 3)
    assert len(result_ids(run)) == 3


# ---------------------------------------------------------------- item 8b: a full disk while writing the run
def full_disk_at(monkeypatch: pytest.MonkeyPatch, name: str, *, after: int, code: int = errno.ENOSPC) -> list[int]:
    """``os.write`` to ``name`` (a file of the run) fails with ``code`` once ``after`` writes to it succeeded; the
    failing write first writes half its bytes, as a disk that fills mid-write does. Other files write normally."""
    real = os.write
    seen: list[int] = []

    def write(fd: int, data) -> int:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if os.path.basename(target) != name:
            return real(fd, data)
        seen.append(len(data))
        if len(seen) <= after:
            return real(fd, data)
        if len(seen) == after + 1 and len(data) > 1:
            return real(fd, bytes(data[: len(data) // 2]))  # a short write; the rest then finds no space
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "write", write)
    return seen


@pytest.mark.parametrize(("code", "says"), [(errno.ENOSPC, "no space left on device"),
                                            (errno.EDQUOT, "disk quota exceeded")])
def test_a_full_disk_writing_the_summary_keeps_every_finished_item(user: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   code: int, says: str):
    golden()(user)
    run = user / "run"
    before = checksums(user, (run,))
    scripted_lms(monkeypatch)
    real_write = os.write
    full_disk_at(monkeypatch, "summary.json.tmp", after=1, code=code)  # the summary written before the items runs
    res = run_cli(*eval_args(user))
    check(res, 1, rf"^Error: {says} writing .*/run/summary\.json: 3 finished item\(s\) are kept in "
                  r".*/run/results\.jsonl; free about \d+ KB \(for the summary\) and run the same command again to "
                  r"resume$")
    assert sorted(result_ids(run)) == ["g-assert", "g-mars", "g-while"]  # whole lines, nothing torn
    assert not (run / "summary.json.tmp").exists()
    assert summary_of(run)["n_done"] == 0  # the summary from before the items ran, intact

    monkeypatch.setattr(os, "write", real_write)  # space again (not undo(): that would drop the test's SIEVE_HOME)
    calls = scripted_lms(monkeypatch)
    res = run_cli(*eval_args(user))
    assert res.code == 0 and "Traceback" not in res.err, res.err
    assert calls == [] and summary_of(run)["n_done"] == 3  # the rerun resumed: nothing ran twice
    assert checksums(user, (run,)) == before


def test_a_full_disk_writing_a_result_cuts_the_partial_line_and_resumes(user: Path, monkeypatch: pytest.MonkeyPatch):
    golden()(user)
    run = user / "run"
    scripted_lms(monkeypatch)
    real_write = os.write
    full_disk_at(monkeypatch, "results.jsonl", after=1)  # the second item's record finds the disk full mid-line
    res = run_cli(*eval_args(user))
    check(res, 1, r"^Error: no space left on device writing .*/run/results\.jsonl: 1 finished item\(s\) are kept in "
                  r".*/run/results\.jsonl; free about \d+ KB \(for 2 item\(s\) left and the summary\) and run the "
                  r"same command again to resume$")
    data = (run / "results.jsonl").read_bytes()
    assert data.endswith(b"\n") and len(result_ids(run)) == 1  # the half-written line was cut off again
    assert not list(run.glob("results.jsonl.torn-*"))

    monkeypatch.setattr(os, "write", real_write)
    scripted_lms(monkeypatch)
    res = run_cli(*eval_args(user))
    assert res.code == 0 and "torn" not in res.err, res.err
    ids = result_ids(run)
    assert ids[0] == json.loads(data)["id"] and sorted(ids) == ["g-assert", "g-mars", "g-while"]


# ---------------------------------------------------------------- item 12: the golden loader never coerces
ONE = {**GOLDEN[0]}
LINE = json.dumps(ONE)


@pytest.mark.parametrize(("text", "says"), [
    (LINE.replace("assert statement", "assert \\ud800 statement"),
     r"^Error: .*/golden\.jsonl:1: field 'question' holds a lone surrogate escape \(e\.g\. \\ud800\), which is not "
     r"valid Unicode; fix the text that wrote it$"),
    (LINE.replace('"assert#000"', '"assert#000\\udc00"'),
     r"^Error: .*/golden\.jsonl:1: field 'relevant_chunk_ids' holds a lone surrogate escape"),
    (LINE.replace('["assert#000"]', '"assert#000"'),
     r"^Error: .*/golden\.jsonl:1: field 'relevant_chunk_ids' must be a list of non-empty strings, got 'assert#000'"),
    (LINE[:-1] + ', "weight": NaN}',
     r"^Error: .*/golden\.jsonl:1: field 'weight' holds NaN or Infinity, which JSON does not allow; use null"),
    (LINE[:-1] + ', "weight": 123456789012345678901234567890}',  # pyarrow cannot hold it: the pandas fallback
     r"^Error: .*/golden\.jsonl:1: field 'weight' holds 123456789012345678901234567890, which datasets reads as "
     r"1\.23456789\d*e\+29; write it so it loads unchanged"),
], ids=["surrogate in question", "surrogate in a gold id", "a string for a list", "NaN", "a 100-bit integer"])
def test_a_golden_line_datasets_would_mangle_is_an_error(user: Path, text: str, says: str):
    golden(text + "\n")(user)
    before = checksums(user)
    res = run_cli("eval", "--retrieval-only", "--golden", user / "golden.jsonl", "--index-dir", small_index().dir)
    check(res, 1, says)
    assert "recall" not in res.out  # refused before anything was scored
    assert checksums(user) == before


def test_golden_values_are_the_ones_on_the_line(tmp_path: Path):
    """A file datasets reads through its Arrow path: every value, nested ones included, is exactly the line's."""
    from rag.eval.golden import load_golden

    rows = [{**GOLDEN[0], "meta": {"a": 1}, "weight": 2},
            {**GOLDEN[1], "meta": {"b": "x"}, "weight": 2.5, "relevant_chunk_ids": ["while#000", "while#001"]},
            {**GOLDEN[2], "weight": 1.5, "rows": [[1.93], [2.0]]}]  # Arrow reads 1.93 as 1.9300000000000002
    path = tmp_path / "g.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    items = load_golden(path)
    assert [it.relevant_chunk_ids for it in items[:2]] == [["assert#000"], ["while#000", "while#001"]]
    assert items[0].meta == {"a": 1, "weight": 2, "line": 1}  # no None-filled key "b" from Arrow's struct
    assert items[1].meta == {"b": "x", "weight": 2.5, "line": 2}
    assert type(items[0].meta["weight"]) is int
    assert items[2].meta["rows"] == [[1.93], [2.0]]  # the line's value, not Arrow's last-place difference


# ---------------------------------------------------------------- item 13: gold ids the index does not hold
FOREIGN = [{**GOLDEN[0], "relevant_chunk_ids": ["assert#000", "assert.md#004"]},
           {**GOLDEN[1], "relevant_chunk_ids": ["while.md#002"]}, GOLDEN[3]]
MISSING = (r"2 of 3 gold chunk id\(s\) in relevant_chunk_ids are not in the index: 'assert\.md#004' \(item "
           r"g-assert\), 'while\.md#002' \(item g-while\); they count as never retrieved \(was the golden set "
           r"written against another chunking\?\)")


def test_gold_ids_missing_from_the_index_are_warned_about(user: Path):
    golden(FOREIGN)(user)
    before = checksums(user)
    res = run_cli("eval", "--retrieval-only", "--golden", user / "golden.jsonl", "--index-dir", small_index().dir)
    check(res, 0, rf"^Warning: {MISSING}; strict_gold=True \(rag eval --strict-gold\) makes this an error$")
    assert "items=3" in res.out
    assert checksums(user) == before


def test_strict_gold_makes_missing_gold_ids_an_error(user: Path):
    golden(FOREIGN)(user)
    res = run_cli("eval", "--retrieval-only", "--golden", user / "golden.jsonl", "--index-dir", small_index().dir,
                  "--strict-gold")
    check(res, 1, rf"^Error: {MISSING}\. Fix relevant_chunk_ids, or rebuild the index with the chunking they were "
                  r"written for$")
    assert "recall" not in res.out


def test_gold_ids_that_are_all_in_the_index_say_nothing(user: Path):
    golden()(user)
    res = run_cli("eval", "--retrieval-only", "--golden", user / "golden.jsonl", "--index-dir", small_index().dir,
                  "--strict-gold")
    assert res.code == 0 and "Warning" not in res.err and "Error" not in res.err, res.err


def test_agent_eval_warns_and_strict_refuses_before_the_run_starts(user: Path, monkeypatch: pytest.MonkeyPatch):
    golden(FOREIGN)(user)
    calls = scripted_lms(monkeypatch)
    res = run_cli(*eval_args(user), "--strict-gold")
    check(res, 1, rf"^Error: {MISSING}\. Fix relevant_chunk_ids")
    assert calls == [] and not (user / "run" / "results.jsonl").exists()
    res = run_cli(*eval_args(user))
    check(res, 0, rf"^Warning: {MISSING}; strict_gold=True")
    assert sorted(result_ids(user / "run")) == ["g-assert", "g-mars", "g-while"]  # the warned run still runs


# ---------------------------------------------------------------- run files are JSON every parser reads
def strict_json(text: str):
    def refuse(constant: str):
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_nan_in_a_record_or_the_summary_is_written_as_null(user: Path, monkeypatch: pytest.MonkeyPatch):
    """A score that came out NaN (a timer that failed, a metric of nothing) is null in results.jsonl, summary.json
    and run.json, never the bare ``NaN`` token Python's json writes and most parsers refuse; one record per line."""
    import rag.eval.runs
    from rag.eval.runs import append_record, open_run, read_records, write_summary
    from tests._traces import answer, item, pred, record, retrieve

    summarize = rag.eval.runs.summarize  # the records are read back from disk (null by then): a metric of nothing
    monkeypatch.setattr(rag.eval.runs, "summarize", lambda scores: (lambda s: {
        **s, "metrics": {**s["metrics"], "false_refusal_rate": float("nan")}, "spread": float("inf")})(summarize(scores)))
    run = user / "run"
    its = [item("a1"), item("a2")]
    open_run(run, {"config_name": "baseline", "golden_hash": "abc",
                   "config": {"top_k": 2, "reflection": False, "expansion_weight": float("inf")}})
    for it in its:
        rec = record(it, pred([retrieve("g1", "x"), answer(["g1"])], citations=["g1"]), {"g1"},
                     judge={"correct": True, "faithful": True, "reason": "ok"}, k=2)
        rec["scores"] = {**rec["scores"], "latency_ms": float("nan"), "cost": float("nan")}
        append_record(run, {**rec, "config": "baseline", "extra": [float("-inf"), 1.5]})
    summary = write_summary(run, its, config_name="baseline", ghash="abc", k=2, max_rewrites=0)
    assert summary["metrics"]["false_refusal_rate"] != summary["metrics"]["false_refusal_rate"]  # NaN in memory

    lines = (run / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and all(line.startswith("{") and line.endswith("}") for line in lines)
    for line in lines:
        rec = strict_json(line)
        assert rec["scores"]["latency_ms"] is None and rec["scores"]["cost"] is None and rec["extra"] == [None, 1.5]
    on_disk = strict_json((run / "summary.json").read_text(encoding="utf-8"))
    assert on_disk["metrics"]["false_refusal_rate"] is None and on_disk["spread"] is None
    assert on_disk["metrics"]["latency_p50_ms"] is None and on_disk["metrics"]["cost_per_query"] is None
    assert strict_json((run / "run.json").read_text(encoding="utf-8"))["config"]["expansion_weight"] is None
    assert [r["id"] for r in read_records(run)] == ["a1", "a2"]
    res = run_cli("report", run)  # and the run reads back
    assert res.code == 0 and "Traceback" not in res.err, res.err[-2000:]
