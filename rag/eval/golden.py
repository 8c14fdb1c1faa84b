"""Golden sets: JSONL questions with reference answers and gold evidence.

One JSON object per line::

    {"id": "q1", "type": "answerable", "question": "...", "reference_answer": "...",
     "should_refuse": false, "relevant_chunk_ids": ["doc.md#002"], "evidence": ["verbatim words"],
     "split": "dev"}

``type`` is ``answerable`` | ``vague`` | ``unanswerable``. Gold evidence is ``relevant_chunk_ids``
and/or ``evidence`` (short verbatim strings: a chunk is relevant when it contains one, compared with
runs of whitespace collapsed). Any other field is kept in ``meta``.

The file is loaded with Hugging Face ``datasets`` (its JSON builder), after a line-by-line check so a
bad line is reported with its number and field instead of an Arrow schema error.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from rag.errors import InputError
from rag.ingest.chunking import Chunk
from rag.ingest.jsonl import json_lines
from rag.paths import sieve_home

TYPES = ("answerable", "vague", "unanswerable")
KNOWN = ("id", "type", "question", "reference_answer", "should_refuse", "relevant_chunk_ids", "evidence", "split")


@dataclass
class GoldenItem:
    id: str
    type: str
    question: str
    reference_answer: str
    should_refuse: bool
    relevant_chunk_ids: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    split: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def _check(rec: Any, where: str) -> None:
    """Raise InputError naming ``where`` (file:line) and the field when ``rec`` is not a valid item."""
    if not isinstance(rec, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(rec).__name__}")

    def bad(name: str, why: str) -> InputError:
        return InputError(f"{where}: field {name!r} {why}")

    for name in ("id", "question"):
        if name not in rec or rec[name] is None:
            raise bad(name, "is missing (required)")
        if not isinstance(rec[name], str) or not rec[name].strip():
            raise bad(name, f"must be a non-empty string, got {rec[name]!r:.60}")
    if rec.get("type") not in TYPES:
        raise bad("type", f"must be one of {', '.join(TYPES)}, got {rec.get('type')!r}")
    if not isinstance(rec.get("reference_answer", ""), (str, type(None))):
        raise bad("reference_answer", "must be a string")
    if "should_refuse" in rec and not isinstance(rec["should_refuse"], bool):
        raise bad("should_refuse", f"must be true or false, got {rec['should_refuse']!r}")
    for name in ("relevant_chunk_ids", "evidence"):
        value = rec.get(name)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value)):
            raise bad(name, f"must be a list of non-empty strings, got {value!r:.80}")
    if rec.get("split") is not None and not isinstance(rec["split"], str):
        raise bad("split", "must be a string or null")


def load_golden(path: str | Path) -> list[GoldenItem]:
    """Golden items from a JSONL file; :class:`InputError` names the line and field of the first problem."""
    file = Path(path).expanduser()
    line_of: list[int] = []
    seen: dict[str, int] = {}
    for lineno, where, rec in json_lines(file, missing="no such golden file: give a JSONL file with one item per line (see golden/README.md)"):
        _check(rec, where)
        if rec["id"] in seen:
            raise InputError(f"{where}: field 'id' repeats {rec['id']!r} from line {seen[rec['id']]}; ids must be unique")
        seen[rec["id"]] = lineno
        line_of.append(lineno)
    if not line_of:
        raise InputError(f"{file}: no golden items (the file is empty)")

    rows = _load_with_datasets(file)
    items = []
    for lineno, row in zip(line_of, rows):
        rec = {k: v for k, v in row.items() if v is not None}
        if rec.get("type") == "unanswerable" and "should_refuse" not in rec:
            rec["should_refuse"] = True
        items.append(GoldenItem(
            id=rec["id"], type=rec["type"], question=rec["question"], reference_answer=rec.get("reference_answer") or "",
            should_refuse=bool(rec.get("should_refuse", False)), relevant_chunk_ids=list(rec.get("relevant_chunk_ids") or []),
            evidence=list(rec.get("evidence") or []), split=rec.get("split"),
            meta={**(rec.get("meta") if isinstance(rec.get("meta"), dict) else {}),
                  **{k: v for k, v in rec.items() if k not in KNOWN and k != "meta"}, "line": lineno},
        ))
    return items


def _load_with_datasets(file: Path) -> list[dict[str, Any]]:
    """Rows via ``datasets``'s JSON builder (in memory, no cache files next to the data)."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets

    datasets.disable_progress_bars()
    try:
        ds = datasets.Dataset.from_json(str(file), keep_in_memory=True,
                                        cache_dir=str(sieve_home() / "datasets-cache"))
    except Exception as exc:  # noqa: BLE001 - Arrow cannot unify a field's types across lines
        raise InputError(f"{file}: cannot load as a dataset ({type(exc).__name__}: {exc}); "
                         "check that each field has the same type on every line") from None
    return ds.to_list()


_WS = re.compile(r"\s+")


def interleave_types(items: list[Any]) -> list[Any]:
    """Round-robin over question types (file order within a type), so ``--limit N`` is a stratified sample
    rather than the first N answerable items of a file sorted by type."""
    by_type: dict[str, list[Any]] = {}
    for it in items:
        by_type.setdefault(it.type, []).append(it)
    queues = list(by_type.values())
    out: list[Any] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def collapse(text: str) -> str:
    """Runs of whitespace -> one space (how evidence strings are compared with chunk text)."""
    return _WS.sub(" ", text).strip()


def gold_chunk_ids(item: GoldenItem, chunks: Iterable[Chunk]) -> set[str]:
    """Explicit ``relevant_chunk_ids`` plus every chunk whose text contains an ``evidence`` string."""
    gold = set(item.relevant_chunk_ids)
    needles = [collapse(e) for e in item.evidence if collapse(e)]
    if needles:
        for chunk in chunks:
            text = collapse(chunk.text)
            if any(n in text for n in needles):
                gold.add(chunk.id)
    return gold


def to_examples(items: Iterable[GoldenItem]) -> list[Any]:
    """``dspy.Example`` s (input: ``question``) carrying every golden field, for evaluation and compilation."""
    import dspy

    return [
        dspy.Example(id=it.id, type=it.type, question=it.question, reference_answer=it.reference_answer,
                     should_refuse=it.should_refuse, relevant_chunk_ids=list(it.relevant_chunk_ids),
                     evidence=list(it.evidence), split=it.split).with_inputs("question")
        for it in items
    ]
