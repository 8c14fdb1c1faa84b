"""Follow-up questions: what the first retrieval finds for the follow-up as typed, for the condenser's standalone
question (rag.agent.conversation, on the rewriter's model), and for the hand-written standalone question.

    python benchmarks/followups.py --out benchmarks/results/followups.md
    python benchmarks/followups.py --splits train,dev          # the splits to choose on

Items: ``golden/python_ref_followups.jsonl`` (each a one-turn conversation, a follow-up that refers back to it,
and the standalone question it means, taken from the built-in golden set with that item's gold evidence).
Recall@4 and MRR@4 of the first retrieval (hybrid, the index of the settings), paired against the follow-up as
typed (sign-flip p); seconds per condenser call on the model the settings give the rewriter role (the embedded
Qwen2.5-Coder-1.5B offline). Cache off, so the seconds are the model's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--splits", default="train,dev,test")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    from rag.agent.conversation import Condenser, context_query
    from rag.agent.trace import Trace
    from rag.config import load_settings
    from rag.eval.golden import gold_chunk_ids, load_golden
    from rag.eval.metrics import hits_recall, mrr_at_k, with_duplicates
    from rag.lm.configure import configure_dspy, lms_for_roles
    from rag.paths import golden_path
    from rag.retrieval.expansion import Expansion
    from rag.retrieval.retriever import Retriever
    from rag.stats.intervals import compare_paired, mean_interval
    from rag.usage.metering import metered_call

    settings = load_settings({"cache": False})
    configure_dspy(settings)
    lm = lms_for_roles(settings)["rewriter"]
    retriever = Retriever.from_settings(settings)
    chunks = retriever.index.chunks
    items = [i for i in load_golden(golden_path().with_name("python_ref_followups.jsonl"))
             if i.split in args.splits.split(",")]
    condenser = Condenser(settings.history_turns, settings.history_chars)
    k = settings.top_k
    variants = ("as typed", "condensed", "condensed + context list", "hand-written")
    scores: dict[str, dict[str, list[float]]] = {v: {"Recall": [], "MRR": []} for v in variants}
    seconds, examples = [], []
    for n, item in enumerate(items, 1):
        trace = Trace(question=item.question)
        start = time.perf_counter()
        condensed = condenser.standalone(item.question, item.history, trace,
                                         lambda role, predictor, ids, **inputs: metered_call(predictor, lm, **inputs))
        seconds.append(time.perf_counter() - start)
        context = Expansion(queries=[context_query(item.question, item.history)])
        for variant, query, extra in (("as typed", item.question, None), ("condensed", condensed, None),
                                      ("condensed + context list", condensed, context),
                                      ("hand-written", item.meta["standalone"], None)):
            hits = retriever.retrieve(query, k=k, expansion=extra).hits
            gold = with_duplicates(gold_chunk_ids(item, chunks), hits)
            scores[variant]["Recall"].append(hits_recall(hits, gold))
            scores[variant]["MRR"].append(mrr_at_k([h.chunk_id for h in hits], gold, k))
        examples.append((item.question, condensed))
        print(f"\r{n}/{len(items)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    lines = ["# Follow-up questions: the condenser's standalone question, searched", "",
             f"`python benchmarks/followups.py {' '.join(argv if argv is not None else sys.argv[1:])}`; "
             f"{len(items)} items of `golden/python_ref_followups.jsonl` (splits {args.splits}); {getattr(lm, 'model', lm)}; "
             f"first retrieval, {settings.mode}, k = {k}; in brackets: paired difference from the follow-up as typed, p.", "",
             f"| searched | Recall@{k} | MRR@{k} |", "| --- | --- | --- |"]
    for variant, per in scores.items():
        cells = []
        for metric, values in per.items():
            lo, hi = mean_interval(values) or (float("nan"), float("nan"))
            cell = f"{sum(values) / len(values):.3f} [{lo:.2f}, {hi:.2f}]"
            if variant != "as typed":
                cmp = compare_paired(scores["as typed"][metric], values, "as typed", variant)
                cell += f" ({cmp.diff:+.3f}, p={cmp.p:.2f})"
            cells.append(cell)
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    seconds.sort()
    lines += ["", f"Condenser: {sum(seconds) / len(seconds):.1f} s per call on average, median "
              f"{seconds[len(seconds) // 2]:.1f} s, max {seconds[-1]:.1f} s.", "", "| follow-up | condensed |", "| --- | --- |"]
    lines += [f"| {q} | {c} |" for q, c in examples]
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
