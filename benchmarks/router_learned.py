"""The learned router (rag.data.labelled) against the cue router (rag.data.schemalink), on questions neither chose on.

    python benchmarks/router_learned.py --index-dir $SIEVE_HOME/demo/ops/index \
        --train heldout,blind,fresh,third --report final,sixth --out benchmarks/results/router_learned.md

No model call. The learned router is fitted from the ``--train`` splits of ``--labels`` (golden/ops_routes.jsonl),
exactly as ``router = "learned"`` fits it in the agent; both routers then route every question of the ``--report``
splits (each also without its questions that repeat one learned from: :func:`repeating`) and of the demo's own golden
set (beside the index; none of its items is learned from). Per set: the share
routed right with its Wilson interval, the paired comparison (McNemar, exact), right/items per gold route; then the
seconds the fit takes and the median milliseconds per routed question, side by side. ``--combined`` adds the two
together, ``both`` where they disagree (the safe route on doubt), against the cues alone; ``--gated P`` the cues
overruled by the learned route where it differs and is at least P sure (``router = "cues+learned"``,
``router_overrule = P``), against the cues alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit, share  # noqa: E402
from rag.stats.intervals import compare_paired  # noqa: E402


def repeating(items: list, learned_from: list) -> set[str]:
    """The ids of ``items`` whose question repeats or rewords one learned from (rag.eval.overlap.near_duplicates:
    rarity-weighted word overlap >= 0.75): helpers writing from the same short policies converge on the same
    questions, and a repeat measures what the router memorised, not how it generalises."""
    from rag.eval.overlap import near_duplicates

    ids = {i.id for i in items}
    pairs = near_duplicates([(i.id, i.question, None) for i in [*items, *learned_from]])
    return {a if a in ids else b for a, b, _ in pairs if (a in ids) != (b in ids)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-dir", type=Path, required=True, help="the ops demo's index (rag demo ops)")
    parser.add_argument("--labels", type=Path, default=ROOT / "golden" / "ops_routes.jsonl")
    parser.add_argument("--train", default="heldout,blind,fresh,third", help="splits of --labels learned from")
    parser.add_argument("--report", default="final,sixth", help="splits of --labels reported on")
    parser.add_argument("--golden", type=Path, help="the demo's golden set (default: beside the index)")
    parser.add_argument("--short-names", action="store_true", help="the cue router links names said short, as the "
                        "agent's short_names (on by default) has it; without it, whole names only (the reports before "
                        "2026-12-07 afternoon)")
    parser.add_argument("--combined", action="store_true", help="also a table of the two combined, `both` where "
                        "they disagree, against the cues alone")
    parser.add_argument("--gated", type=float, help="also a table of router = cues+learned at this router_overrule "
                        "(the learned route where it differs and is at least this sure) against the cues alone")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.config import load_settings
    from rag.data import Warehouse
    from rag.data.labelled import ROUTES, learn_router
    from rag.data.schemalink import Vocabulary, read_cues
    from rag.eval.golden import load_golden
    from rag.index.store import Index

    index = Index.load(args.index_dir, load_settings({"index_dir": args.index_dir}))
    vocab = Vocabulary.for_index(index, Warehouse(index.tables_path), short_names=args.short_names)
    train = [s for s in args.train.split(",") if s]
    index.query_encoder.encode(["warm up"])  # the encoder's load is not the fit's
    start = time.perf_counter()
    learned = learn_router(args.labels, train, index.query_encoder.encode)
    fit_s = time.perf_counter() - start

    labelled = [i for i in load_golden(args.labels) if not i.should_refuse]
    golden = args.golden or args.index_dir.parent / "golden.jsonl"
    demo = [i for i in load_golden(golden) if i.meta.get("route") and not i.should_refuse]
    learned_from = [i for i in labelled if i.split in train]
    sets, reported = [], []  # (name, items, whether its misses are listed): a subset's misses are listed already
    for s in (s for s in args.report.split(",") if s):
        mine = [i for i in labelled if i.split == s]
        repeats = repeating(mine, learned_from)
        reported += mine
        sets.append((f"`{s}`", mine, True))
        if repeats:
            sets.append((f"`{s}` without the {len(repeats)} that repeat a question learned from",
                         [i for i in mine if i.id not in repeats], False))
    sets.append((f"the demo's golden set ({golden.name}, all splits, answerable)", demo, True))
    sets.append(("**the report splits together**", reported, False))

    timing = {"cues": [], "learned": []}
    lines = ["# The learned router against the cue router, on questions neither chose on", "",
             f"Command: `python benchmarks/router_learned.py --index-dir $SIEVE_HOME/demo/ops/index --train {args.train} "
             f"--report {args.report}" + (" --short-names" if args.short_names else "")
             + (" --combined" if args.combined else "") + (f" --gated {args.gated:g}" if args.gated else "")
             + (f" --out {args.out.as_posix()}" if args.out else "") + "`", "",
             f"Learned from {args.labels.name}, splits {', '.join(train)}: {sum(learned.counts.values())} questions "
             f"({', '.join(f'{n} {r}' for r, n in learned.counts.items())}). No model call in either router.", "",
             "| questions | n | cues | learned | paired (McNemar) | " + " | ".join(f"route {r}: cues / learned" for r in ROUTES) + " |",
             "|---|---|---|---|---|" + "---|" * len(ROUTES)]
    misses: list[str] = []
    combined = ["", "Combined (`both` where the two disagree) against the cues alone:", "",
                "| questions | n | cues | combined | paired (McNemar) |", "|---|---|---|---|---|"]
    gated = ["", f"Gated (router = cues+learned, router_overrule = {args.gated:g}: the learned route where it differs "
             "and is at least that sure) against the cues alone:", "",
             "| questions | n | cues | gated | overruled | paired (McNemar) |", "|---|---|---|---|---|---|"] \
        if args.gated else []
    gated_misses: list[str] = []
    for name, items, list_misses in sets:
        cues, mine, both, gate, overruled = [], [], [], [], 0
        for item in items:
            t0 = time.perf_counter()
            cue = read_cues(item.question, vocab).route
            cues.append(cue == item.meta["route"])
            t1 = time.perf_counter()
            got, _, sure = learned.read(item.question)
            both.append((cue if cue == got else "both") == item.meta["route"])
            chosen = got if got != cue and sure >= (args.gated or 2.0) else cue
            overruled += chosen != cue
            gate.append(chosen == item.meta["route"])
            if args.gated and list_misses and chosen != item.meta["route"]:
                gated_misses.append(f"- `{item.id}` ({item.meta['route']}, gated says {chosen}"
                                    + (f", learned p={sure:.2f} over the cues' {cue}" if chosen != cue else "")
                                    + f"): {item.question}")
            timing["cues"].append(t1 - t0)
            timing["learned"].append(time.perf_counter() - t1)
            mine.append(got == item.meta["route"])
            if got != item.meta["route"] and list_misses:
                misses.append(f"- `{item.id}` ({item.meta['route']}, learned says {got}): {item.question}")
        c = compare_paired([float(x) for x in cues], [float(x) for x in mine], "cues", "learned")
        per_route = [f"{sum(x for x, i in zip(cues, items) if i.meta['route'] == r)} / "
                     f"{sum(x for x, i in zip(mine, items) if i.meta['route'] == r)} of "
                     f"{sum(i.meta['route'] == r for i in items)}" for r in ROUTES]
        lines.append(f"| {name} | {len(items)} | {share(sum(cues), len(items))} | {share(sum(mine), len(items))} | "
                     f"{c.only_a} worse, {c.only_b} better, p={c.p:.3f} | " + " | ".join(per_route) + " |")
        j = compare_paired([float(x) for x in cues], [float(x) for x in both], "cues", "combined")
        combined.append(f"| {name} | {len(items)} | {share(sum(cues), len(items))} | {share(sum(both), len(items))} | "
                        f"{j.only_a} worse, {j.only_b} better, p={j.p:.3f} |")
        if args.gated:
            g = compare_paired([float(x) for x in cues], [float(x) for x in gate], "cues", "gated")
            gated.append(f"| {name} | {len(items)} | {share(sum(cues), len(items))} | {share(sum(gate), len(items))} "
                         f"| {overruled} | {g.only_a} worse, {g.only_b} better, p={g.p:.4f} |")
    cue_ms, learned_ms = (statistics.median(timing[k]) * 1000 for k in ("cues", "learned"))
    lines += ["", "| router | fit when the agent is built (s) | per question, median (ms) | per question, ratio to cues |",
              "|---|---|---|---|",
              f"| cues | - | {cue_ms:.2f} | 1.00 |",
              f"| learned | {fit_s:.2f} | {learned_ms:.2f} | {learned_ms / cue_ms:.2f} |",
              *(combined if args.combined else []), *gated,
              "", "What the learned router gets wrong:", "", *misses,
              *(["", "What the gated router gets wrong:", "", *gated_misses] if args.gated else [])]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
