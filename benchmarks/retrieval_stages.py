"""Query stages, each alone and together, on three corpora: what each adds to the first retrieval, and what it costs.

    python benchmarks/retrieval_stages.py --out benchmarks/results/retrieval_stages.md
    python benchmarks/retrieval_stages.py --only polygraph --variants hybrid,hyde,rerank --n-queries 3

Per corpus, one table: the plain hybrid retrieval, then each LM stage alone and in pairs: ``expand``
(``--n-queries`` rephrasings by the Expander signature), ``hyde`` (a hypothetical passage searched by embedding),
``rerank`` (the LM reranker's one listwise call, fused with the first stage's order) and ``route`` (the category
pre-filter; only Aegis has categories), on the embedded model by default (``--model``). Every figure has its 95%
interval and n; each stage is compared with plain hybrid on the same items (paired: sign-flip p for means,
McNemar for shares). LM calls, seconds and tokens per question are measured; the Groq cost is estimated from
those tokens at ``rag.usage.pricing``'s price of the production rewriter model.

* **polygraph** (``../shared/benchmarks/polygraph``): the dev half's 25 items with gold; Recall@4, MRR@4, Recall@8.
* **aegis**: the 13 hard and held-out questions with needles (needles found@8, questions with every needle@8), and
  the 27 single-fact questions (their source document among the top 8).
* **builtin**: the golden set's ``--splits`` (default train,dev: test is for reporting, ``--splits test`` once).

Recall counts a hit's left-out duplicates as retrieved, as ``rag eval --retrieval-only`` does. The LM's outputs go
to the DSPy cache (``SIEVE_HOME``), so a rerun costs nothing and an interrupted run resumes; what each call cost
when the model ran it is kept in ``stage_costs.jsonl`` beside the indexes, so a cached rerun still reports it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.retrieval import NEEDLE_SWAP, aegis_items  # noqa: E402
from benchmarks.tables import emit  # noqa: E402
from rag.config import Settings, load_settings  # noqa: E402
from rag.eval.golden import GoldenItem, gold_chunk_ids, load_golden  # noqa: E402
from rag.eval.metrics import hits_recall, mrr_at_k, needle_recall, with_duplicates  # noqa: E402
from rag.paths import golden_path  # noqa: E402
from rag.retrieval.categories import CategoryRouter  # noqa: E402
from rag.retrieval.expansion import Expansion, QueryExpander  # noqa: E402
from rag.retrieval.rerank import LMReranker  # noqa: E402
from rag.retrieval.retriever import Retriever  # noqa: E402
from rag.stats.intervals import compare_paired, mean_interval, wilson  # noqa: E402

VARIANTS = {"hybrid": (), "expand": ("expand",), "hyde": ("hyde",), "expand+hyde": ("expand", "hyde"),
            "rerank": ("rerank",), "hyde+rerank": ("hyde", "rerank"), "route": ("route",), "hyde+route": ("hyde", "route")}


@dataclass
class Corpus:
    name: str
    retriever: Retriever
    items: list[GoldenItem]
    metrics: dict[str, Callable[[GoldenItem, list[Any]], float | None]]
    shares: set[str] = field(default_factory=set)  # metrics that are 0/1 per item (Wilson, McNemar)
    note: str = ""


def _ids(hits: list[Any]) -> list[str]:
    return [h.chunk_id for h in hits]


def _gold_metrics(chunks: list[Any]) -> dict[str, Callable]:
    def gold(item, hits):
        return with_duplicates(gold_chunk_ids(item, chunks), hits)

    return {
        # as rag eval --retrieval-only scores it: a hit brings its left-out duplicates (rag.eval.metrics.hits_recall)
        "Recall@4": lambda i, h: hits_recall(h[:4], gold(i, h[:4])) if gold(i, h) else None,
        "MRR@4": lambda i, h: mrr_at_k(_ids(h), gold(i, h[:4]), 4) if gold(i, h) else None,
        "Recall@8": lambda i, h: hits_recall(h[:8], gold(i, h[:8])) if gold(i, h) else None,
    }


def polygraph(shared: Path, work: Path, settings: Settings) -> Corpus:
    from rag.index.build import build_index
    from rag.ingest.chunking import load_chunks_jsonl

    data = shared / "polygraph"
    s = settings.replace(index_dir=work / "polygraph")
    index = _index_once(s, lambda: build_index(load_chunks_jsonl(data / "chunks.jsonl"), s.index_dir, s, show_progress=False,
                                               source=f"jsonl:{data / 'chunks.jsonl'}"))
    items = [i for i in load_golden(data / "golden_dev.jsonl") if i.relevant_chunk_ids]
    return Corpus("polygraph dev half (items with gold)", _retriever(index, settings), items, _gold_metrics(index.chunks))


def aegis(shared: Path, work: Path, settings: Settings) -> list[Corpus]:
    from rag.index.build import build_index
    from rag.ingest.chunking import chunk_documents
    from rag.ingest.corpus import load_folder

    s = settings.replace(index_dir=work / "aegis")

    def build():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            docs = load_folder(shared / "aegis" / "docs", show_progress=False)
        return build_index(chunk_documents(docs, s.chunk_size, s.chunk_overlap), s.index_dir, s, show_progress=False,
                           source=f"folder:{shared / 'aegis' / 'docs'}")

    index = _index_once(s, build)
    retriever = _retriever(index, settings)
    needles = Corpus("aegis hard + held-out (questions with needles)", retriever, aegis_items(shared), {
        "needles@8": lambda i, h: needle_recall([x.text for x in h], i.evidence, 8),
        "all needles@8": lambda i, h: float(needle_recall([x.text for x in h], i.evidence, 8) == 1.0),
    }, shares={"all needles@8"}, note=f"needle swap as the original measured it: {NEEDLE_SWAP}")
    facts = []
    for rec in json.loads((shared / "aegis" / "questions" / "ground_truth.json").read_text(encoding="utf-8")):
        facts.append(GoldenItem(f"gt{len(facts)}", "answerable", rec["question"], rec["ground_truth"], False, [], [],
                                None, {"source_doc": rec["source_doc"]}))
    single = Corpus("aegis single-fact questions", retriever, facts, {
        "source doc@4": lambda i, h: float(any(x.source.endswith(i.meta["source_doc"]) for x in h[:4])),
        "source doc@8": lambda i, h: float(any(x.source.endswith(i.meta["source_doc"]) for x in h[:8])),
    }, shares={"source doc@4", "source doc@8"})
    return [needles, single]


def builtin(work: Path, settings: Settings, splits: list[str]) -> Corpus:
    from rag.index.build import build_index
    from rag.ingest.chunking import chunk_documents
    from rag.ingest.corpus import load_builtin_topics

    s = settings.replace(index_dir=work / "builtin")
    index = _index_once(s, lambda: build_index(chunk_documents(load_builtin_topics(), s.chunk_size, s.chunk_overlap),
                                               s.index_dir, s, show_progress=False))
    items = [i for i in load_golden(golden_path()) if i.split in splits and gold_chunk_ids(i, index.chunks)]
    return Corpus(f"built-in golden set, {'+'.join(splits)} (items with gold)", _retriever(index, settings), items,
                  _gold_metrics(index.chunks))


def _retriever(index: Any, settings: Settings) -> Retriever:
    """The first retrieval as the settings configure it (``--set``), 8 hits deep; the reranker is set per variant."""
    return Retriever(index, mode=settings.mode, top_k=8, candidates=settings.candidates, rrf_k=settings.rrf_k,
                     weights={"dense": settings.dense_weight},
                     dedupe=settings.dedupe, expansion_weight=settings.expansion_weight)


def _index_once(settings: Settings, build: Callable[[], Any]) -> Any:
    from rag.index.store import Index

    try:
        return Index.load(settings.index_dir, settings)
    except Exception:  # noqa: BLE001 - not built yet (or stale): build it
        return build()


@dataclass
class Cost:
    calls: int = 0
    cached: int = 0  # calls the DSPy cache answered: their seconds and tokens come from the ledger
    seconds: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    unmeasured: int = 0  # cached calls the ledger has no record of (made before it existed)

    def add(self, other: "Cost") -> "Cost":
        return Cost(*(a + b for a, b in zip(vars(self).values(), vars(other).values())))


class Ledger:
    """What each LM call cost when the model ran it (seconds, tokens), kept beside the indexes, so a rerun that the
    DSPy cache answers still reports the model's cost: a cached call's own latency and usage are nothing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, dict] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.rows[row["key"]] = row

    def charge(self, cost: Cost, key: str, stats: Any) -> None:
        cost.calls += 1
        if not stats.cached:
            row = {"key": key, "seconds": stats.latency_ms / 1000, "tokens_in": stats.tokens_in,
                   "tokens_out": stats.tokens_out}
            self.rows[key] = row
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
        else:
            cost.cached += 1
            row = self.rows.get(key)
            if row is None:
                cost.unmeasured += 1
                return
        cost.seconds += row["seconds"]
        cost.tokens_in += row["tokens_in"]
        cost.tokens_out += row["tokens_out"]


def expansions(corpus: Corpus, expander: QueryExpander, stages: set[str], ledger: Ledger,
               progress: bool) -> tuple[dict, dict]:
    """question -> Expansion with every requested stage, and stage -> Cost (the model's own seconds)."""
    out, cost = {}, {s: Cost() for s in ("expand", "hyde")}
    for n, item in enumerate(corpus.items, 1):
        exp = QueryExpander(expander.n_queries if "expand" in stages else 0, "hyde" in stages, lm=expander.lm)(item.question)
        out[item.id] = exp
        for stage, stats in exp.calls.items():
            ledger.charge(cost[stage], f"{corpus.name}|{stage}|{expander.n_queries}|{item.id}", stats)
        if progress:
            print(f"\r{corpus.name}: expanding {n}/{len(corpus.items)}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return out, cost


def table(corpus: Corpus, expanded: dict[str, Expansion], cost: dict[str, Cost], variants: list[str],
          price: Callable[[int, int], float], reranker: LMReranker, router: CategoryRouter, ledger: Ledger,
          progress: bool) -> list[str]:
    scores: dict[str, dict[str, list[float]]] = {}
    costs: dict[str, dict[str, Cost]] = {}  # variant -> stage -> its calls' cost
    for variant in variants:
        wanted = VARIANTS[variant]
        per = {m: [] for m in corpus.metrics}
        corpus.retriever.reranker = reranker if "rerank" in wanted else None
        corpus.retriever.router = router if "route" in wanted else None
        routed = Cost()
        reranked = Cost()
        for n, item in enumerate(corpus.items, 1):
            full = expanded.get(item.id) or Expansion()
            exp = Expansion(queries=full.queries if "expand" in wanted else [],
                            passage=full.passage if "hyde" in wanted else None)
            found = corpus.retriever.retrieve(item.question, k=8, expansion=exp)
            hits = found.hits
            if found.reranking is not None and "rerank" in found.reranking.calls:
                ledger.charge(reranked, f"{corpus.name}|{variant}|d{reranker.depth}c{reranker.passage_chars}|{item.id}",
                              found.reranking.calls["rerank"])
            if found.routing is not None and "route" in found.routing.calls:
                ledger.charge(routed, f"{corpus.name}|route|{item.id}", found.routing.calls["route"])
            if progress and {"rerank", "route"} & set(wanted):
                print(f"\r{corpus.name}: {variant} {n}/{len(corpus.items)}", end="", file=sys.stderr, flush=True)
            for m, fn in corpus.metrics.items():
                v = fn(item, hits)
                per[m].append(float("nan") if v is None else v)
        if progress and {"rerank", "route"} & set(wanted):
            print(file=sys.stderr)
        costs[variant] = {**{st: cost[st] for st in wanted if st in cost}, **({"rerank": reranked} if "rerank" in wanted else {}),
                          **({"route": routed} if "route" in wanted else {})}
        scores[variant] = per
    corpus.retriever.reranker = corpus.retriever.router = None
    n = len(corpus.items)
    head = ["| configuration | " + " | ".join(corpus.metrics) + " | LM calls / q | model s / q | tokens / q | Groq $ / 1k q |",
            "| --- |" + " --- |" * (len(corpus.metrics) + 4)]
    rows = []
    for variant in variants:
        cells = []
        for m in corpus.metrics:
            values = [v for v in scores[variant][m] if v == v]
            mean = sum(values) / len(values) if values else float("nan")
            lo_hi = wilson(int(sum(values)), len(values)) if m in corpus.shares else mean_interval(values)
            cell = f"{mean:.3f} [{lo_hi[0]:.2f}, {lo_hi[1]:.2f}]" if lo_hi else f"{mean:.3f}"
            if variant != "hybrid":
                pairs = [(a, b) for a, b in zip(scores["hybrid"][m], scores[variant][m]) if a == a and b == b]
                cmp = compare_paired([a for a, _ in pairs], [b for _, b in pairs], "hybrid", variant)
                cell += f" ({cmp.diff:+.3f}, p={cmp.p:.2f})"
            cells.append(cell)
        calls = secs = tin = tout = 0.0
        for c in costs[variant].values():  # per stage: the mean of its measured calls, times its calls per question
            per_q, measured = c.calls / n, max(1, c.calls - c.unmeasured)
            calls += per_q
            secs, tin, tout = (secs + per_q * c.seconds / measured, tin + per_q * c.tokens_in / measured,
                               tout + per_q * c.tokens_out / measured)
        rows.append(f"| {variant} | " + " | ".join(cells) + f" | {calls:.0f} | {secs:.1f} | {tin:.0f}+{tout:.0f} | "
                    f"{1000 * price(int(tin), int(tout)):.3f} |")
    used = len([i for i in corpus.items])
    notes = [f"n = {used} questions; intervals: bootstrap of the mean (Wilson for shares); in brackets after a stage: "
             "its paired difference from hybrid and p. Seconds and tokens per question are the model's when it ran "
             "each call (the ledger), also for calls the DSPy cache answered this time."]
    gaps = {f"{v}/{st}": c.unmeasured for v, per in costs.items() for st, c in per.items() if c.unmeasured}
    if gaps:
        notes.append(f"cached calls with no ledger record (made before the ledger), left out of seconds and tokens: {gaps}")
    if corpus.note:
        notes.append(corpus.note)
    return [f"## {corpus.name}", "", *notes, "", *head, *rows, ""]


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU not recorded"


def groq_price(settings: Settings) -> Callable[[int, int], float]:
    from rag.lm.configure import GROQ_DEFAULTS
    from rag.usage.pricing import cost_usd

    model = GROQ_DEFAULTS["rewriter"]
    return lambda tin, tout: cost_usd(model, tin, tout) or 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    parser.add_argument("--work", type=Path, default=None, help="index folder (default: SIEVE_HOME/bench-stages)")
    parser.add_argument("--only", default="polygraph,aegis,builtin",
                        help="comma-separated: polygraph, aegis (needles), aegis-facts (single-fact questions), builtin")
    parser.add_argument("--splits", default="train,dev", help="built-in golden splits (test: reporting only)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"of {', '.join(VARIANTS)}")
    parser.add_argument("--n-queries", type=int, default=3)
    parser.add_argument("--rerank-depth", type=int, default=None, help="candidates the LM reranker reads (default: the setting)")
    parser.add_argument("--rerank-chars", type=int, default=None, help="characters of each candidate it reads")
    parser.add_argument("--model", default=None, help="model spec for the stages (default: the rewriter's)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for this run (expansion_weight, rerank_weight, rrf_k, ...); repeatable")
    parser.add_argument("-q", "--quiet", action="store_true")
    args = parser.parse_args(argv)

    from rag.lm.configure import configure_dspy, lms_for_roles
    from rag.paths import sieve_home

    overrides = dict(kv.split("=", 1) for kv in args.sets)
    settings = load_settings({**overrides, **({"rewriter_model": args.model} if args.model else {})})
    configure_dspy(settings)
    lm = lms_for_roles(settings)["rewriter"]
    work = args.work or sieve_home() / "bench-stages"
    variants = [v for v in args.variants.split(",") if v]
    stages = {s for v in variants for s in VARIANTS[v]}
    corpora: list[Corpus] = []
    only = set(args.only.split(","))
    if "polygraph" in only:
        corpora.append(polygraph(args.shared, work, settings))
    if only & {"aegis", "aegis-facts"}:
        needles, facts = aegis(args.shared, work, settings)
        corpora += [c for name, c in (("aegis", needles), ("aegis-facts", facts)) if name in only]
    if "builtin" in only:
        corpora.append(builtin(work, settings, args.splits.split(",")))
    started = time.time()
    lines = ["# Query stages on the first retrieval", "",
             f"Generated by `python benchmarks/retrieval_stages.py {' '.join(argv if argv is not None else sys.argv[1:])}`; "
             f"stages on {getattr(lm, 'model', lm)}, {args.n_queries} rephrasings; RRF k={settings.rrf_k}, "
             f"{settings.candidates} candidates per list, expansion lists weigh {settings.expansion_weight}; the LM "
             f"reranker reads {args.rerank_depth or settings.rerank_depth} candidates "
             f"of {args.rerank_chars or settings.rerank_chars} characters, its list weighs {settings.rerank_weight}.", ""]
    price = groq_price(settings)
    ledger = Ledger(work / "stage_costs.jsonl")
    reranker = LMReranker(args.rerank_depth or settings.rerank_depth, args.rerank_chars or settings.rerank_chars,
                          settings.rerank_weight, lm=lm)
    for corpus in corpora:
        expanded, cost = expansions(corpus, QueryExpander(args.n_queries, True, lm=lm), stages, ledger, not args.quiet)
        lines += table(corpus, expanded, cost, variants, price, reranker, CategoryRouter(lm=lm), ledger, not args.quiet)
    lines.append(f"Wall time {time.time() - started:.0f} s.")
    lines += ["", f"Machine: {_cpu()}, {os.cpu_count()} CPUs, 1-min load average at the end {os.getloadavg()[0]:.1f} "
              "(the model's seconds are from the run that made each call; other work running inflates them)."]
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
