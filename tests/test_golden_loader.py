"""Golden-set loading (datasets), validation with line numbers, gold chunk resolution, DSPy examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.errors import InputError
from rag.eval.golden import GoldenItem, gold_chunk_ids, load_golden, to_examples
from rag.ingest.chunking import Chunk
from tests.retrieval_support import SHARED

GOOD = [
    {"id": "q1", "type": "answerable", "question": "How long is PTO notice?", "reference_answer": "7 days",
     "should_refuse": False, "relevant_chunk_ids": ["leave.md#002"], "evidence": ["7 days' advance notice"], "split": "dev",
     "category": "leave"},
    {"id": "q2", "type": "unanswerable", "question": "What is the CEO's salary?", "reference_answer": "",
     "relevant_chunk_ids": [], "split": "dev", "category": "pay"},
    {"id": "q3", "type": "vague", "question": "time off?", "reference_answer": "Depends.", "should_refuse": False,
     "evidence": ["Paid Time Off"], "category": "leave"},
]


def write(path: Path, records: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def test_load_valid_golden_file(tmp_path: Path):
    items = load_golden(write(tmp_path / "g.jsonl", GOOD))
    assert [i.id for i in items] == ["q1", "q2", "q3"]
    q1, q2, q3 = items
    assert isinstance(q1, GoldenItem) and q1.relevant_chunk_ids == ["leave.md#002"] and q1.split == "dev"
    assert q1.meta["category"] == "leave" and q1.meta["line"] == 1
    assert q2.should_refuse is True  # unanswerable without the field defaults to refusing
    assert q3.should_refuse is False and q3.relevant_chunk_ids == [] and q3.evidence == ["Paid Time Off"]
    assert q3.split is None


def test_blank_lines_keep_line_numbers(tmp_path: Path):
    items = load_golden(write(tmp_path / "g.jsonl", [GOOD[0], "", GOOD[1]]))
    assert [i.meta["line"] for i in items] == [1, 3]


@pytest.mark.parametrize(("bad", "pattern"), [
    ('{"id": "x", "type": "answerable", "question": "q"', r"g\.jsonl:2: invalid JSON"),
    ({"id": "x", "type": "answerable"}, r"g\.jsonl:2: field 'question' is missing"),
    ({"type": "answerable", "question": "q"}, r"g\.jsonl:2: field 'id' is missing"),
    ({"id": "x", "type": "maybe", "question": "q"}, r"g\.jsonl:2: field 'type' must be one of answerable, vague, unanswerable"),
    ({"id": "x", "type": "vague", "question": "q", "should_refuse": "yes"}, r"g\.jsonl:2: field 'should_refuse' must be true or false"),
    ({"id": "x", "type": "vague", "question": "q", "relevant_chunk_ids": "a#000"}, r"g\.jsonl:2: field 'relevant_chunk_ids' must be a list"),
    ({"id": "x", "type": "vague", "question": "q", "evidence": [""]}, r"g\.jsonl:2: field 'evidence' must be a list of non-empty"),
    ({"id": "q1", "type": "vague", "question": "q"}, r"g\.jsonl:2: field 'id' repeats 'q1' from line 1"),
    ("[1, 2]", r"g\.jsonl:2: expected a JSON object"),
])
def test_invalid_lines_report_line_and_field(tmp_path: Path, bad, pattern: str):
    with pytest.raises(InputError, match=pattern):
        load_golden(write(tmp_path / "g.jsonl", [GOOD[0], bad]))


def test_empty_and_missing_files(tmp_path: Path):
    (tmp_path / "e.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="no golden items"):
        load_golden(tmp_path / "e.jsonl")
    with pytest.raises(InputError, match="no such golden file"):
        load_golden(tmp_path / "none.jsonl")


def test_gold_chunk_ids_union_of_ids_and_evidence_with_whitespace_collapsed():
    chunks = [Chunk("a#000", "Give 7 days'\n   advance notice in Workday."), Chunk("a#001", "Paid  Time\tOff accrues."),
              Chunk("b#000", "unrelated")]
    item = GoldenItem("q", "answerable", "?", "", False, ["z#009"], ["7 days' advance notice", "Paid Time Off"], None, {})
    assert gold_chunk_ids(item, chunks) == {"z#009", "a#000", "a#001"}
    none = GoldenItem("q", "unanswerable", "?", "", True, [], [], None, {})
    assert gold_chunk_ids(none, chunks) == set()


def test_to_examples_has_question_as_only_input(tmp_path: Path):
    examples = to_examples(load_golden(write(tmp_path / "g.jsonl", GOOD)))
    assert len(examples) == 3
    ex = examples[0]
    assert set(ex.inputs().keys()) == {"question"}
    assert ex.reference_answer == "7 days" and ex.relevant_chunk_ids == ["leave.md#002"] and ex.should_refuse is False
    assert set(ex.labels().keys()) >= {"reference_answer", "should_refuse", "relevant_chunk_ids", "type"}


@pytest.mark.skipif(not (SHARED / "polygraph").is_dir(), reason="shared polygraph benchmark not present at ../shared/benchmarks")
def test_polygraph_golden_dev_loads():
    items = load_golden(SHARED / "polygraph" / "golden_dev.jsonl")
    assert len(items) == 35
    assert sum(i.type == "unanswerable" for i in items) == 10
    assert all(i.should_refuse for i in items if i.type == "unanswerable")
    assert sum(bool(i.relevant_chunk_ids) for i in items) == 25
