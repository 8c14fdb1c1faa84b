"""Does a drafted golden set order the named configurations' first retrieval as a reference set does?

    python benchmarks/drafted_configs.py --drafted benchmarks/results/drafted_builtin_157.jsonl \
        --out benchmarks/results/drafted_configs_157.md
    python benchmarks/aegis_golden.py --out aegis.jsonl     # Aegis's question files as a golden set
    python benchmarks/drafted_configs.py --drafted benchmarks/results/drafted_aegis_60.jsonl \
        --reference aegis.jsonl --index-dir AEGIS_INDEX --out benchmarks/results/drafted_configs_aegis.md

Each cell scores what ``rag eval --retrieval-only --config CONFIG --golden SET --split all --index-dir INDEX``
scores, in one process (one retriever per configuration): Recall@4 with its bootstrap interval over the items with
gold. The sets: the reference (by default the hand-written ``golden/python_ref.jsonl`` on the built-in index), the
drafted set, and its items a human kept (``--reviewed-by human``). ``deep`` writes
one HyDE passage per question on the rewriter's model (the DSPy cache makes a rerun cheap); ``full`` searches as
``hybrid`` does first, so it is no column here. Speaks for retrieval only: the agent's answers and refusals are
benchmarks/drafted_agent_rank.py's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.drafted_vs_hand import agrees, ranked  # noqa: E402
from benchmarks.tables import emit  # noqa: E402

CONFIGS = ("baseline", "hybrid", "deep")


def retriever_for(config: str, index_dir: Path | None = None):
    """(the retriever of ``config``'s retrieval settings, with its LM query stages, and its k): as ``rag eval
    --retrieval-only --config CONFIG`` builds it."""
    from rag.agent.program import with_query_stages
    from rag.errors import SieveError
    from rag.eval.presets import resolve_config
    from rag.retrieval.retriever import Retriever

    settings, skipped = resolve_config(config, [], index_dir)
    if skipped:
        raise SieveError(skipped)
    retriever = Retriever.from_settings(settings)
    if settings.lm_stages:
        with_query_stages(retriever, settings)  # deep's HyDE, on the rewriter's model
    return retriever, settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--drafted", type=Path, required=True)
    parser.add_argument("--reference", type=Path, default=ROOT / "golden" / "python_ref.jsonl",
                        help="the golden set whose order the drafted one should repeat (default: the hand-written one)")
    parser.add_argument("--index-dir", type=Path, help="the index both sets ask (default: SIEVE_HOME/index)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.curate.review import keep_reviewed
    from rag.eval.golden import load_golden
    from rag.eval.metrics import retrieval_report
    from rag.eval.presets import select_items

    drafted = load_golden(args.drafted)
    own = args.reference.name == "python_ref.jsonl"
    sets = [(f"{'hand-written' if own else 'reference'} ({args.reference.name}, all splits)", load_golden(args.reference)),
            (f"drafted ({args.drafted.name}), every item with gold", drafted),
            ("drafted, kept by a human reviewer", keep_reviewed(drafted, args.drafted, by="human"))]
    sets = [(name, select_items(items, "all")) for name, items in sets]  # in the order --split all scores them
    cells: dict[str, list[str]] = {name: [] for name, _ in sets}
    means: dict[str, dict[str, float]] = {name: {} for name, _ in sets}
    scored: dict[str, int] = {}
    for config in CONFIGS:  # one retriever per configuration, every set scored with it
        retriever, settings = retriever_for(config, args.index_dir)
        k = settings.top_k
        for name, items in sets:
            report = retrieval_report(items, retriever, k=k, mode=settings.mode)
            mean, ci = report[f"recall@{k}"], report["ci"][f"recall@{k}"]
            scored[name], means[name][config] = report["scored"], mean
            cells[name].append(f"{mean:.3f} [{ci['lo']:.2f}, {ci['hi']:.2f}]")
            print(f"{name}: {config} {mean:.3f}", file=sys.stderr, flush=True)
    lines = [f"# A drafted golden set against {'the hand-written one' if own else args.reference.name}: "
             "configurations, first retrieval", "",
             f"Command: `python benchmarks/drafted_configs.py --drafted {args.drafted}"
             + ("" if own else f" --reference {args.reference.name}")
             + (" --index-dir INDEX" if args.index_dir else "") + "`; "
             "Recall@4 [95% bootstrap interval], items with gold only.", "",
             "| set | n | " + " | ".join(CONFIGS) + f" | order | agrees with the {'hand-written' if own else 'reference'} order |",
             "| --- | --- |" + " --- |" * len(CONFIGS) + " --- | --- |"]
    first = None
    for name, _ in sets:
        order = ranked(means[name])
        first = first or order
        lines.append(f"| {name} | {scored[name]} | " + " | ".join(cells[name]) + f" | {order} | {agrees(order, first)} |")
    emit(lines + ["", "The order compares means only; where neighbouring intervals overlap, it is not a finding on its own."],
         args.out)


if __name__ == "__main__":
    main()
