"""The review of a golden set on the page (``rag serve --review FILE``): the items with their review state and the
counts ``rag golden check`` prints, one item at a time with its seed and gold passages and the model's proposal, and
a human's decision written into FILE at once, through the very functions the terminal review uses
(rag.curate.review: ``ReviewFile``, ``apply_human_decision``, ``write_records``; rag.report.golden_checks:
``review_summary``, ``review_lines``).

Only the file named on the command line is read or written: the API takes no path. Every answer carries the file's
``version``, a hash of its items as read. A decision names the version its item was shown with, and is refused
(:class:`rag.curate.review.FileChanged`, the API's 409) when the file no longer has it: someone else (the terminal
review, another page, ``rag golden review --auto``, ``rag golden draft``) changed it since, and nothing is written
over their change. Decisions are serialised by a lock around the read, the check and the write.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag.curate.review import (
    EDITABLE,
    HUMAN,
    REVIEWS,
    FileChanged,
    ReviewFile,
    apply_human_decision,
    drafted_index,
    reviewer_kind,
)
from rag.errors import BadRequest, InputError, NotFound, SieveError
from rag.report.golden_checks import review_lines, review_summary

MISSING = "no such golden file: give rag serve --review the JSONL file rag golden draft wrote"
MAX_EDIT_CHARS = 20_000  # an edited reference answer (the question's limit is the agent's, MAX_QUESTION_CHARS)
DECISION_SHAPE = '{"id": "...", "decision": "accept" | "edit" | "reject", "version": "..."}'


def check_review(path: Path | None) -> None:
    """``rag serve --review FILE`` must name a golden file that reads, in a folder where it can be rewritten: checked
    before anything loads or binds (InputError naming the flag)."""
    if path is None:
        return
    try:
        ReviewFile(path, MISSING)
    except InputError as exc:
        raise InputError(f"--review: {exc}") from None
    path = Path(path).expanduser()
    for where in (path, path.parent):  # the file is rewritten through FILE.tmp beside it
        if not os.access(where, os.W_OK):
            raise InputError(f"--review: {where} is not writable, and each decision is written into {path.name} "
                             "(through a temporary file beside it); review a copy in a folder you can write to")


def version_of(records: list[dict[str, Any]]) -> str:
    """The version of a golden file's items as read: a hash of their JSON, so any change to any item changes it."""
    text = json.dumps(records, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """review_summary as JSON, with review_lines: the numbers and the lines of ``rag golden check``'s review."""
    s = review_summary(records)
    decisions = s["decisions"]
    by = {kind: sum(v for (_, k), v in decisions.items() if k == kind) for kind in (HUMAN, "model")}
    return {"items": s["items"], "reviewed": s["reviewed"], "human": by[HUMAN], "model": by["model"],
            "decisions": {d: {HUMAN: decisions[(d, HUMAN)], "model": decisions[(d, "model")]} for d in REVIEWS},
            "models": dict(s["models"]), "kept": s["kept"], "notes": list(s["notes"]), "overlap_n": s["overlap_n"],
            "agreement": s["agreement"], "agreement_ci": list(s["agreement_ci"]) if s["agreement_ci"] else None,
            "kappa": s["kappa"], "lines": review_lines(s)}


def _row(rec: dict[str, Any]) -> dict[str, Any]:
    """An item as the list shows it: id, type, question, and its review state (decision, who, kind)."""
    return {"id": rec["id"], "type": rec["type"], "question": rec["question"], "split": rec.get("split"),
            "review": rec.get("review") if reviewer_kind(rec) else None, "reviewed_by": rec.get("reviewed_by"),
            "kind": reviewer_kind(rec), "note": bool(rec.get("review_note")), "edited": "edited_from" in rec}


def _proposal(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The model's decision on an item: its latest one, or the one a human decided after (``auto_review``)."""
    if reviewer_kind(rec) == "model":
        return {"review": rec["review"], "model": rec["reviewed_by"], "reason": rec.get("review_reason") or "",
                "current": True}
    auto = rec.get("auto_review")
    if isinstance(auto, dict) and auto.get("review") in REVIEWS:
        return {"review": auto["review"], "model": auto.get("reviewed_by") or "a model",
                "reason": auto.get("reason") or "", "current": False}
    return None


class GoldenReview:
    """The golden file ``rag serve --review`` names. ``index()``: the index rag serve answers from, where the
    passages are shown from when the items record no index (written by hand) or the one they record cannot be
    opened."""

    def __init__(self, path: str | Path, *, index: Callable[[], Any] | None = None) -> None:
        self.path = Path(path).expanduser()
        self._index = index
        self._lock = threading.Lock()  # one decision at a time: read, check the version, write
        self._chunks_lock = threading.Lock()
        self._chunks: dict[str, Any] | None = None
        self._where: str | None = None  # the index the passages come from
        self._chunks_note: str | None = None  # why they come from another one, or from none
        check_review(self.path)

    def _read(self) -> ReviewFile:
        return ReviewFile(self.path, MISSING)

    def info(self) -> dict[str, Any]:
        return {"file": str(self.path), "name": self.path.name}

    def listing(self, file: ReviewFile | None = None) -> dict[str, Any]:
        """Every item with its review state, the counts, and the file's version."""
        file = file or self._read()
        return {"file": str(self.path), "version": version_of(file.records), "summary": _summary(file.records),
                "items": [_row(r) for r in file.records]}

    # ---------------------------------------------------------------- one item
    def _passages(self) -> tuple[dict[str, Any], str | None, str | None]:
        """The chunks by id, where they come from, and a note: the index the items were drafted from, else the one
        rag serve answers from. Loaded once."""
        with self._chunks_lock:
            if self._chunks is None:
                from rag.config import load_settings
                from rag.index.store import Index

                chunks, note = None, None
                recorded = drafted_index(self.path)
                if recorded is not None:
                    try:
                        chunks = Index.load(recorded, load_settings({"index_dir": recorded})).by_id
                        self._where = str(recorded)
                    except SieveError as exc:
                        note = f"the index the items were drafted from cannot be opened ({exc})"
                if chunks is None and self._index is not None:
                    try:
                        index = self._index()
                        chunks, self._where = index.by_id, str(index.dir)
                        note = (f"{note}; " if note else "") + "the passages are shown from the index rag serve answers from"
                    except SieveError as exc:
                        note = (f"{note}; " if note else "") + f"no index to show the passages from ({exc})"
                self._chunks, self._chunks_note = chunks or {}, note
            return self._chunks, self._where, self._chunks_note

    def item(self, item_id: str) -> dict[str, Any]:
        """One item as the page shows it: its fields, its review state, the model's proposal, and the text of its
        gold passages and its seed (as the terminal review lists them: gold first, the seed last)."""
        file = self._read()
        position = next((i for i, r in enumerate(file.records) if r["id"] == item_id), None)
        if position is None:
            raise NotFound(f"no item {item_id!r} in {self.path}")
        rec = file.records[position]
        gold, seed = list(rec.get("relevant_chunk_ids") or []), rec.get("seed_chunk_id")
        ids = list(dict.fromkeys([*gold, *([seed] if seed else [])]))
        chunks, where, note = self._passages() if ids else ({}, None, None)
        passages = []
        for cid in ids:
            chunk = chunks.get(cid)
            entry = {"id": cid, "gold": cid in gold, "seed": cid == seed, "missing": chunk is None}
            if chunk is not None:
                entry.update(title=chunk.title, source=chunk.source, text=chunk.text)
            passages.append(entry)
        return {**_row(rec), "version": version_of(file.records), "position": position, "total": len(file.records),
                "reference_answer": rec.get("reference_answer") or "", "should_refuse": rec.get("should_refuse"),
                "edited_from": rec.get("edited_from"), "review_note": rec.get("review_note"),
                "drafted_by": rec.get("drafted_by"), "proposal": _proposal(rec), "passages": passages,
                "passages_from": where, "passages_note": note}

    # ---------------------------------------------------------------- a decision
    def decide(self, body: Any) -> dict[str, Any]:
        """A human's decision on one item (the POST body: ``id``, ``decision``, ``version``, and for an edit the new
        ``question`` and ``reference_answer``), written into the file at once; then the listing as it is now. A
        BadRequest names the field; FileChanged (409) when the file is not the version the item was shown with."""
        from rag.agent.module import MAX_QUESTION_CHARS
        from rag.serve.app import text_field

        if not isinstance(body, dict):
            raise BadRequest(f"the body must be a JSON object: {DECISION_SHAPE}")
        item_id, decision, version = body.get("id"), body.get("decision"), body.get("version")
        if not isinstance(item_id, str) or not item_id.strip():
            raise BadRequest(f"id: required, the id of the item decided; send {DECISION_SHAPE}")
        if decision not in REVIEWS:
            raise BadRequest(f"decision: must be accept, edit or reject, got {decision!r:.40} (a skip writes nothing)")
        if not isinstance(version, str) or not version:
            raise BadRequest("version: required, the version GET /api/review/item gave with the item")
        edits: dict[str, str] = {}
        for name in EDITABLE:
            value = body.get(name)
            if value is None:
                continue
            if decision != "edit":
                raise BadRequest(f"{name}: sent with decision {decision}; only an edit changes it")
            if not isinstance(value, str):
                raise BadRequest(f"{name}: must be a string, got {type(value).__name__}")
            edits[name] = text_field(name, value)
        if decision == "edit":
            if not edits:
                raise BadRequest("question: an edit sends the new question and reference_answer")
            if "question" in edits and not edits["question"].strip():
                raise BadRequest("question: empty; an item needs a question (reject the item to drop it)")
            if len(edits.get("question", "")) > MAX_QUESTION_CHARS:
                raise BadRequest(f"question: {len(edits['question'])} characters, at most {MAX_QUESTION_CHARS}")
            if len(edits.get("reference_answer", "")) > MAX_EDIT_CHARS:
                raise BadRequest(f"reference_answer: {len(edits['reference_answer'])} characters, at most "
                                 f"{MAX_EDIT_CHARS}")
        with self._lock:
            file = self._read()
            if version_of(file.records) != version:
                raise FileChanged(self._changed())
            rec = next((r for r in file.records if r["id"] == item_id), None)
            if rec is None:
                raise NotFound(f"no item {item_id!r} in {self.path}")
            if "reference_answer" in edits and not edits["reference_answer"].strip() \
                    and (rec.get("reference_answer") or "").strip():
                raise BadRequest("reference_answer: empty; write the answer the passages support (or reject the item)")
            decided = apply_human_decision(rec, decision, **edits)
            try:
                file.save()
            except FileChanged:
                raise FileChanged(self._changed()) from None
            return {"decided": {"id": item_id, "review": decided, "reviewed_by": HUMAN}, **self.listing(file)}

    def _changed(self) -> str:
        return (f"{self.path.name} changed on disk since this item was shown (a review in the terminal or on another "
                "page, rag golden review --auto or rag golden draft writing it); nothing was written: reload the "
                "review to see the file as it is now, then decide again")
