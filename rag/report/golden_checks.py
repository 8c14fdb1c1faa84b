"""Checks on a golden set, as ``rag golden draft`` and ``rag golden check`` print them.

A drafted set is only as good as what it covers and how its gold was found, so before anything is scored a person
reads: counts by type and split, the documents and sections its seed and gold passages come from (out of the
index's, when an index is given), the items that have no gold, the sizes of the labelled pools and how many pooled
passages were labelled relevant, near-duplicate questions (rag.eval.overlap.near_duplicates), the review so far
(:func:`review_summary`: decisions by reviewer, human or model, the share kept, and where a human decided items the
model had reviewed, how often the two agree), and every drafted item that was dropped, with why. Works on any golden
file: a hand-written one simply has no pools, seeds or drops.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rag.curate.review import HUMAN, REVIEWS, reviewer_kind
from rag.eval.calibrate import cohen_kappa
from rag.eval.golden import TYPES, GoldenItem, gold_chunk_ids
from rag.eval.overlap import near_duplicates
from rag.ingest.chunking import Chunk

SPLITS = ("train", "dev", "test")
MAX_LISTED = 20  # ids, pairs or drops listed per check before "... and N more"


def set_checks(items: Sequence[GoldenItem], dropped: Sequence[Mapping[str, Any]] = (),
               chunks: Sequence[Chunk] | None = None) -> dict[str, Any]:
    """The checks as data (module docstring); ``dropped`` are the records of ``FILE.dropped.jsonl``."""
    by_id = {c.id: c for c in chunks or ()}
    places: set[tuple[str, str]] = set()
    for it in items:
        ids = {it.meta.get("seed_chunk_id"), *(gold_chunk_ids(it, chunks) if chunks else it.relevant_chunk_ids)}
        places |= {(by_id[i].source, by_id[i].title) for i in ids if i in by_id}
        if not by_id and it.meta.get("source") is not None:
            places.add((str(it.meta["source"]), str(it.meta.get("section") or "")))
    return {
        "items": len(items),
        "by_type_split": Counter((it.type, it.split or "none") for it in items),
        "documents": len({s for s, _ in places}), "sections": len(places),
        "index_documents": len({c.source for c in chunks}) if chunks else None,
        "index_sections": len({(c.source, c.title) for c in chunks}) if chunks else None,
        "without_gold": [it.id for it in items
                         if it.type != "unanswerable" and not it.relevant_chunk_ids and not it.evidence],
        "seed_gold": [it.id for it in items if it.meta.get("seed_gold")],
        "pool_sizes": sorted(len(it.meta["pool"]) for it in items if isinstance(it.meta.get("pool"), list)),
        "relevant": [len(it.relevant_chunk_ids) for it in items
                     if it.type != "unanswerable" and isinstance(it.meta.get("pool"), list)],
        "near_duplicates": near_duplicates([(it.id, it.question, it.meta.get("seed_chunk_id")) for it in items]),
        "review": review_summary({**it.meta, "id": it.id} for it in items),
        "dropped": [(str(d.get("id")), str(d.get("question")), str(d.get("dropped"))) for d in dropped],
    }


def _listed(values: Sequence[str]) -> str:
    more = f", ... and {len(values) - MAX_LISTED} more" if len(values) > MAX_LISTED else ""
    return ", ".join(values[:MAX_LISTED]) + more


def check_lines(c: Mapping[str, Any]) -> list[str]:
    """The checks as the lines a terminal shows."""
    counts = c["by_type_split"]
    splits = [*SPLITS, *sorted({s for _, s in counts} - set(SPLITS))]
    lines = [f"items: {c['items']}", f"  {'type':<14}" + "".join(f"{s:>7}" for s in splits) + f"{'total':>7}"]
    for t in [*TYPES, "all"]:
        row = [sum(n for (tt, s), n in counts.items() if s == split and t in (tt, "all")) for split in splits]
        lines.append(f"  {t:<14}" + "".join(f"{n:>7}" for n in row) + f"{sum(row):>7}")
    of = lambda key: f" of {c['index_' + key]} in the index" if c.get("index_" + key) is not None else ""
    lines.append(f"documents covered: {c['documents']}{of('documents')}; sections covered: {c['sections']}{of('sections')}")
    lines.append(f"items without gold: {len(c['without_gold'])}" + (f" ({_listed(c['without_gold'])})" if c["without_gold"] else ""))
    if c.get("seed_gold"):
        lines.append(f"items whose only gold is their seed, which the labelling model did not label relevant: "
                     f"{len(c['seed_gold'])} ({_listed(c['seed_gold'])}); review them")
    pools = c["pool_sizes"]
    if pools:
        relevant = c["relevant"]
        lines.append(f"gold pools: {len(pools)} labelled, size min {pools[0]}, median {statistics.median(pools):g}, "
                     f"max {pools[-1]}" + (f"; passages labelled relevant per answerable/vague item: mean "
                                           f"{statistics.fmean(relevant):.2f}, none {relevant.count(0)}" if relevant else ""))
    else:
        lines.append("gold pools: none (the items were not drafted by rag golden draft)")
    dupes = c["near_duplicates"]
    lines.append(f"near-duplicates: {len(dupes)}" + "".join(f"\n  {a} ~ {b}: {why}" for a, b, why in dupes[:MAX_LISTED]))
    if len(dupes) > MAX_LISTED:
        lines.append(f"  ... and {len(dupes) - MAX_LISTED} more")
    lines.extend(review_lines(c["review"]))
    drops = c["dropped"]
    lines.append(f"dropped: {len(drops)}" + "".join(f"\n  {i} ({q}): {why}" for i, q, why in drops[:MAX_LISTED]))
    if len(drops) > MAX_LISTED:
        lines.append(f"  ... and {len(drops) - MAX_LISTED} more")
    return lines


def review_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The review of a golden set as data, from its items' records: decisions by reviewer kind (``(review, "human" |
    "model")`` -> count), decisions per model name, how many are kept (accept or edit), the ids left unreviewed with a
    ``review_note``, and, for the items a human decided after the model had (their ``auto_review``), the pairs
    (model kept, human kept) with their agreement and Cohen's kappa."""
    from rag.stats.intervals import wilson

    decisions: Counter[tuple[str, str]] = Counter()
    models: Counter[str] = Counter()
    notes, pairs, n = [], [], 0
    for rec in records:
        n += 1
        kind = reviewer_kind(rec)
        if kind is None:
            if rec.get("review_note"):
                notes.append(str(rec.get("id")))
            continue
        decisions[(rec["review"], kind)] += 1
        if kind != HUMAN:
            models[str(rec["reviewed_by"])] += 1
        auto = rec.get("auto_review")
        if kind == HUMAN and isinstance(auto, Mapping) and auto.get("review") in REVIEWS:
            pairs.append((auto["review"] != "reject", rec["review"] != "reject"))
    agree = sum(a == b for a, b in pairs)
    return {"items": n, "reviewed": sum(decisions.values()), "decisions": decisions, "models": models,
            "kept": sum(v for (d, _), v in decisions.items() if d != "reject"), "notes": notes,
            "overlap": Counter(pairs), "overlap_n": len(pairs), "agreement": agree / len(pairs) if pairs else None,
            "agreement_ci": wilson(agree, len(pairs)), "kappa": cohen_kappa(*zip(*pairs)) if pairs else None}


def review_lines(r: Mapping[str, Any]) -> list[str]:
    """The review as the lines a terminal shows (``rag golden check``, and the end of ``rag golden review``)."""
    d, reviewed = r["decisions"], r["reviewed"]
    by_kind = {k: sum(v for (_, kk), v in d.items() if kk == k) for k in (HUMAN, "model")}
    models = ", ".join(f"{name} {v}" for name, v in sorted(r["models"].items()))
    left = r["items"] - reviewed
    lines = [f"reviewed: {reviewed} of {r['items']} (human {by_kind[HUMAN]}, model {by_kind['model']}"
             + (f": {models}" if models else "") + f"); not reviewed {left}"
             + (f" ({len(r['notes'])} with a note: {_listed(r['notes'])})" if r["notes"] else "")]
    if not reviewed:
        return lines
    lines.append(f"  {'decision':<10}{'human':>7}{'model':>7}{'total':>7}")
    for decision in REVIEWS:
        row = [d[(decision, HUMAN)], d[(decision, "model")]]
        lines.append(f"  {decision:<10}" + "".join(f"{v:>7}" for v in row) + f"{sum(row):>7}")
    lines.append(f"kept (accept or edit): {r['kept']} of {reviewed} reviewed ({r['kept'] / reviewed:.2f})")
    if not r["overlap_n"]:
        lines.append("human and model agreement: no item yet (n=0; a human reviewing items after --auto gives it)")
        return lines
    o, (lo, hi) = r["overlap"], r["agreement_ci"]
    kappa = "n/a" if r["kappa"] is None else f"{r['kappa']:.2f}"
    lines.append(f"human and model agreement: {r['agreement']:.2f} [{lo:.2f}, {hi:.2f}] (n={r['overlap_n']}, "
                 f"kappa {kappa}): both kept {o[(True, True)]}, both rejected {o[(False, False)]}, model kept and "
                 f"human rejected {o[(True, False)]}, model rejected and human kept {o[(False, True)]}")
    return lines
