"""Passage windows (``dense_windows``) against one vector per chunk: the first retrieval on three corpora.

    python benchmarks/passage_windows.py --out benchmarks/results/windows.md
    python benchmarks/passage_windows.py --builtin-splits test --only builtin     # the test split, reported once

Each corpus is indexed by the real build (rag.index.build.build_index) once per ``--windows`` value (0 = one
vector per chunk, the index before windows; 64 = the default), into ``SIEVE_HOME/bench-windows/<value>/``, and
searched with no LM stage, in ``dense`` and ``hybrid`` mode, 8 hits deep:

* **polygraph** dev half, the 25 items with gold: Recall@4, MRR@4, Recall@8;
* **aegis** hard and held-out questions (13, with needles): needles found@8, questions with every needle@8;
* **builtin** golden set, ``--builtin-splits`` (default train,dev: the window size was chosen there; ``test`` is
  for reporting once).

Every figure has its 95% interval and n; each windowed row is compared with the same mode without windows on the
same items (paired: McNemar for shares, sign-flip p for means), and Recall@4 is pooled over the corpora that have
it when there are several. Build seconds, index size and the median query
time (embedding the query included) are measured in the same run, side by side, as ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.retrieval_stages import Corpus, aegis, builtin, polygraph  # noqa: E402
from benchmarks.tables import emit, paired_cell  # noqa: E402
from rag.config import load_settings  # noqa: E402
from rag.paths import sieve_home  # noqa: E402

MODES = ("dense", "hybrid")


def corpora(which: list[str], shared: Path, work: Path, windows: int, splits: list[str]) -> tuple[list[Corpus], dict]:
    """The corpora indexed with ``dense_windows = windows``, and per corpus its build seconds and size in bytes."""
    settings = load_settings({"dense_windows": windows})
    out, cost = [], {}
    for name in which:
        t = time.perf_counter()
        made = {"polygraph": lambda: [polygraph(shared, work, settings)],
                "aegis": lambda: aegis(shared, work, settings)[:1],
                "builtin": lambda: [builtin(work, settings, splits)]}[name]()
        index = made[0].retriever.index
        built = index.manifest.get("build_seconds", time.perf_counter() - t)
        cost[made[0].name] = {"build_s": built, "bytes": sum(p.stat().st_size for p in index.dir.rglob("*") if p.is_file()),
                              "vectors": (index.manifest.get("windows") or {}).get("count", len(index))}
        out.extend(made)
    return out, cost


def score(corpus: Corpus, mode: str) -> tuple[dict[str, list[float]], float]:
    """Per metric, each item's value (nan where it has none), and the median query seconds."""
    per: dict[str, list[float]] = {m: [] for m in corpus.metrics}
    seconds = []
    for item in corpus.items:
        t = time.perf_counter()
        hits = corpus.retriever.search(item.question, k=8, mode=mode)
        seconds.append(time.perf_counter() - t)
        for m, fn in corpus.metrics.items():
            v = fn(item, hits)
            per[m].append(float("nan") if v is None else v)
    return per, statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="polygraph,aegis,builtin", help="corpora, comma-separated")
    parser.add_argument("--windows", default="0,64", help="dense_windows values; the first is the baseline")
    parser.add_argument("--builtin-splits", default="train,dev")
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    parser.add_argument("--work", type=Path, default=None, help="index folders (default: SIEVE_HOME/bench-windows)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    values = [int(v) for v in args.windows.split(",")]
    which = [c for c in args.only.split(",") if c]
    work = args.work or sieve_home() / "bench-windows"
    runs = {}
    for w in values:
        print(f"indexing with dense_windows={w}", file=sys.stderr)
        runs[w] = corpora(which, args.shared, work / str(w), w, args.builtin_splits.split(","))
    base = values[0]
    lines = ["# Passage windows against one vector per chunk (first retrieval, no LM stage)", "",
             f"Command: `python benchmarks/passage_windows.py --only {args.only} --windows {args.windows} "
             f"--builtin-splits {args.builtin_splits}`", "",
             "Rows: dense_windows value and search mode. In brackets after a windowed row: its paired difference from "
             f"dense_windows={base} in the same mode, the items it did better and worse on, and p (McNemar for "
             "shares, sign-flip for means). Intervals: bootstrap of the mean (Wilson for shares).", ""]
    pooled: dict[tuple[int, str], list[float]] = {}
    for i, corpus in enumerate(runs[base][0]):
        scored = {(w, mode): score(runs[w][0][i], mode) for w in values for mode in MODES}
        if "Recall@4" in corpus.metrics:
            for key, (per, _) in scored.items():
                pooled.setdefault(key, []).extend(per["Recall@4"])
        lines += [f"## {corpus.name}", "", f"n = {len(corpus.items)}", "",
                  "| dense_windows | mode | " + " | ".join(corpus.metrics) + " | median query ms |",
                  "| --- | --- |" + " --- |" * (len(corpus.metrics) + 1)]
        for w in values:
            for mode in MODES:
                per, secs = scored[(w, mode)]
                cells = [paired_cell(per[m], m in corpus.shares,
                                     None if w == base else scored[(base, mode)][0][m], counts=True)
                         for m in corpus.metrics]
                lines.append(f"| {w} | {mode} | " + " | ".join(cells) + f" | {1000 * secs:.1f} |")
        lines += ["", "| dense_windows | vectors | index MB | build s | build time ratio | size ratio |",
                  "| --- | --- | --- | --- | --- | --- |"]
        first = runs[base][1][corpus.name]
        for w in values:
            c = runs[w][1][runs[w][0][i].name]
            lines.append(f"| {w} | {c['vectors']} | {c['bytes'] / 1e6:.1f} | {c['build_s']:.1f} | "
                         f"{c['build_s'] / first['build_s']:.2f} | {c['bytes'] / first['bytes']:.2f} |")
        lines.append("")
    named = [c.name for c in runs[base][0] if "Recall@4" in c.metrics]
    if len(named) > 1:
        lines += [f"## Recall@4 pooled over {' and '.join(named)}", "",
                  f"n = {sum(v == v for v in pooled[(base, MODES[0])])}", "", "| dense_windows | mode | Recall@4 |",
                  "| --- | --- | --- |"]
        for w in values:
            for mode in MODES:
                versus = None if w == base else pooled[(base, mode)]
                lines.append(f"| {w} | {mode} | {paired_cell(pooled[(w, mode)], False, versus, counts=True)} |")
        lines.append("")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
