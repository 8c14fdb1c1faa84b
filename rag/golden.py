"""Golden items (stand-in: the golden/retrieval branches own this module; drop at merge).

JSONL, one item per line: ``id``, ``type`` (answerable | vague | unanswerable), ``question``,
``reference_answer``, ``should_refuse``, ``relevant_chunk_ids`` and/or ``evidence``, ``split``, ``meta``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.errors import InputError

TYPES = ("answerable", "vague", "unanswerable")
SPLITS = ("train", "dev", "test")


@dataclass
class GoldenItem:
    id: str
    type: str
    question: str
    reference_answer: str = ""
    should_refuse: bool = False
    relevant_chunk_ids: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    split: str = "test"
    meta: dict[str, Any] = field(default_factory=dict)


def load_golden(path: str | Path) -> list[GoldenItem]:
    """Read and validate a golden JSONL file; a bad line is an InputError naming line and field."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"golden file {path} does not exist; pass --golden FILE")
    items, seen = [], set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{n}: invalid JSON ({exc.msg}); fix or remove the line") from None
        for name in ("id", "type", "question"):
            if not str(row.get(name) or "").strip():
                raise InputError(f"{path}:{n}: field {name!r} is missing or empty")
        if row["type"] not in TYPES:
            raise InputError(f"{path}:{n}: field 'type' is {row['type']!r}; use one of {', '.join(TYPES)}")
        if row.get("split", "test") not in SPLITS:
            raise InputError(f"{path}:{n}: field 'split' is {row['split']!r}; use one of {', '.join(SPLITS)}")
        if row["id"] in seen:
            raise InputError(f"{path}:{n}: duplicate id {row['id']!r}")
        seen.add(row["id"])
        items.append(GoldenItem(
            id=str(row["id"]), type=row["type"], question=row["question"],
            reference_answer=row.get("reference_answer") or "",
            should_refuse=bool(row.get("should_refuse", row["type"] == "unanswerable")),
            relevant_chunk_ids=list(row.get("relevant_chunk_ids") or []), evidence=list(row.get("evidence") or []),
            split=row.get("split", "test"), meta=dict(row.get("meta") or {})))
    return items


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _id_text(chunk: Any) -> tuple[str, str]:
    if isinstance(chunk, dict):
        return str(chunk.get("chunk_id") or chunk.get("id")), chunk.get("text", "")
    return str(getattr(chunk, "chunk_id", None) or getattr(chunk, "id")), getattr(chunk, "text", "")


def gold_chunk_ids(item: GoldenItem, chunks: Iterable[Any]) -> set[str]:
    """Explicit ``relevant_chunk_ids`` plus every chunk containing an evidence string (whitespace collapsed)."""
    gold = set(item.relevant_chunk_ids)
    needles = [_collapse(e) for e in item.evidence if e.strip()]
    if needles:
        for chunk in chunks:
            cid, text = _id_text(chunk)
            flat = _collapse(text)
            if any(n in flat for n in needles):
                gold.add(cid)
    return gold
