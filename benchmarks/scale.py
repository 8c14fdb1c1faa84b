"""How cost grows: index size, build time and search latency with the corpus; eval throughput with Ray workers.

    python benchmarks/scale.py --out benchmarks/results/scale.md                  # both parts
    python benchmarks/scale.py --sizes 1000,10000 --skip-eval                      # the index part only
    python benchmarks/scale.py --skip-index --workers 1,2,4 --delay 0.5            # the eval part only

**Index.** Synthetic corpora of N chunks are the built-in corpus's chunks repeated (each copy with its own id and
one extra word, so bm25 sees distinct documents). Their vectors are the real MiniLM vectors of the originals plus
Gaussian noise (sigma ``--noise``), renormalised: embedding N chunks here would take hours, so the built-in
corpus is embedded once with the encoder ``rag index`` uses (``rag.index.encoder.index_encoder``: ONNX Runtime by
default) and the embedding time of N chunks is *extrapolated* from that rate (said so in the table). Everything
else is measured on the real ``rag.index.build.build_index`` (its ``embedder`` hook hands it the vectors, and the
manifest records the same encoder a real build does): build time, size on disk, and per-query latency over the
golden questions (p50/p95) for bm25, dense (FAISS, the query vector given) and hybrid (bm25 + FAISS + RRF, the
query vector given); the query embedding (``Index.embed_query``, the index's own query encoder) is timed on its
own. Above ``rag.index.build.HNSW_THRESHOLD`` chunks the index is HNSW; there the same corpus is also built flat, and
HNSW's recall@10 against flat is measured on the golden questions. The process's peak RSS after each size is
reported (sizes run in increasing order), to judge whether a larger size would fit.

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

from rag.config import Settings  # noqa: E402
from rag.eval.golden import load_golden  # noqa: E402
from rag.index.build import HNSW_THRESHOLD, build_index  # noqa: E402
from rag.index.store import index_text  # noqa: E402
from rag.ingest.chunking import Chunk, chunk_documents  # noqa: E402
from rag.ingest.corpus import load_builtin_topics  # noqa: E402

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


class GivenVectors:
    """A ``build_index`` embedder that hands back vectors computed beforehand. ``uses_index_encoder``: the build
    makes (loads) the encoder a local build uses and records it in the manifest, so the index's query side is a
    real build's; the vectors are not recomputed."""

    uses_index_encoder = True

    def __init__(self, vectors: np.ndarray):
        self.vectors = vectors

    def __call__(self, texts: list[str], encoder=None, record=None) -> np.ndarray:
        assert len(texts) == len(self.vectors), (len(texts), len(self.vectors))
        return self.vectors


def timed_searches(index, questions: list[str], qvecs: dict[str, np.ndarray]) -> dict[str, list[float]]:
    """ms per query: bm25, dense and hybrid through the Retriever, the query vector looked up (not embedded)."""
    from rag.retrieval.retriever import Retriever

    index.embed_query = lambda text: qvecs[text]  # query embedding is timed separately
    out = {}
    for mode in ("bm25", "dense", "hybrid"):
        retriever, times = Retriever(index, mode=mode, top_k=10), []
        retriever.search(questions[0])  # warm (reads the bm25s / FAISS part on first use)
        for q in questions:
            t = time.perf_counter()
            retriever.search(q)
            times.append((time.perf_counter() - t) * 1000)
        out[mode] = times
    return out


def dense_top(index, qvecs: dict[str, np.ndarray], questions: list[str], k: int = 10) -> list[list[int]]:
    return [[row for row, _ in index.dense_search(qvecs[q], k)] for q in questions]


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def index_part(sizes: list[int], noise: float, work: Path, vectors_from: Path | None) -> list[str]:
    from rag.index.encoder import index_encoder

    # one vector per chunk: the synthetic corpus's vectors are given (GivenVectors), and what grows here is FAISS
    settings = Settings(index_dir=work / "idx", dense_windows=0)
    if vectors_from is not None:  # an index of the built-in corpus already built: its chunks, vectors and timing
        from rag.index.store import Index

        built = Index.load(vectors_from, Settings(index_dir=vectors_from))
        base, vectors = list(built.chunks), np.asarray(built.embeddings, dtype=np.float32)
        sample_s = float(built.manifest["timings"]["embed_seconds"])
        runtime = (built.manifest["embedding"].get("encoder") or {}).get("runtime", "sentence-transformers")
        origin = (f"vectors and embedding time from the build of {vectors_from} ({runtime}; not re-embedded in "
                  "this run)")
    else:
        base = chunk_documents(load_builtin_topics(), settings.chunk_size, settings.chunk_overlap)
        texts = [index_text(c) for c in base]
        encoder, record = index_encoder(settings.embedding_model, settings.embedding_runtime, texts[:64],
                                        lambda m: print(m, file=sys.stderr), settings.embedding_precision)
        encoder.encode(texts[:8])  # warm
        print(f"embedding the {len(base)} built-in chunks once ({record['runtime']}; real vectors to repeat)",
              file=sys.stderr)
        t, cpu = time.perf_counter(), time.process_time()
        vectors = np.asarray(encoder.encode(texts), dtype=np.float32)
        sample_s, cpu_s = time.perf_counter() - t, time.process_time() - cpu
        origin = (f"embedded in this run by the index encoder, {record['runtime']} {record.get('precision', '')}, "
                  f"{cpu_s:.1f} CPU s over {len(os.sched_getaffinity(0))} cores")
    per_chunk = sample_s / len(base)
    questions = [it.question for it in load_golden(GOLDEN)][:MAX_QUERIES]
    probe = build_index(base, work / "probe", settings.replace(index_dir=work / "probe"), show_progress=False,
                        source="synthetic", embedder=GivenVectors(vectors))
    probe.embed_query("warm up")  # loads the query encoder
    qtimes, qvecs = [], {}
    for q in questions:
        text = " ".join(q.split())  # what Retriever.prepare_query hands embed_query
        t = time.perf_counter()
        qvecs[text] = np.asarray(probe.embed_query(text), dtype=np.float32)
        qtimes.append((time.perf_counter() - t) * 1000)
    questions = list(qvecs)
    qenc = type(probe.query_encoder).__name__
    qenc = {"OnnxEncoder": "ONNX Runtime", "_TorchQuery": "sentence-transformers (torch)"}.get(qenc, qenc)
    lines = [f"Built-in corpus: {len(base)} chunks, embedded in {sample_s:.1f} s ({origin}; "
             f"{1 / per_chunk:.1f} chunks/s; the embedding column below is that rate times N, extrapolated, "
             "not measured).",
             f"Query embedding (`Index.embed_query`, {qenc}, MiniLM, one query at a time, n = {len(questions)} "
             f"golden questions): p50 {pct(qtimes, 50):.1f} ms, p95 {pct(qtimes, 95):.1f} ms; not included in the "
             "dense and hybrid columns.",
             f"Search latency: n = {len(questions)} golden questions per mode and size, top 10 (50 candidates per "
             "list for hybrid), one warm-up query first. Build time excludes the embedding (vectors given) and "
             "the encoder's load.", "",
             "| chunks | FAISS | embedding (extrapolated) | build (bm25 + FAISS + files) | size on disk | "
             "bm25 p50 / p95 ms | dense p50 / p95 ms | hybrid p50 / p95 ms | HNSW recall@10 vs flat | peak RSS |",
             "| ---: | --- | ---: | ---: | ---: | --- | --- | --- | --- | ---: |"]
    for n in sizes:
        chunks, vecs = synthetic(base, vectors, n, noise)
        kinds = [("auto", HNSW_THRESHOLD)] + ([("flat", 10**12)] if n > HNSW_THRESHOLD else [])
        tops = {}
        for kind, threshold in kinds:
            folder = work / f"idx-{n}-{kind}"
            print(f"building {n} chunks ({kind})", file=sys.stderr)
            t = time.perf_counter()
            index = build_index(chunks, folder, settings.replace(index_dir=folder), show_progress=False,
                                source="synthetic", hnsw_threshold=threshold, embedder=GivenVectors(vecs))
            build_s = time.perf_counter() - t - float(index.manifest["timings"].get("encoder_seconds", 0.0))
            lat = timed_searches(index, questions, qvecs)
            tops[kind] = dense_top(index, qvecs, questions)
            faiss_type = index.manifest["faiss"]["type"].replace("Index", "")
            recall = ""
            if kind == "flat":
                recall = "(exact)"
            lines.append(f"| {n:,} | {faiss_type} | {per_chunk * n:,.0f} s | {build_s:.1f} s | "
                         f"{du(folder) / 1e6:,.1f} MB | "
                         + " | ".join(f"{pct(lat[m], 50):.2f} / {pct(lat[m], 95):.2f}" for m in ("bm25", "dense", "hybrid"))
                         + f" | {recall} | {peak_rss_mb():,.0f} MB |")
            print(lines[-1], file=sys.stderr)
            del index
            import shutil

            shutil.rmtree(folder, ignore_errors=True)  # keep the temp folder small
        if n > HNSW_THRESHOLD:  # fill HNSW's row with its recall@10 against the flat build of the same corpus
            row = next(i for i, line in enumerate(lines) if line.startswith(f"| {n:,} | HNSW"))
            hits = [len(set(a) & set(b)) / len(b) for a, b in zip(tops["auto"], tops["flat"]) if b]
            # the copies of one chunk are near-duplicates whose order is noise: also count by original chunk
            same = [len({r % len(base) for r in a} & {r % len(base) for r in b}) / len({r % len(base) for r in b})
                    for a, b in zip(tops["auto"], tops["flat"]) if b]
            cells = lines[row].split(" | ")
            cells[-2] = f"{statistics.mean(hits):.3f}; by original chunk {statistics.mean(same):.3f} (n = {len(hits)})"
            lines[row] = " | ".join(cells)
            print(lines[row], file=sys.stderr)
        del chunks, vecs
    return lines


def max_in_window(times: list[float], window: float) -> int:
    """The most events within any ``window`` seconds (as ``DelayServer.max_in_window`` counts them)."""
    times, best, start = sorted(times), 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best


def logged_limiter(window: float):
    """The cluster's limiter actor (``rag.distributed.limiter``: same name, same state class) that also keeps the
    time of every grant (``time.monotonic``, one clock for every process of this machine), to tell what the
    limiter let through from what the server saw."""
    import ray

    from rag.distributed.cluster import NAMESPACE
    from rag.distributed.limiter import ACTOR_NAME, LimiterState

    class LoggedLimiterState(LimiterState):
        def __init__(self, window: float):
            super().__init__(window)
            self.grant_times: list[float] = []

        def reserve(self, model, rpm, tpm, tokens):
            answer = super().reserve(model, rpm, tpm, tokens)
            if answer[0] is not None:
                self.grant_times.append(time.monotonic())
            return answer

        def grants(self) -> list[float]:
            return list(self.grant_times)

    actor_class = ray.remote(num_cpus=0, max_restarts=-1)(LoggedLimiterState)
    return actor_class.options(name=ACTOR_NAME, namespace=NAMESPACE, get_if_exists=True, lifetime=None).remote(window)


def gone(ray, name: str, timeout: float = 60.0) -> None:
    """Wait until the named actor (killed) is no longer found."""
    from rag.distributed.cluster import NAMESPACE

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return
        time.sleep(0.2)


def eval_part(workers: list[int], delay: float, items_n: int, rpm: int, window: float, work: Path) -> list[str]:
    import ray

    from rag.distributed.cluster import connect
    from rag.distributed.eval import RayRunner, SettingsProgram
    from rag.distributed.limiter import ACTOR_NAME
    from rag.eval.presets import select_items
    from rag.eval.runner import run_eval
    from rag.eval.runs import read_records
    from tests.delay_server import DelayServer

    server = DelayServer(delay=delay)
    # a private SIEVE_HOME (usage ledger, run folders), sharing this machine's ONNX encoder exports so the eval
    # index is built with the encoder a real build uses without exporting it again (torch) into the temp folder
    from rag.index.export import encoders_dir

    shared_encoders = encoders_dir()
    (work / "home").mkdir(parents=True, exist_ok=True)
    if shared_encoders.is_dir():
        (work / "home" / "encoders").symlink_to(shared_encoders, target_is_directory=True)
    os.environ.update({"GROQ_API_KEY": "loopback-not-a-key", "GROQ_BASE_URL": server.url,
                       "SIEVE_HOME": str(work / "home")})
    index_dir = work / "eval-index"
    base = Settings(index_dir=index_dir)
    chunks = chunk_documents(load_builtin_topics(["if", "while", "for", "try", "with", "function", "class", "lambda"]),
                             base.chunk_size, base.chunk_overlap)
    build_index(chunks, index_dir, base, show_progress=False)
    model = "groq/openai/gpt-oss-20b"
    items = select_items(load_golden(GOLDEN), "test")[:items_n]
    connect("local", num_cpus=max(workers))
    lines = [f"n = {len(items)} golden test items per row (the first {len(items)} of the test split); every role "
             f"(grader, rewriter, answerer, judge) `{model}` on a loopback OpenAI-compatible server answering each "
             f"call after {delay:g} s; bm25 retrieval (no embedding model in the workers); LM cache off; a local Ray "
             f"cluster of {max(workers)} CPUs on this {os.cpu_count()}-core machine, 1 CPU per worker. Run s and "
             "items/s count from the moment the workers had built their programs (their start-up is the last "
             "column); every worker count asks one shared limiter actor, whose limit is effectively off except in "
             f"the capped row. 'Most in any {window:g} s' counts the limiter's grants (the actor's clock) and the "
             "calls the server saw (their arrival), in any window of the capped run's length; 'grant-to-arrival' "
             "is the largest k-th arrival minus k-th grant (both sorted).", "",
             "| workers | shared limit | LM calls (server) | limiter grants | most grants in any "
             f"{window:g} s | most calls in any {window:g} s (server) | grant-to-arrival max s | run s | items/s | "
             "speed-up vs 1 worker | worker start-up s |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    one = None
    plans = [(w, None) for w in workers] + [(max(workers), rpm)]
    for count, limit in plans:
        settings = base.replace(mode="bm25", cache=False, grader_model=model, rewriter_model=model,
                                answerer_model=model, judge_model=model, groq_base_url=server.url,
                                rate_limits=f"*={limit or 100000}/100000000")
        limiter = logged_limiter(window if limit else 60.0)
        runner = RayRunner(SettingsProgram(settings, use_artifact=False), workers=count, limiter=limiter,
                           show_progress=True)
        server.reset()
        from rag.agent.module import Sieve

        agent = Sieve(None, max_rewrites=settings.max_rewrites, top_k=settings.top_k)
        summary = run_eval(items, agent, None, work / f"run-{count}-{limit}", "full", k=settings.top_k,
                           runner=runner, show_progress=False)
        records = read_records(work / f"run-{count}-{limit}")
        failed = [r for r in records if r["status"] == "error"
                  or (isinstance(r.get("judge"), dict) and "error" in r["judge"])]
        errors = len(failed)
        if not summary.get("complete") or errors:
            first = next((r.get("error") or r["judge"].get("error") for r in failed), None)
            raise SystemExit(f"eval with {count} workers: {len(records)} of {len(items)} items written, {errors} "
                             f"errors (first: {first}); not a throughput figure")
        grants = ray.get(limiter.grants.remote())
        arrivals = sorted(server.arrivals)
        lag = [a - g for a, g in zip(arrivals, grants)] if len(grants) == len(arrivals) else []
        ray.kill(limiter)
        gone(ray, ACTOR_NAME)  # the next run gets a fresh limiter (its own window), not this one dying
        rate = len(items) / runner.timing["run_s"]
        one = one or rate
        shared = f"{limit} requests / {window:g} s" if limit else "none (100000 / 60 s)"
        lines.append(f"| {count} | {shared} | {len(server.arrivals)} | {len(grants)} | "
                     f"{max_in_window(grants, window)} | {server.max_in_window(window)} | "
                     + (f"{max(lag):.2f} |" if lag else "n/a |")
                     + f" {runner.timing['run_s']:.1f} | {rate:.2f} | {rate / one:.2f}x | {runner.timing['start_s']:.1f} |")
        print(lines[-1], file=sys.stderr)
    ray.shutdown()
    server.stop()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated chunk counts")
    parser.add_argument("--noise", type=float, default=0.02, help="sigma of the noise added to repeated vectors")
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
                      *index_part([int(s) for s in args.sizes.split(",")], args.noise, work, args.vectors_from), ""]
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
