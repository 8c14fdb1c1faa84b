"""Judge calibration: human labels for real answers, and how well the Judge agrees with them.

Labels live in ``golden/judge_labels.jsonl``, one per line::

    {"id": ..., "question": ..., "answer": ..., "correct": true, "faithful": true, "note": "...", "run": "full-..."}

A label applies to a run record with the same ``id`` AND the same answer text (a new answer needs a new label).
A label may also list the ``citations`` it was given for: "faithful" depends on which passages an answer cites,
and two runs can write the same text citing different passages. Such a label applies only to a record with
those citations, and it is preferred over a label of the same answer that lists none.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.errors import InputError
from rag.ingest.jsonl import split_lines

FIELDS = ("correct", "faithful")


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two binary raters: (p_o - p_e) / (1 - p_e). None when p_e = 1 (undefined)."""
    if len(a) != len(b):
        raise ValueError(f"raters labelled different numbers of items: {len(a)} vs {len(b)}")
    n = len(a)
    if not n:
        return None
    p_o = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(map(bool, a)) / n, sum(map(bool, b)) / n
    p_e = pa * pb + (1 - pa) * (1 - pb)
    return None if p_e == 1 else (p_o - p_e) / (1 - p_e)


def _key(rec: Mapping[str, Any]) -> tuple[str, str]:
    return str(rec["id"]), " ".join(str(rec.get("answer") or "").split())


def _cited(rec: Mapping[str, Any]) -> tuple[str, ...] | None:
    cited = rec.get("citations")
    return None if cited is None else tuple(sorted(str(c) for c in cited))


def _store_key(lab: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...] | None]:
    return (*_key(lab), _cited(lab))


class _Lookup:
    """The label of a record: same id and answer, and the same citations where the label lists them."""

    def __init__(self, labels: Iterable[Mapping[str, Any]]):
        self._by = {_store_key(lab): lab for lab in labels}  # later labels win

    def __call__(self, rec: Mapping[str, Any]) -> Mapping[str, Any] | None:
        key = _key(rec)
        return self._by.get((*key, _cited(rec) or ())) or self._by.get((*key, None))


def load_labels(path: str | Path) -> list[dict[str, Any]]:
    """Read a labels file; a bad line is an InputError naming the line and field."""
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(split_lines(path.read_text(encoding="utf-8")), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{n}: invalid JSON ({exc.msg})") from None
        for name in ("id", "answer", *FIELDS):
            if name not in row:
                raise InputError(f"{path}:{n}: field {name!r} is missing; each label needs id, answer, correct, faithful")
        for name in FIELDS:
            if not isinstance(row[name], bool):
                raise InputError(f"{path}:{n}: field {name!r} must be true or false, got {row[name]!r}")
        out.append(row)
    return out


def save_labels(path: str | Path, labels: Iterable[Mapping[str, Any]]) -> None:
    """Write all labels atomically (temp file, then rename), one per line, later labels win per (id, answer)."""
    path = Path(path)
    merged = {_store_key(lab): dict(lab) for lab in labels}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in merged.values()), encoding="utf-8")
    os.replace(tmp, path)


def labelable(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Answered records that the judge graded: ``{id, question, reference, answer, judge, run}``."""
    out = []
    for r in records:
        pred, verdict = r.get("prediction"), r.get("judge")
        if r.get("status") != "ok" or not pred or pred["refused"] or not verdict or "error" in verdict:
            continue
        out.append({"id": r["id"], "question": r["question"], "reference": r.get("reference_answer", ""),
                    "answer": pred["answer"], "citations": list(pred.get("citations") or []), "judge": verdict,
                    "run": r.get("config", "")})
    return out


def agreement(records: Iterable[Mapping[str, Any]], labels: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Judge vs human on the records that have a label: n, and per field accuracy and Cohen's kappa."""
    lookup = _Lookup(labels)
    pairs = [(c, lab) for c in labelable(records) for lab in [lookup(c)] if lab is not None]
    out: dict[str, Any] = {"n": len(pairs)}
    for name in FIELDS:
        judge = [bool(c["judge"][name]) for c, _ in pairs]
        human = [bool(lab[name]) for _, lab in pairs]
        out[name] = {"accuracy": (sum(j == h for j, h in zip(judge, human)) / len(pairs)) if pairs else None,
                     "kappa": cohen_kappa(judge, human),
                     "judge_yes": sum(judge), "human_yes": sum(human)}
    return out


def labelled_answers(records: Iterable[Mapping[str, Any]], labels: Iterable[Mapping[str, Any]]
                     ) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
    """(record, its label or None) for every answer to an item that should be answered."""
    lookup = _Lookup(labels)
    for r in records:
        pred = r.get("prediction") or {}
        if r.get("should_refuse") or r.get("status") != "ok" or not pred or pred.get("refused"):
            continue
        yield r, lookup({"id": r["id"], "answer": pred.get("answer"), "citations": pred.get("citations")})


def overlap_agreement(records: Iterable[Mapping[str, Any]], labels: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Reference overlap (rag.eval.overlap: token F1 >= F1_CORRECT) vs the human "correct" label, on every labelled
    answer of an answerable item, judged or not: n, accuracy, Cohen's kappa, and the two yes counts."""
    from rag.eval.overlap import F1_CORRECT, right_by_overlap

    pairs = []
    for r, lab in labelled_answers(records, labels):
        reference = r.get("reference_answer") or (lab or {}).get("reference_answer") or ""
        if lab is not None and reference:
            pairs.append((right_by_overlap(r["prediction"].get("answer") or "", reference), bool(lab["correct"])))
    rule, human = [a for a, _ in pairs], [b for _, b in pairs]
    return {"n": len(pairs), "threshold": F1_CORRECT,
            "accuracy": (sum(a == b for a, b in pairs) / len(pairs)) if pairs else None,
            "kappa": cohen_kappa(rule, human), "overlap_yes": sum(rule), "human_yes": sum(human)}


def critic_agreement(records: Iterable[Mapping[str, Any]], labels: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The grounding critic (rag.agent.critique) vs the human "faithful" label, on every labelled answer the critic
    checked: its last verdict is the one on the answer returned (grounded, or flagged low_confidence). Answers to
    unanswerable items count too: an answer the evidence does not support is what the critic is there to catch.
    n, accuracy, Cohen's kappa, and the two yes counts (yes = grounded / faithful)."""
    lookup, pairs = _Lookup(labels), []
    for r in records:
        pred = r.get("prediction") or {}
        if r.get("status") != "ok" or not pred or pred.get("refused"):
            continue
        lab = lookup({"id": r["id"], "answer": pred.get("answer"), "citations": pred.get("citations")})
        verdicts = [s.get("verdict") for s in pred.get("trace", {}).get("steps", []) if s["node"] == "critique"]
        if lab is not None and verdicts and verdicts[-1] is not None:
            pairs.append((bool(verdicts[-1]), bool(lab["faithful"])))
    critic, human = [a for a, _ in pairs], [b for _, b in pairs]
    return {"n": len(pairs), "accuracy": (sum(a == b for a, b in pairs) / len(pairs)) if pairs else None,
            "kappa": cohen_kappa(critic, human), "critic_yes": sum(critic), "human_yes": sum(human),
            "flagged_unfaithful": sum(not a and not b for a, b in pairs), "missed_unfaithful": sum(a and not b for a, b in pairs)}


def human_outcomes(records: Iterable[Mapping[str, Any]], labels: Iterable[Mapping[str, Any]],
                   grounded: bool = False) -> dict[tuple[str, str], bool | None]:
    """(config, item id) -> right by the human labels, for items that should be answered: a refusal or an error
    is wrong, an answer is what its label says, None when the answer has no label. ``grounded``: right only when
    the label also says faithful (the cited passages support it), so an answer from the model's own knowledge
    with unrelated citations does not count."""
    records = list(records)
    out: dict[tuple[str, str], bool | None] = {(str(r.get("config", "")), str(r["id"])): False
                                               for r in records if not r.get("should_refuse")}
    for r, lab in labelled_answers(records, labels):  # answered: what its label says; refused or failed: wrong
        out[(str(r.get("config", "")), str(r["id"]))] = (
            None if lab is None else bool(lab["correct"]) and (bool(lab["faithful"]) or not grounded))
    return out


def human_paired(records: Iterable[Mapping[str, Any]], labels: Iterable[Mapping[str, Any]],
                 grounded: bool = False) -> list[dict[str, Any]]:
    """Each pair of configs on the items both have (labelled): right counts and an exact McNemar test
    (``grounded``: right and faithful, as in :func:`human_outcomes`)."""
    from rag.stats.intervals import mcnemar

    outcomes = human_outcomes(records, labels, grounded)
    configs = sorted({c for c, _ in outcomes})
    out = []
    for i, a in enumerate(configs):
        for b in configs[i + 1:]:
            ids = sorted({k for c, k in outcomes if c == a} & {k for c, k in outcomes if c == b})
            ids = [k for k in ids if outcomes[(a, k)] is not None and outcomes[(b, k)] is not None]
            ra, rb = [outcomes[(a, k)] for k in ids], [outcomes[(b, k)] for k in ids]
            only_a, only_b, p = mcnemar(ra, rb) if ids else (0, 0, 1.0)
            out.append({"a": a, "b": b, "n": len(ids), "a_right": sum(ra), "b_right": sum(rb),
                        "only_a": only_a, "only_b": only_b, "p": p})
    return out


def human_accuracy(records: Iterable[Mapping[str, Any]], labels: Iterable[Mapping[str, Any]],
                   grounded: bool = False) -> dict[str, Any]:
    """End-to-end accuracy by the human labels, per run config: of the items that should be answered, the share
    answered AND labelled correct (a refusal or an error counts as wrong, as in the harness's own e2e accuracy).
    Answers without a label are left out of n and counted in ``unlabelled``; the interval is Wilson's.
    ``grounded``: right only when also faithful to the cited passages."""
    from rag.stats.intervals import wilson

    out: dict[str, Any] = {}
    for (config, _), right in human_outcomes(records, labels, grounded).items():
        row = out.setdefault(config, {"correct": 0, "n": 0, "unlabelled": 0})
        if right is None:
            row["unlabelled"] += 1
            continue
        row["correct"] += right
        row["n"] += 1
    for row in out.values():
        row["accuracy"] = row["correct"] / row["n"] if row["n"] else None
        row["interval"] = wilson(row["correct"], row["n"]) if row["n"] else None
    return out


Ask = Callable[[str], str]


def label_interactively(records: Iterable[Mapping[str, Any]], labels: list[dict[str, Any]], store: str | Path, *,
                        ask: Ask, show: Callable[[str], None], max_items: int = 200) -> int:
    """Ask a human about each unlabelled answer; saves after every label. ``q`` stops, ``s`` skips.

    Returns how many labels were added. ``ask(prompt) -> str`` and ``show(text)`` are typer.prompt / typer.echo
    in the CLI; at most ``max_items`` answers are shown.
    """
    lookup = _Lookup(labels)
    todo = [c for c in labelable(records) if lookup(c) is None][:max_items]
    added = 0
    for i, c in enumerate(todo, 1):
        show(f"\n[{i}/{len(todo)}] {c['id']}\nQ: {c['question']}\nReference: {c['reference']}\nAnswer: {c['answer']}"
             f"\nCites: {', '.join(c['citations']) or '(nothing)'}")
        values: dict[str, bool] = {}
        for name in FIELDS:
            reply = _yes_no(ask, f"{name}? [y]es / [n]o / [s]kip / [q]uit")
            if reply == "q":
                return added
            if reply == "s":
                break
            values[name] = reply == "y"
        if len(values) < len(FIELDS):
            continue
        note = ask("note (optional)").strip()
        labels.append({"id": c["id"], "question": c["question"], "answer": c["answer"], "citations": c["citations"],
                       **values, "note": note, "run": c["run"]})
        save_labels(store, labels)
        added += 1
    return added


def _yes_no(ask: Ask, prompt: str, max_tries: int = 5) -> str:
    for _ in range(max_tries):
        reply = ask(prompt).strip().lower()[:1]
        if reply in ("y", "n", "s", "q"):
            return reply
    return "q"
