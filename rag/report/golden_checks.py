"""Checks on a golden set, as ``rag golden draft`` and ``rag golden check`` print them.

A drafted set is only as good as what it covers and how its gold was found, so before anything is scored a person
reads: counts by type and split, the documents and sections its seed and gold passages come from (out of the
index's, when an index is given), the items that have no gold, the sizes of the labelled pools and how many pooled
passages were labelled relevant, near-duplicate questions (rag.eval.overlap.near_duplicates), the review decisions
so far, and every drafted item that was dropped, with why. Works on any golden file: a hand-written one simply has
no pools, seeds or drops.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

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
        "pool_sizes": sorted(len(it.meta["pool"]) for it in items if isinstance(it.meta.get("pool"), list)),
        "relevant": [len(it.relevant_chunk_ids) for it in items
                     if it.type != "unanswerable" and isinstance(it.meta.get("pool"), list)],
        "near_duplicates": near_duplicates([(it.id, it.question, it.meta.get("seed_chunk_id")) for it in items]),
        "reviewed": Counter(str(it.meta.get("review") or "not reviewed") for it in items),
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
    lines.append("reviewed: " + ", ".join(f"{k} {n}" for k, n in sorted(c["reviewed"].items())))
    drops = c["dropped"]
    lines.append(f"dropped: {len(drops)}" + "".join(f"\n  {i} ({q}): {why}" for i, q, why in drops[:MAX_LISTED]))
    if len(drops) > MAX_LISTED:
        lines.append(f"  ... and {len(drops) - MAX_LISTED} more")
    return lines
