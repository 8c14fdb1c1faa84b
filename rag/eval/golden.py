"""Golden sets: JSONL questions with reference answers and gold evidence.

One JSON object per line::

    {"id": "q1", "type": "answerable", "question": "...", "reference_answer": "...",
     "should_refuse": false, "relevant_chunk_ids": ["doc.md#002"], "evidence": ["verbatim words"],
     "split": "dev"}

``type`` is ``answerable`` | ``vague`` | ``unanswerable``. Gold evidence is ``relevant_chunk_ids``
and/or ``evidence`` (short verbatim strings: a chunk is relevant when it contains one, compared with
runs of whitespace collapsed). Any other field is kept in ``meta``.

The file is loaded with Hugging Face ``datasets`` (its JSON builder), after a line-by-line check so a
bad line is reported with its number and field instead of an Arrow schema error. The check also refuses a
lone surrogate escape (``\ud800``): pyarrow cannot parse one, and ``datasets`` then falls back to
``pandas.read_json``, which reads a one-line file column-wise (a list of ids became its characters). Whatever
``datasets`` returns is compared with the checked line, so a value it changed is an error naming the line
and field, never a silently coerced item.

:func:`check_gold_in_index` warns (or, strict, refuses) when gold chunk ids are not in the index.

Drafting a set for any index and reviewing it (``rag golden draft``, ``rag golden review``) live in
:mod:`rag.curate`.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from rag.errors import InputError
from rag.ingest.chunking import Chunk
from rag.ingest.jsonl import json_lines
from rag.paths import sieve_home

TYPES = ("answerable", "vague", "unanswerable")
FLOAT_ULPS = 4  # how far (in units of the last place) Arrow's reading of a JSON number may be from Python's
KNOWN = ("id", "type", "question", "reference_answer", "should_refuse", "relevant_chunk_ids", "evidence", "split", "history")


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
    # a follow-up's conversation before it, oldest first: [{"question", "answer"}]; the agent makes the question
    # standalone from it (rag.agent.conversation), and retrieval is scored on what that search found
    history: list[dict[str, str]] = field(default_factory=list)


def check_record(rec: Any, where: str) -> None:
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
    history = rec.get("history")
    if history is not None and (not isinstance(history, list) or not all(
            isinstance(t, dict) and set(t) == {"question", "answer"} and all(isinstance(v, str) for v in t.values())
            for t in history)):
        raise bad("history", 'must be a list of {"question": "...", "answer": "..."} turns, oldest first')
    for name, value in rec.items():  # what pyarrow cannot parse would send datasets to its pandas fallback
        try:
            json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except UnicodeEncodeError:
            raise bad(name, "holds a lone surrogate escape (e.g. \\ud800), which is not valid Unicode; "
                      "fix the text that wrote it") from None
        except ValueError:
            raise bad(name, "holds NaN or Infinity, which JSON does not allow; use null or a number") from None


def load_golden(path: str | Path) -> list[GoldenItem]:
    """Golden items from a JSONL file; :class:`InputError` names the line and field of the first problem."""
    file = Path(path).expanduser()
    checked: list[tuple[int, str, dict[str, Any]]] = []
    seen: dict[str, int] = {}
    for lineno, where, rec in json_lines(file, missing="no such golden file: give a JSONL file with one item per line (see golden/README.md)"):
        check_record(rec, where)
        if rec["id"] in seen:
            raise InputError(f"{where}: field 'id' repeats {rec['id']!r} from line {seen[rec['id']]}; ids must be unique")
        seen[rec["id"]] = lineno
        checked.append((lineno, where, rec))
    if not checked:
        raise InputError(f"{file}: no golden items (the file is empty)")

    rows = _load_with_datasets(file)
    if len(rows) != len(checked):
        raise InputError(f"{file}: datasets read {len(rows)} row(s) from {len(checked)} line(s); "
                         "write one JSON object per line")
    items = []
    for (lineno, where, line_rec), row in zip(checked, rows):
        _same_as_line(row, line_rec, where)
        rec = {k: v for k, v in line_rec.items() if v is not None}
        if rec.get("type") == "unanswerable" and "should_refuse" not in rec:
            rec["should_refuse"] = True
        items.append(GoldenItem(
            id=rec["id"], type=rec["type"], question=rec["question"], reference_answer=rec.get("reference_answer") or "",
            should_refuse=bool(rec.get("should_refuse", False)), relevant_chunk_ids=list(rec.get("relevant_chunk_ids") or []),
            evidence=list(rec.get("evidence") or []), split=rec.get("split"),
            history=[dict(t) for t in rec.get("history") or []],
            meta={**(rec.get("meta") if isinstance(rec.get("meta"), dict) else {}),
                  **{k: v for k, v in rec.items() if k not in KNOWN and k != "meta"}, "line": lineno},
        ))
    return items


def _same_as_line(row: dict[str, Any], rec: dict[str, Any], where: str) -> None:
    """InputError naming ``where`` and the field when ``datasets`` returned a value other than the line holds.
    Fields the line lacks come back as None (Arrow gives every row every column); those are not differences."""
    for name in sorted(set(row) | set(rec)):
        if not _equal(row.get(name), rec.get(name)):
            raise InputError(f"{where}: field {name!r} holds {rec.get(name)!r:.60}, which datasets reads as "
                             f"{row.get(name)!r:.60}; write it so it loads unchanged (one JSON type per field on "
                             "every line, integers within 64 bits)")


def _equal(loaded: Any, line: Any) -> bool:
    """Whether ``loaded`` (from Arrow) is ``line`` (from json.loads), up to the None Arrow fills in for keys of a
    nested object that this line does not have; a bool is never equal to a number, nor a string to a list."""
    if isinstance(line, dict):
        return (isinstance(loaded, dict) and set(line) <= set(loaded)
                and all(_equal(loaded[k], line.get(k)) if k in line else loaded[k] is None for k in loaded))
    if isinstance(line, list):
        return (isinstance(loaded, list) and len(loaded) == len(line)
                and all(_equal(a, b) for a, b in zip(loaded, line)))
    if isinstance(line, bool) or isinstance(loaded, bool):
        return type(line) is type(loaded)
    if type(line) is float and type(loaded) is float:  # Arrow's JSON reader is not correctly rounded: 1.93 can
        return math.isclose(loaded, line, rel_tol=FLOAT_ULPS * sys.float_info.epsilon)  # come back 1.9300000000000002
    return type(loaded) is type(line) and loaded == line or (
        isinstance(line, (int, float)) and isinstance(loaded, (int, float)) and loaded == line)


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


def check_gold_in_index(items: Iterable[GoldenItem], chunk_ids: Iterable[str], *, strict: bool = False) -> int:
    """Warn when ``relevant_chunk_ids`` name chunks the index does not hold (a golden set written against another
    chunking scores 0 on them, silently otherwise): the count and a few examples. ``strict`` makes it an
    :class:`InputError` instead. Returns how many gold ids are missing; an empty ``chunk_ids`` (no index) checks
    nothing."""
    known = set(chunk_ids)
    if not known:
        return 0
    pairs = [(it.id, cid) for it in items for cid in dict.fromkeys(it.relevant_chunk_ids)]
    missing = [(iid, cid) for iid, cid in pairs if cid not in known]
    if not missing:
        return 0
    shown = ", ".join(f"{cid!r} (item {iid})" for iid, cid in missing[:3]) + (", ..." if len(missing) > 3 else "")
    what = (f"{len(missing)} of {len(pairs)} gold chunk id(s) in relevant_chunk_ids are not in the index: {shown}; "
            "they count as never retrieved (was the golden set written against another chunking?)")
    if strict:
        raise InputError(f"{what}. Fix relevant_chunk_ids, or rebuild the index with the chunking they were written for")
    warnings.warn(f"{what}; strict_gold=True (rag eval --strict-gold) makes this an error", stacklevel=2)
    return len(missing)
