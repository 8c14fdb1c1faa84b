"""Distinct passages (``dedupe``) and k: what the agent's context holds and costs, on three corpora.

Run: python benchmarks/distinct_passages.py [--shared ../shared/benchmarks] [--work DIR] [--out FILE]

For each corpus and each configuration (``dedupe`` off/on, k = 4 and 3), hybrid retrieval as the agent runs it:
hit@k, all needles@k, MRR@k and Recall@k (each with its 95% interval), how many items gain or lose a hit against
the old default (dedupe off, k = 4) with the exact McNemar p, how many contexts show a passage twice, and the
passages' prompt tokens per context (the embedded model's tokenizer, over the agent's formatted context), which is
what a grade call reads before it writes. Corpora:

* built-in: golden/python_ref.jsonl over the default index (README command (a)); train + dev (the split
  that choices are made on) and test (reported only) apart;
* polygraph dev (explicit gold chunk ids), indexed into ``--work``;
* aegis (needles), its folder chunked and indexed into ``--work``.

No language model runs; re-indexing reuses the embeddings already in ``--work``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402
from rag.agent.context import format_context  # noqa: E402
from rag.config import Settings, load_settings, sieve_home  # noqa: E402
from rag.eval.golden import load_golden  # noqa: E402
from rag.eval.metrics import retrieval_report  # noqa: E402
from rag.retrieval.retriever import Retriever, _words  # noqa: E402
from rag.stats.intervals import mcnemar  # noqa: E402

CONFIGS = [("dedupe off, k=4 (old default)", False, 4), ("dedupe on, k=4", True, 4),
           ("dedupe off, k=3", False, 3), ("dedupe on, k=3", True, 3)]


def tokenizer():
    import llama_cpp

    from rag.lm.models import model_path

    settings = load_settings()
    llama = llama_cpp.Llama(model_path=str(model_path(settings.embedded_model)), vocab_only=True, verbose=False)
    return lambda text: len(llama.tokenize(text.encode("utf-8"), add_bos=False))


def cell(report: dict, metric: str) -> str:
    value, ci = report.get(metric), report["ci"].get(metric)
    if value is None:
        return "n/a"
    return f"{value:.3f} [{ci['lo']:.3f}, {ci['hi']:.3f}]" if ci else f"{value:.3f}"


def corpus_rows(name: str, items: list, index, count_tokens) -> list[str]:
    lines = [f"### {name} ({len(items)} items)", "",
             "| configuration | hit@k | all needles@k | MRR@k | Recall@k | hit gained / lost vs old default (McNemar p) "
             "| contexts with a repeat | passage tokens per context (mean) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    base_hits = None
    for label, dedupe, k in CONFIGS:
        retriever = Retriever(index, top_k=k, candidates=Settings().candidates, dedupe=dedupe)
        report = retrieval_report(items, retriever, k=k)
        hits = [row[f"hit@{k}"] == 1.0 for row in report["per_item"]]  # the same scored items in every configuration
        repeats, tokens = 0, []
        for item in items:
            found = retriever.search(item.question, k=k)
            words = [_words(h.text) for h in found]
            repeats += len(set(words)) < len(words)
            tokens.append(count_tokens(format_context(found)))
        if base_hits is None:
            base_hits, change = hits, "-"
        else:
            lost, gained, p = mcnemar(base_hits, hits)
            change = f"+{gained} / -{lost} (p={p:.2f})"
        needles = cell(report, f"all_needles@{k}") if report.get(f"all_needles@{k}") is not None else "n/a"
        lines.append(f"| {label} | {cell(report, f'hit@{k}')} | {needles} | {cell(report, f'mrr@{k}')} | "
                     f"{cell(report, f'recall@{k}')} | {change} | {repeats} of {len(items)} | {statistics.mean(tokens):.0f} |")
        print(f"{name} | {label}: done", file=sys.stderr, flush=True)
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    parser.add_argument("--work", type=Path, default=sieve_home() / "bench-indexes",
                        help="where the polygraph and aegis indexes are built (reused when present)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from rag.index.build import build_index
    from rag.index.store import Index

    count_tokens = tokenizer()
    settings = load_settings()
    builtin = Index.load(settings.index_dir, settings)
    golden = load_golden(ROOT / "golden" / "python_ref.jsonl")
    lines = ["# Distinct passages and k: retrieval quality and context size", "",
             "`python benchmarks/distinct_passages.py` (hybrid retrieval; intervals: Wilson for shares, bootstrap for "
             "means; items without gold or needles are left out of each metric; an item with needles but no chunk holding one has hit "
             "0). Choices are made on the built-in train + dev split and Polygraph dev; the built-in "
             "test split is reported only.", ""]
    lines += corpus_rows("built-in, train + dev", [i for i in golden if i.split in ("train", "dev")], builtin, count_tokens)
    lines += corpus_rows("built-in, test (reported only)", [i for i in golden if i.split == "test"], builtin, count_tokens)
    if (args.shared / "polygraph").is_dir():
        from rag.ingest.chunking import load_chunks_jsonl

        data = args.shared / "polygraph"
        root = args.work / "polygraph"
        index = build_index(load_chunks_jsonl(data / "chunks.jsonl"), root, Settings(index_dir=root),
                            show_progress=True, source=f"jsonl:{data / 'chunks.jsonl'}")
        lines += corpus_rows("polygraph dev", load_golden(data / "golden_dev.jsonl"), index, count_tokens)
    if (args.shared / "aegis").is_dir():
        from benchmarks.retrieval import aegis_items
        from rag.ingest.chunking import chunk_documents
        from rag.ingest.corpus import load_folder

        s = Settings(index_dir=args.work / "aegis")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            docs = load_folder(args.shared / "aegis" / "docs", show_progress=False)
        index = build_index(chunk_documents(docs, s.chunk_size, s.chunk_overlap), s.index_dir, s, show_progress=True,
                            source=f"folder:{args.shared / 'aegis' / 'docs'}")
        lines += corpus_rows("aegis", aegis_items(args.shared), index, count_tokens)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
