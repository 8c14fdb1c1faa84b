"""RRF fusion weights (``dense_weight``, ``rrf_k``): chosen on one set, checked on sets they were not chosen on.

    python benchmarks/fusion_weights.py --choose --out benchmarks/results/fusion_choose.md   # built-in train+dev
    python benchmarks/fusion_weights.py --out benchmarks/results/fusion_unseen.md             # the check

``--choose`` scores every ``dense_weight`` x ``rrf_k`` pair of the grid on the built-in golden set's train and dev
splits (the only set the defaults were chosen on). Without it, the settings' defaults are compared, paired, with
the fusion before them (``rrf_k = 60``, equal weights) on the sets they were not chosen on: the Polygraph dev half,
the Aegis hard and held-out questions, and the built-in test split (reported, never chosen on); Recall@4, MRR@4 and
Recall@8 are pooled over Polygraph and the test split. Every index is the real build with passage windows (the
default), made once into ``SIEVE_HOME/bench-windows/64`` (shared with benchmarks/passage_windows.py); no LM stage
runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.retrieval_stages import Corpus, aegis, builtin, polygraph  # noqa: E402
from benchmarks.tables import emit, paired_cell  # noqa: E402
from rag.config import load_settings  # noqa: E402
from rag.paths import sieve_home  # noqa: E402

BEFORE = (1.0, 60)  # (dense_weight, rrf_k) before these settings: equal weights, the standard RRF constant
WEIGHTS = (1.0, 1.5, 2.0, 2.5, 3.0)
RRF_KS = (5, 10, 20, 60)
POOLED = ("Recall@4", "MRR@4", "Recall@8")


def scores(corpus: Corpus, dense_weight: float, rrf_k: int) -> dict[str, list[float]]:
    """Per metric, each item's value (nan where it has none), hybrid search with these fusion settings."""
    r = corpus.retriever
    r.weights, r.rrf_k = {"bm25": 1.0, "dense": dense_weight}, rrf_k
    per: dict[str, list[float]] = {m: [] for m in corpus.metrics}
    for item in corpus.items:
        hits = r.search(item.question, k=8, mode="hybrid")
        for m, fn in corpus.metrics.items():
            v = fn(item, hits)
            per[m].append(float("nan") if v is None else v)
    return per


def choose(work: Path) -> list[str]:
    corpus = builtin(work, load_settings({"dense_windows": 64}), ["train", "dev"])
    base = scores(corpus, *BEFORE)
    lines = [f"## {corpus.name}: the grid", "", f"n = {len(corpus.items)}; in brackets: the paired difference from "
             f"dense_weight={BEFORE[0]}, rrf_k={BEFORE[1]} (the fusion before), items better and worse, p.", "",
             "| dense_weight | rrf_k | " + " | ".join(corpus.metrics) + " |", "| --- | --- |" + " --- |" * len(corpus.metrics)]
    for w in WEIGHTS:
        for k in RRF_KS:
            per = base if (w, k) == BEFORE else scores(corpus, w, k)
            versus = None if (w, k) == BEFORE else base
            lines.append(f"| {w} | {k} | " + " | ".join(paired_cell(per[m], m in corpus.shares, versus and versus[m], True)
                                                       for m in corpus.metrics) + " |")
    return lines + [""]


def check(work: Path, shared: Path) -> list[str]:
    settings = load_settings({"dense_windows": 64})
    now = (settings.dense_weight, settings.rrf_k)
    sets = [polygraph(shared, work, settings), aegis(shared, work, settings)[0], builtin(work, settings, ["test"])]
    lines, pooled = [], {(c, m): [] for c in (BEFORE, now) for m in POOLED}
    for corpus in sets:
        before, after = scores(corpus, *BEFORE), scores(corpus, *now)
        for m in POOLED if "Recall@4" in corpus.metrics else ():
            pooled[(BEFORE, m)] += before[m]
            pooled[(now, m)] += after[m]
        lines += [f"## {corpus.name}", "", f"n = {len(corpus.items)}", "",
                  "| dense_weight | rrf_k | " + " | ".join(corpus.metrics) + " |",
                  "| --- | --- |" + " --- |" * len(corpus.metrics),
                  f"| {BEFORE[0]} | {BEFORE[1]} | " + " | ".join(paired_cell(before[m], m in corpus.shares)
                                                               for m in corpus.metrics) + " |",
                  f"| {now[0]} | {now[1]} | " + " | ".join(paired_cell(after[m], m in corpus.shares, before[m], True)
                                                         for m in corpus.metrics) + " |", ""]
    n = sum(v == v for v in pooled[(now, POOLED[0])])
    return lines + ["## Pooled over the Polygraph dev half and the built-in test split", "", f"n = {n}", "",
                    "| dense_weight | rrf_k | " + " | ".join(POOLED) + " |", "| --- | --- |" + " --- |" * len(POOLED),
                    f"| {BEFORE[0]} | {BEFORE[1]} | " + " | ".join(paired_cell(pooled[(BEFORE, m)], False) for m in POOLED) + " |",
                    f"| {now[0]} | {now[1]} | " + " | ".join(paired_cell(pooled[(now, m)], False, pooled[(BEFORE, m)], True)
                                                           for m in POOLED) + " |", ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--choose", action="store_true", help="the grid on the built-in train+dev splits")
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    parser.add_argument("--work", type=Path, default=None, help="index folders (default: SIEVE_HOME/bench-windows/64)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = args.work or sieve_home() / "bench-windows" / "64"
    head = ["# RRF fusion weights: " + ("the choice (built-in train+dev)" if args.choose else "the check on unseen sets"),
            "", f"Command: `python benchmarks/fusion_weights.py{' --choose' if args.choose else ''}`; hybrid search, "
            "passage windows of 64 pieces, 50 candidates per list, no LM stage. Intervals: bootstrap of the mean "
            "(Wilson for shares); p: sign-flip for means, McNemar for shares.", ""]
    emit(head + (choose(work) if args.choose else check(work, args.shared)), args.out)


if __name__ == "__main__":
    main()
