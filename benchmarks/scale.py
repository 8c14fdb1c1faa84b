"""How cost grows: index size, build time and search latency with the corpus; eval throughput with Ray workers.

    python benchmarks/scale.py --out benchmarks/results/scale.md                  # both parts
    python benchmarks/scale.py --sizes 1000,10000 --skip-eval                      # the index part only
    python benchmarks/scale.py --skip-index --workers 1,2,4 --delay 0.5            # the eval part only

**Index.** Synthetic corpora of N chunks are the built-in corpus's chunks repeated (each copy with its own id and
one extra word, so bm25 sees distinct documents). Their vectors are the real MiniLM vectors of the originals plus
Gaussian noise (sigma ``--noise``), renormalised: embedding N chunks here would take hours, so the embedding rate
is measured once on ``--embed-sample`` chunks and the embedding time of N chunks is *extrapolated* from it (said
so in the table). Everything else is measured on the real ``rag.index.build_index`` (its ``embedder`` hook hands
it the vectors): build time, size on disk, and per-query latency over the golden questions (p50/p95) for bm25,
dense (FAISS, the query vector given) and hybrid (bm25 + FAISS + RRF, the query vector given); the query
embedding is timed on its own. Above ``rag.index.HNSW_THRESHOLD`` chunks the index is HNSW; there the same corpus
is also built flat, and HNSW's recall@10 against flat is measured on the golden questions.

**Eval.** ``rag eval``'s Ray runner over the golden test items, every role a Groq model served by a loopback
OpenAI-compatible server that answers after a fixed ``--delay`` (an LM-bound workload like Groq's), with 1, 2
and 4 workers on this machine; then 4 workers under a shared rate limit that caps them. The limiter's window is
shrunk to ``--window`` seconds so a per-minute cap shows within a short run.

Timings depend on the machine and its load (this project's 2-core machine is shared); compare rows of one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.chunking import Chunk, chunk_documents  # noqa: E402
from rag.config import Settings  # noqa: E402
from rag.corpus import load_builtin_topics  # noqa: E402
from rag.golden import load_golden  # noqa: E402
from rag.index import HNSW_THRESHOLD, build_index, index_text  # noqa: E402

GOLDEN = ROOT / "golden" / "python_ref.jsonl"
MAX_QUERIES = 157  # golden questions timed per mode (the whole set)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def synthetic(base: list[Chunk], vectors: np.ndarray, n: int, noise: float, seed: int = 0):
    """``n`` chunks repeating ``base`` (distinct ids, one extra word each) and their noisy unit vectors."""
    rng = np.random.default_rng(seed)
    rows = np.arange(n) % len(base)
    chunks = [Chunk(id=f"{base[r].id}~{i}", text=f"{base[r].text} copy{i // len(base)}", title=base[r].title,
                    source=base[r].source) for i, r in enumerate(rows)]
    vecs = vectors[rows] + rng.normal(0, noise, size=(n, vectors.shape[1])).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs[: len(base)] = vectors[: min(n, len(base))]  # the first copy is the real corpus
    return chunks, np.ascontiguousarray(vecs, dtype=np.float32)


def timed_searches(index, questions: list[str], qvecs: dict[str, np.ndarray]) -> dict[str, list[float]]:
    """ms per query: bm25, dense and hybrid through the Retriever, the query vector looked up (not embedded)."""
    import rag.embeddings as emb
    from rag.retrieve import Retriever

    real = emb.embed
    emb.embed = lambda texts, *a, **k: np.stack([qvecs[t] for t in texts])  # query embedding timed separately
    if hasattr(index, "embed_query"):  # the query path of an index that owns its query encoder
        index.embed_query = lambda text: qvecs[text]
    try:
        out = {}
        for mode in ("bm25", "dense", "hybrid"):
            retriever, times = Retriever(index, mode=mode, top_k=10), []
            retriever.search(questions[0])  # warm
            for q in questions:
                t = time.perf_counter()
                retriever.search(q)
                times.append((time.perf_counter() - t) * 1000)
            out[mode] = times
        return out
    finally:
        emb.embed = real


def dense_top(index, qvecs: dict[str, np.ndarray], questions: list[str], k: int = 10) -> list[list[int]]:
    return [[row for row, _ in index.dense_search(qvecs[q], k)] for q in questions]


def index_part(sizes: list[int], noise: float, embed_sample: int, work: Path, vectors_from: Path | None) -> list[str]:
    from rag.embeddings import embed

    settings = Settings(index_dir=work / "idx")
    if vectors_from is not None:  # an index of the built-in corpus already built: its chunks, vectors and timing
        from rag.index import Index

        built = Index.load(vectors_from, Settings(index_dir=vectors_from))
        base, vectors = list(built.chunks), np.asarray(built.embeddings, dtype=np.float32)
        sample_s = float(built.manifest["timings"]["embed_seconds"])
        per_chunk = sample_s / len(base)
        origin = f"vectors and embedding time from the build of {vectors_from} (not re-embedded in this run)"
    else:
        base = chunk_documents(load_builtin_topics(), settings.chunk_size, settings.chunk_overlap)
        texts = [index_text(c) for c in base]
        print(f"embedding the {len(base)} built-in chunks once (real vectors to repeat)", file=sys.stderr)
        t = time.perf_counter()
        vectors = embed(texts, "default")
        sample_s = time.perf_counter() - t
        per_chunk = sample_s / len(texts)
        origin = "embedded in this run"
        if embed_sample and embed_sample < len(texts):
            t = time.perf_counter()
            embed(texts[:embed_sample], "default")
            per_chunk = (time.perf_counter() - t) / embed_sample
    questions = [it.question for it in load_golden(GOLDEN)][:MAX_QUERIES]
    probe = build_index(base, work / "probe", settings.replace(index_dir=work / "probe"), show_progress=False,
                        source="synthetic", embedder=lambda _texts: vectors)
    encode = getattr(probe, "embed_query", None) or (lambda text: embed([text], "default")[0])  # what search uses
    encode("warm up")
    qtimes, qvecs = [], {}
    for q in questions:
        text = " ".join(q.split())
        t = time.perf_counter()
        qvecs[text] = np.asarray(encode(text), dtype=np.float32)
        qtimes.append((time.perf_counter() - t) * 1000)
    questions = list(qvecs)
    lines = [f"Built-in corpus: {len(base)} chunks, embedded in {sample_s:.1f} s ({origin}; "
             f"{1 / per_chunk:.1f} chunks/s; the embedding column below is that rate times N, extrapolated).",
             f"Query embedding ({'the index query encoder' if hasattr(probe, 'embed_query') else 'sentence-transformers'}"
             f", MiniLM, one query, {len(questions)} golden questions): p50 {pct(qtimes, 50):.1f} ms, "
             f"p95 {pct(qtimes, 95):.1f} ms; not included in the dense and hybrid columns.", "",
             "| chunks | FAISS | embedding (extrapolated) | build (bm25 + FAISS + files) | size on disk | "
             "bm25 p50 / p95 ms | dense p50 / p95 ms | hybrid p50 / p95 ms | HNSW recall@10 vs flat |",
             "| ---: | --- | ---: | ---: | ---: | --- | --- | --- | --- |"]
    for n in sizes:
        chunks, vecs = synthetic(base, vectors, n, noise)
        kinds = [("auto", HNSW_THRESHOLD)] + ([("flat", 10**12)] if n > HNSW_THRESHOLD else [])
        tops = {}
        for kind, threshold in kinds:
            folder = work / f"idx-{n}-{kind}"
            print(f"building {n} chunks ({kind})", file=sys.stderr)
            t = time.perf_counter()
            index = build_index(chunks, folder, settings.replace(index_dir=folder), show_progress=False,
                                source="synthetic", hnsw_threshold=threshold, embedder=lambda _texts: vecs)
            build_s = time.perf_counter() - t
            lat = timed_searches(index, questions, qvecs)
            tops[kind] = dense_top(index, qvecs, questions)
            faiss_type = index.manifest["faiss"]["type"].replace("Index", "")
            recall = ""
            if kind == "flat":
                hits = [len(set(a) & set(b)) / len(b) for a, b in zip(tops["auto"], tops["flat"]) if b]
                recall = f"{statistics.mean(hits):.3f}"
            lines.append(f"| {n:,} | {faiss_type} | {per_chunk * n:,.0f} s | {build_s:.1f} s | "
                         f"{du(folder) / 1e6:,.1f} MB | "
                         + " | ".join(f"{pct(lat[m], 50):.2f} / {pct(lat[m], 95):.2f}" for m in ("bm25", "dense", "hybrid"))
                         + f" | {recall} |")
            print(lines[-1], file=sys.stderr)
            del index
        if n > HNSW_THRESHOLD:  # fill HNSW's row with the recall measured on the flat build
            row = next(i for i, line in enumerate(lines) if line.startswith(f"| {n:,} | HNSW"))
            hits = [len(set(a) & set(b)) / len(b) for a, b in zip(tops["auto"], tops["flat"]) if b]
            lines[row] = lines[row][: lines[row].rstrip(" |").rfind("|") + 1] + f" {statistics.mean(hits):.3f} |"
            lines[-1] = lines[-1][: lines[-1].rstrip(" |").rfind("|") + 1] + " (exact) |"
    return lines


def eval_part(workers: list[int], delay: float, items_n: int, rpm: int, window: float, work: Path) -> list[str]:
    import ray

    from rag.distributed.cluster import connect
    from rag.distributed.eval import RayRunner, SettingsProgram
    from rag.distributed.limiter import limiter_actor
    from rag.evaluate import run_eval
    from rag.eval_cli import select_items
    from tests.delay_server import DelayServer

    server = DelayServer(delay=delay)
    os.environ.update({"GROQ_API_KEY": "loopback-not-a-key", "GROQ_BASE_URL": server.url,
                       "SIEVE_HOME": str(work / "home")})
    index_dir = work / "eval-index"
    base = Settings(index_dir=index_dir)
    chunks = chunk_documents(load_builtin_topics(["if", "while", "for", "try", "with", "def", "class", "lambda"]),
                             base.chunk_size, base.chunk_overlap)
    build_index(chunks, index_dir, base, show_progress=False)
    model = "groq/openai/gpt-oss-20b"
    items = select_items(load_golden(GOLDEN), "test")[:items_n]
    connect("local", num_cpus=max(workers))
    lines = [f"{len(items)} golden test items; every role `{model}` on a loopback server answering after {delay:g} s; "
             "bm25 retrieval (no embedding model in the workers); LM cache off. Items/s counts from the moment the "
             "workers had built their programs (their start-up is the next column).", "",
             "| workers | shared limit | LM calls | run s | items/s | speed-up vs 1 worker | worker start-up s |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    one = None
    plans = [(w, None) for w in workers] + [(max(workers), rpm)]
    for count, limit in plans:
        settings = base.replace(mode="bm25", cache=False, grader_model=model, rewriter_model=model,
                                answerer_model=model, judge_model=model, groq_base_url=server.url,
                                rate_limits=f"*={limit or 100000}/100000000")
        limiter = limiter_actor(window=window) if limit else limiter_actor(window=60.0)
        runner = RayRunner(SettingsProgram(settings, use_artifact=False), workers=count, limiter=limiter,
                           show_progress=True)
        server.reset()
        from rag.agent import Sieve

        agent = Sieve(None, max_rewrites=settings.max_rewrites, top_k=settings.top_k)
        run_eval(items, agent, None, work / f"run-{count}-{limit}", "full", k=settings.top_k, runner=runner,
                 show_progress=False)
        ray.kill(limiter)
        rate = len(items) / runner.timing["run_s"]
        one = one or rate
        shared = f"{limit} requests / {window:g} s" if limit else "none"
        lines.append(f"| {count} | {shared} | {len(server.arrivals)} | {runner.timing['run_s']:.1f} | {rate:.2f} | "
                     f"{rate / one:.2f}x | {runner.timing['start_s']:.1f} |")
        print(lines[-1], file=sys.stderr)
    ray.shutdown()
    server.stop()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated chunk counts")
    parser.add_argument("--noise", type=float, default=0.02, help="sigma of the noise added to repeated vectors")
    parser.add_argument("--embed-sample", type=int, default=256, help="chunks whose embedding rate is measured")
    parser.add_argument("--vectors-from", type=Path, help="an index of the built-in corpus: reuse its vectors and "
                        "its measured embedding time instead of embedding again")
    parser.add_argument("--workers", default="1,2,4", help="Ray worker counts for the eval part")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the loopback server takes per call")
    parser.add_argument("--items", type=int, default=16, help="golden test items per eval run")
    parser.add_argument("--rpm", type=int, default=12, help="requests per window of the capped run")
    parser.add_argument("--window", type=float, default=10.0, help="the capped run's limiter window (s)")
    parser.add_argument("--skip-index", action="store_true")
    parser.add_argument("--skip-eval", action="store_true")
    parser.add_argument("--out", type=Path, help="write the Markdown here (else stdout)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="sieve-scale-") as tmp:
        work = Path(tmp)
        parts = [f"# How cost grows\n\n`python benchmarks/scale.py {' '.join(sys.argv[1:])}` on {os.cpu_count()} "
                 "cores while other jobs shared the machine: absolute times are pessimistic; compare rows.\n"]
        if not args.skip_index:
            parts += ["## Index size, build and search latency", "",
                      *index_part([int(s) for s in args.sizes.split(",")], args.noise, args.embed_sample, work,
                                 args.vectors_from), ""]
        if not args.skip_eval:
            parts += ["## Eval throughput against Ray workers", "",
                      *eval_part([int(w) for w in args.workers.split(",")], args.delay, args.items, args.rpm,
                                 args.window, work), ""]
    text = "\n".join(parts)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        print(text)


if __name__ == "__main__":
    main()
