"""Review of a golden set (``rag golden review``): a human accepts, edits or rejects each item (:func:`review_golden`),
or a model keeps or rejects it with a reason (``--auto``, :func:`auto_review_golden`); the decision is written into
the item (``review``, ``reviewed_by``: ``"human"`` or the model's name) as it is made, a human's decision is never
overwritten by the model, and ``rag eval --reviewed-only`` scores the items whose latest decision is accept or edit
(:func:`keep_reviewed`; ``--reviewed-by human``: a human's decisions only).
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from rag.errors import InputError
from rag.eval.golden import GoldenItem, check_record, collapse
from rag.ingest.chunking import Chunk
from rag.ingest.jsonl import json_lines

REVIEWS = ("accept", "edit", "reject")  # a reviewed item's ``review``; accept and edit are kept by --reviewed-only
HUMAN = "human"  # ``reviewed_by`` of a decision made in the terminal review; a model's decision names the model
REVIEWERS = (HUMAN, "model")  # rag eval --reviewed-by
MAX_REVIEW_PASSAGES = 5  # gold and seed passages shown to the reviewing model
REVIEW_PASSAGE_CHARS = 2000  # of one passage shown to the reviewing model
SAME_REVIEWER = ("the automatic review runs on {model}, the model that drafted these items; set judge_model to another "
                 "model for an independent review")
EDITABLE = ("question", "reference_answer")  # what a human's edit may change (the old wording goes to edited_from)
_REPLIES = {"a": "accept", "e": "edit", "r": "reject", "s": "skip", "q": "quit"}


def reviewer_kind(rec: Any) -> str | None:
    """Who made an item's latest decision: ``"human"``, ``"model"``, or None when it is not reviewed. ``rec`` is the
    item's record (or a GoldenItem's ``meta``); a decision without ``reviewed_by`` (written by hand) is a human's."""
    if rec.get("review") not in REVIEWS:
        return None
    return HUMAN if rec.get("reviewed_by") in (None, "", HUMAN) else "model"


def keep_reviewed(items: list[GoldenItem], where: str | Path = "the golden set", *,
                  by: str | None = None) -> list[GoldenItem]:
    """The items whose latest decision is accept or edit (``rag eval --reviewed-only``), by anyone; ``by="human"``
    keeps only the decisions a human made (``rag eval --reviewed-by human``), ``by="model"`` only a model's.
    InputError when none is left."""
    if by is not None and by not in REVIEWERS:
        raise InputError(f"--reviewed-by: unknown reviewer {by!r}; give {' or '.join(REVIEWERS)}")
    kept = [it for it in items if it.meta.get("review") in ("accept", "edit")
            and (by is None or reviewer_kind(it.meta) == by)]
    if not kept:
        if by == HUMAN:
            raise InputError(f"{where} has no item a human accepted or edited; review it by hand first: "
                             f"rag golden review {where}")
        if by is not None:
            raise InputError(f"{where} has no item a model accepted; run the automatic review first: "
                             f"rag golden review {where} --auto")
        raise InputError(f"{where} has no item reviewed as accept or edit; review it first: rag golden review {where}")
    return kept


class FileChanged(InputError):
    """The golden file changed on disk since it was read (another review, in the terminal or on the page, or
    ``rag golden draft`` / ``--auto`` writing it): nothing was written over it (the web API answers 409)."""


class ReviewFile:
    """The records of a golden file under review; :meth:`save` rewrites it atomically with every decision so far
    (:func:`write_records`), and refuses (:class:`FileChanged`) when someone else changed it since it was read or
    last saved."""

    def __init__(self, path: str | Path, missing: str) -> None:
        self.path = Path(path).expanduser()
        self.records: list[dict[str, Any]] = []
        for _, where, rec in json_lines(self.path, missing=missing):
            check_record(rec, where)
            self.records.append(rec)
        self.stamp = _stamp(self.path)

    def save(self) -> None:
        if _stamp(self.path) != self.stamp:
            raise FileChanged(f"{self.path} changed while it was being reviewed (is rag golden draft, or another "
                              "review, still writing it?); the decisions before this one are saved; run rag golden "
                              "review again")
        write_records(self.path, self.records)
        self.stamp = _stamp(self.path)


def write_records(path: Path, records: list[dict[str, Any]]) -> None:
    """Rewrite a golden file atomically: every record as one JSON line into ``FILE.tmp``, then moved over ``path``,
    so a reader sees the old file or the new one, never half of one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    os.replace(tmp, path)


def apply_human_decision(rec: dict[str, Any], decision: str, *, question: str | None = None,
                         reference_answer: str | None = None) -> str:
    """Apply a human's ``decision`` (accept, edit or reject) to the record ``rec``, as the terminal review and the
    page both do: ``review`` and ``reviewed_by: "human"`` are set, the model's reason and note are dropped (its
    decision stays in ``auto_review``). An edit takes the new ``question`` and ``reference_answer`` (stripped; blank
    or None keeps the current one) and keeps the wording it replaced in ``edited_from``; an edit that changes
    nothing is an accept. An item edited before keeps its first wording in ``edited_from``: accepting it keeps it
    as an edit, and an edit back to that wording is an accept. Returns the decision written."""
    if decision not in REVIEWS:
        raise InputError(f"decision: must be one of {', '.join(REVIEWS)}, got {decision!r:.40}")
    current = {k: rec.get(k) or "" for k in EDITABLE}
    before = rec.get("edited_from")
    first = {k: before.get(k) or "" for k in EDITABLE} if isinstance(before, dict) else current
    if decision == "edit":
        given = {"question": question, "reference_answer": reference_answer}
        rec.update({k: (given[k] or "").strip() or v for k, v in current.items()})
    if decision != "reject":
        decision = "accept" if {k: rec.get(k) or "" for k in EDITABLE} == first else "edit"
        if decision == "edit":
            rec["edited_from"] = first
        else:
            rec.pop("edited_from", None)
    for stale in ("review_reason", "review_note"):  # the model's reason stays in auto_review
        rec.pop(stale, None)
    rec.update(review=decision, reviewed_by=HUMAN)
    return decision


def review_golden(path: str | Path, *, ask: Callable[[str], str], show: Callable[[str], None],
                  passages: Callable[[list[str]], list[tuple[str, str, str]]] = lambda ids: [],
                  max_items: int = 200, cut: int = 400, max_tries: int = 5) -> Counter[str]:
    """Show each item no human has reviewed yet (question, type, reference answer, gold passages cut to ``cut``
    characters, and the automatic review's decision and reason when a model reviewed it) and ask [a]ccept / [e]dit /
    [r]eject / [s]kip / [q]uit. Each decision is written at once: the file is rewritten atomically with ``review`` and
    ``reviewed_by: "human"`` set (an edit keeps the old wording in ``edited_from``; the model's decision stays in
    ``auto_review``), so a session can stop anywhere and the next one starts at the first item still without a human
    decision. ``ask``/``show`` are typer.prompt/typer.echo in the CLI; ``passages(ids)`` gives (id, title, text). A
    reply that is none of the letters is asked again, ``max_tries`` times at most, then ends the session. Returns the
    count per decision."""
    file = ReviewFile(path, "no such golden file: give the JSONL file rag golden draft wrote")
    todo = [r for r in file.records if reviewer_kind(r) != HUMAN][:max_items]
    done: Counter[str] = Counter()
    for n, rec in enumerate(todo, 1):
        seed = rec.get("seed_chunk_id")
        ids = list(dict.fromkeys([*(rec.get("relevant_chunk_ids") or []), *([seed] if seed else [])]))
        texts = "".join(f"\n  [{cid}{' (seed)' if cid == seed else ''}] {title}\n    {collapse(text)[:cut]}"
                        for cid, title, text in passages(ids))
        if ids and not texts:
            texts = f"\n  passages {', '.join(ids)} (their text is not at hand)"
        proposal = (f"\nModel ({rec['reviewed_by']}): {rec['review']}, {rec.get('review_reason') or 'no reason given'}"
                    if reviewer_kind(rec) == "model" else "")
        show(f"\n[{n}/{len(todo)}] {rec['id']} ({rec['type']})\nQ: {rec['question']}\nReference: "
             f"{rec.get('reference_answer') or ''}\nGold: {', '.join(rec.get('relevant_chunk_ids') or []) or 'none'}"
             f"{texts}{proposal}")
        reply = _choose(ask, show, max_tries)
        if reply == "quit":
            break
        if reply == "skip":
            done["skip"] += 1
            continue
        edits = {k: ask(f"{k.replace('_', ' ')} (Enter keeps it)") for k in EDITABLE} if reply == "edit" else {}
        reply = apply_human_decision(rec, reply, **edits)
        file.save()
        done[reply] += 1
    return done


def drafted_index(path: str | Path) -> Path | None:
    """The index the items of a drafted golden file were drafted from (its first item's ``draft.index``, as
    ``rag golden draft`` records it; where both reviews read the passages from); None for a set that records none
    (written by hand)."""
    text = Path(path).expanduser().read_text(encoding="utf-8")
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        return Path(json.loads(first)["draft"]["index"])
    except (ValueError, KeyError, TypeError):
        return None


def review_prompt_version() -> str:
    """``golden-review/1-<hash>``: a hash of the ItemReviewer signature (instructions and fields)."""
    import hashlib

    from signatures import ItemReviewer

    text = f"{ItemReviewer.__name__}\n{ItemReviewer.instructions}\n{sorted(ItemReviewer.fields)}"
    return "golden-review/1-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def review_passages(rec: dict[str, Any], chunks: dict[str, Chunk], collapsed: dict[str, str] | None = None) -> str:
    """The text the reviewing model reads for one item: its gold passages (``relevant_chunk_ids``, then the chunks
    holding an ``evidence`` string) and its seed, at most :data:`MAX_REVIEW_PASSAGES`, each headed by its id,
    document and section; "" when none of them is in ``chunks``. ``collapsed``: a cache of the chunks' texts with
    whitespace collapsed, filled on the first item with evidence."""
    ids = list(rec.get("relevant_chunk_ids") or [])
    needles = [collapse(e) for e in rec.get("evidence") or [] if collapse(e)]
    if needles:
        collapsed = {} if collapsed is None else collapsed
        if not collapsed:
            collapsed.update((cid, collapse(c.text)) for cid, c in chunks.items())
        ids += [cid for cid, text in collapsed.items() if any(n in text for n in needles)]
    seed = rec.get("seed_chunk_id")
    ids = [cid for cid in dict.fromkeys([*ids, *([seed] if seed else [])]) if cid in chunks]
    if seed in ids[MAX_REVIEW_PASSAGES:]:  # the seed is always shown
        ids = [*[cid for cid in ids if cid != seed][:MAX_REVIEW_PASSAGES - 1], seed]
    return "\n\n".join(f"[{cid}] {chunks[cid].source} | {chunks[cid].title}\n{chunks[cid].text[:REVIEW_PASSAGE_CHARS]}"
                       for cid in ids[:MAX_REVIEW_PASSAGES])


@dataclass
class AutoReview:
    """What one :func:`auto_review_golden` run did: decisions made now (``accept`` = keep, ``reject``), the items
    left unreviewed with a note (id, why), the items it left alone because they were reviewed before (by a human,
    or by a model without ``redo``), and the model calls."""

    model: str
    decided: Counter[str] = field(default_factory=Counter)
    notes: list[tuple[str, str]] = field(default_factory=list)
    reviewed_before: int = 0
    calls: int = 0


def auto_review_golden(path: str | Path, *, lm: Any, model: str, chunks: Iterable[Chunk], redo: bool = False,
                       max_items: int | None = None, show_progress: bool = True,
                       log: Callable[[str], None] = lambda _m: None) -> AutoReview:
    """The automatic review pass (``rag golden review FILE --auto``): ``lm`` (the judge role's model, named ``model``)
    reads each item no one has reviewed yet (signatures.ItemReviewer: its type, question, reference answer and the
    text of its gold and seed passages from ``chunks``) and keeps it (``review: "accept"``) or rejects it, with a
    reason. Each decision is written into the file at once, as the terminal review writes its own: ``review``,
    ``reviewed_by`` = ``model``, ``review_reason``, and ``auto_review`` (the decision, the model, the reason and the
    prompt's version; kept when a human later decides the item, so the two can be compared). A rerun skips what is
    reviewed; a human's decision is never overwritten; ``redo`` reviews the items whose latest decision is a model's
    again. An output with no usable decision, or an item without passages in ``chunks``, stays unreviewed with a
    ``review_note`` (a rerun tries it again); a fatal error (Ctrl-C, quota, auth) stops the run with every decision
    made so far saved. ``max_items`` bounds one run; ``show_progress``: a progress bar on stderr."""
    import dspy
    from tqdm.auto import tqdm

    from rag.eval.runner import is_fatal
    from rag.usage.metering import metered_call
    from signatures import ItemReviewer

    model = str(model).strip()
    if not model or model == HUMAN:
        raise InputError(f"the reviewing model needs a name other than {HUMAN!r} (reviewed_by tells a human's decision "
                         "from a model's); set judge_model to the model's spec")
    file = ReviewFile(path, "no such golden file: give the JSONL file rag golden draft wrote")
    by_id = {c.id: c for c in chunks}
    result = AutoReview(model=model)
    todo = []
    for rec in file.records:
        kind = reviewer_kind(rec)
        if kind == HUMAN or (kind == "model" and not redo):
            result.reviewed_before += 1
        else:
            todo.append(rec)
    todo = todo[:max_items] if max_items is not None else todo
    if any(rec.get("drafted_by") == model for rec in file.records):
        log(SAME_REVIEWER.format(model=model))
    predictor, version, collapsed = dspy.Predict(ItemReviewer), review_prompt_version(), {}
    bar = tqdm(total=len(todo), desc="reviewing", unit="item", file=sys.stderr, disable=not show_progress)

    def note(rec: dict[str, Any], why: str) -> None:
        rec["review_note"] = why
        file.save()
        result.notes.append((rec["id"], why))
        with tqdm.external_write_mode(file=sys.stderr):
            log(f"warning: {rec['id']} left unreviewed: {why}")

    try:
        for rec in todo:
            text = review_passages(rec, by_id, collapsed)
            if not text:
                note(rec, "none of its gold or seed passages is in the index; give the index it was drafted from")
                bar.update(1)
                continue
            try:
                result.calls += 1
                pred = metered_call(predictor, lm, item_type=rec["type"], question=rec["question"],
                                    reference_answer=rec.get("reference_answer") or "", passages=text)[0]
                if not isinstance(pred.keep, bool):
                    raise ValueError(f"keep is not true or false: {pred.keep!r:.60}")
            except Exception as exc:  # noqa: BLE001 - an unusable output leaves the item unreviewed; fatal ones stop
                if is_fatal(exc):
                    raise
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
                note(rec, f"the automatic review by {model} gave no usable decision ({why}); a rerun asks again "
                          "(with --set cache=false for a new reply)")
                bar.update(1)
                continue
            decision, reason = ("accept" if pred.keep else "reject"), " ".join(str(pred.reason or "").split())
            rec.pop("review_note", None)
            rec.update(review=decision, reviewed_by=model, review_reason=reason,
                       auto_review={"review": decision, "reviewed_by": model, "reason": reason,
                                    "prompt_version": version})
            file.save()
            result.decided[decision] += 1
            bar.update(1)
            bar.set_postfix(kept=result.decided["accept"], rejected=result.decided["reject"], refresh=False)
    finally:
        bar.close()
    return result


def _choose(ask: Callable[[str], str], show: Callable[[str], None], max_tries: int) -> str:
    """The decision asked for; a reply that is none of the letters is asked again, then counts as quit."""
    for _ in range(max_tries):
        reply = ask("[a]ccept / [e]dit / [r]eject / [s]kip / [q]uit").strip().lower()[:1]
        if reply in _REPLIES:
            return _REPLIES[reply]
        show("reply a, e, r, s or q")
    return "quit"


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns
