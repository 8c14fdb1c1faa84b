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

Review (``rag golden review``): a human accepts, edits or rejects each item (:func:`review_golden`), or a model keeps
or rejects it with a reason (``--auto``, :func:`auto_review_golden`); the decision is written into the item
(``review``, ``reviewed_by``: ``"human"`` or the model's name) as it is made, a human's decision is never overwritten
by the model, and ``rag eval --reviewed-only`` scores the items whose latest decision is accept or edit
(:func:`keep_reviewed`; ``--reviewed-by human``: a human's decisions only).
"""

from __future__ import annotations

import json
import os
import re
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from rag.errors import InputError
from rag.ingest.chunking import Chunk
from rag.ingest.jsonl import json_lines
from rag.paths import sieve_home

TYPES = ("answerable", "vague", "unanswerable")
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
        _check(rec, where)
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


REVIEWS = ("accept", "edit", "reject")  # a reviewed item's ``review``; accept and edit are kept by --reviewed-only
HUMAN = "human"  # ``reviewed_by`` of a decision made in the terminal review; a model's decision names the model
REVIEWERS = (HUMAN, "model")  # rag eval --reviewed-by
MAX_REVIEW_PASSAGES = 5  # gold and seed passages shown to the reviewing model
REVIEW_PASSAGE_CHARS = 2000  # of one passage shown to the reviewing model
SAME_REVIEWER = ("the automatic review runs on {model}, the model that drafted these items; set judge_model to another "
                 "model for an independent review")
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


class _ReviewFile:
    """The records of a golden file under review; :meth:`save` rewrites it atomically with every decision so far,
    and refuses when someone else changed it since it was read or last saved."""

    def __init__(self, path: str | Path, missing: str) -> None:
        self.path = Path(path).expanduser()
        self.records: list[dict[str, Any]] = []
        for _, where, rec in json_lines(self.path, missing=missing):
            _check(rec, where)
            self.records.append(rec)
        self.stamp = _stamp(self.path)

    def save(self) -> None:
        if _stamp(self.path) != self.stamp:
            raise InputError(f"{self.path} changed while it was being reviewed (is rag golden draft, or another review, "
                             "still writing it?); the decisions before this one are saved; run rag golden review again")
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.records), encoding="utf-8")
        os.replace(tmp, self.path)
        self.stamp = _stamp(self.path)


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
    file = _ReviewFile(path, "no such golden file: give the JSONL file rag golden draft wrote")
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
        if reply == "edit":
            old = {k: rec.get(k) or "" for k in ("question", "reference_answer")}
            new = {k: ask(f"{k.replace('_', ' ')} (Enter keeps it)").strip() or v for k, v in old.items()}
            reply = "accept" if new == old else "edit"
            rec.update({**new, **({"edited_from": old} if reply == "edit" else {})})
        for stale in ("review_reason", "review_note"):  # the model's reason stays in auto_review
            rec.pop(stale, None)
        rec.update(review=reply, reviewed_by=HUMAN)
        file.save()
        done[reply] += 1
    return done


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
    file = _ReviewFile(path, "no such golden file: give the JSONL file rag golden draft wrote")
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
