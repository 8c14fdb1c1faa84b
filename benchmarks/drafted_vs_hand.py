"""Does a drafted golden set order retrieval configurations as the hand-written one does?

    rag golden draft --out drafted.jsonl --n 60            # on the built-in index (the embedded model)
    rag golden review drafted.jsonl                        # by hand
    python benchmarks/drafted_vs_hand.py --drafted drafted.jsonl --out benchmarks/results/drafted_vs_hand.md

Scores the first retrieval of each mode (bm25, dense, hybrid; no language model) by Recall@4 and MRR@4 with 95%
intervals on three sets: the hand-written ``golden/python_ref.jsonl`` (all splits: nothing is chosen here), the
drafted set's items with gold, and its items a human kept (``--reviewed-only``: accept or edit by a human). The
ordering of the modes on each set is printed beside the hand-written one's, with whether they agree, and the share
of reviewed items kept. Uses the index of the settings (``SIEVE_HOME``, ``--index-dir``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402

MODES = ("bm25", "dense", "hybrid")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--drafted", type=Path, required=True)
    parser.add_argument("--index-dir", type=Path)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--aegis", type=Path, metavar="WORK",
                        help="the drafted set is of the Aegis policies: compare with Aegis's own question files "
                             "(needles@8, source doc@4) on the index benchmarks/retrieval_stages.py builds in WORK")
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.aegis:
        return aegis(args)

    from rag.config import load_settings
    from rag.curate.review import reviewer_kind
    from rag.eval.golden import gold_chunk_ids, load_golden
    from rag.eval.metrics import hits_recall, mrr_at_k, with_duplicates
    from rag.paths import golden_path
    from rag.retrieval.retriever import Retriever

    settings = load_settings({"index_dir": args.index_dir})
    retriever = Retriever.from_settings(settings)
    chunks = retriever.index.chunks
    drafted = load_golden(args.drafted)
    reviewed = [i for i in drafted if reviewer_kind(i.meta) == "human"]
    kept = [i for i in reviewed if i.meta.get("review") in ("accept", "edit")]
    sets = {"hand-written (python_ref.jsonl, all splits)": load_golden(golden_path()),
            f"drafted ({args.drafted.name}), every item": drafted,
            "drafted, kept by a human reviewer": kept}
    lines = ["# A drafted golden set against the hand-written one: retrieval modes", "",
             f"`python benchmarks/drafted_vs_hand.py --drafted {args.drafted.name}`; built-in index, first retrieval, "
             f"k = {args.k}; items with gold passages only (unanswerable items have none).", "",
             f"Review: {len(reviewed)} of {len(drafted)} drafted items reviewed by hand, {len(kept)} kept "
             f"({len(kept) / len(reviewed):.0%})." if reviewed else "Review: no item reviewed by hand yet.", "",
             "| set | n | " + " | ".join(f"{m} Recall@{args.k} | {m} MRR@{args.k}" for m in MODES) + " | order by Recall | agrees |",
             "| --- | --- |" + " --- | --- |" * len(MODES) + " --- | --- |"]
    hand_order = None
    for name, items in sets.items():
        scored = [(i, gold_chunk_ids(i, chunks)) for i in items]
        scored = [(i, g) for i, g in scored if g]
        if not scored:
            lines.append(f"| {name} | 0 |" + " - | - |" * len(MODES) + " - | - |")
            continue
        cells, means = [], {}
        for mode in MODES:
            recall, mrr = [], []
            for item, gold in scored:
                hits = retriever.retrieve(item.question, k=args.k, mode=mode).hits
                g = with_duplicates(gold, hits)
                recall.append(hits_recall(hits, g))
                mrr.append(mrr_at_k([h.chunk_id for h in hits], g, args.k))
            cells += [cell(recall), cell(mrr)]
            means[mode] = sum(recall) / len(recall)
        order = ranked(means)
        hand_order = hand_order or order
        lines.append(f"| {name} | {len(scored)} | " + " | ".join(cells) + f" | {order} | {agrees(order, hand_order)} |")
    emit(lines + FOOTER, args.out)
    return 0


def aegis(args: argparse.Namespace) -> int:
    """Retrieval modes ordered by Aegis's own questions (needles@8 of the hard and held-out files, source doc@4 of
    the single-fact file) and by a set drafted on the same index (Recall@k of its gold passages)."""
    from benchmarks.retrieval_stages import aegis as aegis_corpora
    from rag.config import load_settings
    from rag.curate.review import reviewer_kind
    from rag.eval.golden import gold_chunk_ids, load_golden
    from rag.eval.metrics import hits_recall, with_duplicates

    corpora = aegis_corpora(args.shared, args.aegis, load_settings())
    retriever = corpora[0].retriever
    chunks = retriever.index.chunks
    drafted = load_golden(args.drafted)
    reviewed = [i for i in drafted if reviewer_kind(i.meta) == "human"]
    kept = [i for i in reviewed if i.meta.get("review") in ("accept", "edit")]
    k = args.k

    def recall(item, hits):
        gold = gold_chunk_ids(item, chunks)
        return hits_recall(hits[:k], with_duplicates(gold, hits[:k])) if gold else None

    rows = [(corpora[0].name, corpora[0].items, "needles@8", corpora[0].metrics["needles@8"]),
            (corpora[1].name, corpora[1].items, "source doc@4", corpora[1].metrics["source doc@4"]),
            (f"drafted ({args.drafted.name}), every item with gold", drafted, f"Recall@{k}", recall),
            ("drafted, kept by a human reviewer", kept, f"Recall@{k}", recall)]
    lines = ["# A golden set drafted on the Aegis policies against Aegis's own question files: retrieval modes", "",
             f"`python benchmarks/drafted_vs_hand.py --drafted {args.drafted.name} --aegis WORK`; Aegis index, first "
             "retrieval; each set scored by its own metric.", "",
             f"Review: {len(reviewed)} of {len(drafted)} drafted items reviewed by hand, {len(kept)} kept "
             f"({len(kept) / len(reviewed):.0%})." if reviewed else "Review: no item reviewed by hand yet.", "",
             "| set | metric | n | " + " | ".join(MODES) + " | order | agrees with the hard + held-out order |",
             "| --- | --- | --- |" + " --- |" * len(MODES) + " --- | --- |"]
    first = None
    for name, items, metric, fn in rows:
        means, cells, n = {}, [], 0
        for mode in MODES:
            values = [v for v in (fn(i, retriever.retrieve(i.question, k=8, mode=mode).hits) for i in items) if v is not None]
            n = len(values)
            if not values:
                cells.append("-")
                continue
            means[mode] = sum(values) / n
            cells.append(cell(values))
        order = ranked(means) if len(means) == len(MODES) else "-"
        first = first or order
        lines.append(f"| {name} | {metric} | {n} | " + " | ".join(cells) + f" | {order} | {agrees(order, first)} |")
    emit(lines + FOOTER, args.out)
    return 0


FOOTER = ["", "Intervals: bootstrap of the mean. The order compares means only; where intervals overlap, "
          "it is not a finding on its own."]


def cell(values: list[float]) -> str:
    """The mean of ``values`` and its bootstrap 95% interval."""
    from rag.stats.intervals import mean_interval

    lo, hi = mean_interval(values) or (float("nan"), float("nan"))
    return f"{sum(values) / len(values):.3f} [{lo:.2f}, {hi:.2f}]"


def agrees(order: str, first: str) -> str:
    """The agreement column: "-" on the row that sets the order, else whether this row's order is the same."""
    return "-" if order is first else ("yes" if order == first else "no")


def ranked(means: dict[str, float]) -> str:
    """The modes best first, ties (equal to 3 decimals) joined by "=": "hybrid > dense = bm25"."""
    out = ""
    ordered = sorted(means, key=lambda m: -means[m])
    for prev, mode in zip([None, *ordered], ordered):
        out += mode if prev is None else (" = " if round(means[prev], 3) == round(means[mode], 3) else " > ") + mode
    return out


if __name__ == "__main__":
    sys.exit(main())
