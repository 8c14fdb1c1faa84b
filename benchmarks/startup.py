"""Start-up and indexing speed: the torch path against the ONNX Runtime path, side by side.

    python benchmarks/startup.py                                  # print the tables
    python benchmarks/startup.py --out benchmarks/results/startup.md
    python benchmarks/startup.py --polygraph-chunks 600 --repeats 3

Every figure is a fresh ``rag`` process (a *cold* start: interpreter, imports, index load, model load),
except "warm search", which times ``Retriever.search`` in this process after a warm-up. The two paths are
the ``embedding_runtime`` setting (``SIEVE_EMBEDDING_RUNTIME``): ``torch`` (sentence-transformers, as
Sieve embedded before) and ``onnx`` (ONNX Runtime over the model's ONNX export, rag.index.encoder); each path
searches an index it built itself (torch: fp32; onnx: the default precision, int8). Both run in
the same benchmark, interleaved, so their *ratio* is the figure that carries over to another machine or
load; wall times depend on what else runs on the cores. CPU seconds (user + system of the process) and
peak RSS are measured per process with ``wait4``.

* commands that need no model (``--help``, ``models --no-check``, ``artifacts``): time, and whether torch
  was imported;
* cold ``rag search`` per mode: wall, CPU, peak RSS, torch imported or not;
* warm search latency per mode (query embedding + search + fusion);
* ``rag ask``: seconds from process start to the first language-model call (the call itself is not made:
  the process stops there; ``--no-cache`` so that the DSPy cache cannot answer instead);
* ``rag index``, cold, on the built-in corpus and on the polygraph chunks (``--polygraph-chunks`` of
  them): chunks/s, from process start to the index written; the one-time ONNX export is timed separately;
* optionally (``--quality``) retrieval quality of an index built by each path: Recall@4 / MRR@4 with 95%
  intervals on the built-in golden set and polygraph dev, needle recall@4 on aegis.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUNTIMES = ("torch", "onnx")
MODES = ("bm25", "dense", "hybrid")
QUERY = "how do I catch several exceptions in one except clause"
HEAVY = ("torch", "sentence_transformers", "transformers", "onnxruntime", "dspy")

# The child: runs the rag command line as the `rag` script does, and reports which heavy modules it imported.
# With SIEVE_BENCH_FIRST_LM set it stops at the first language-model call, writing the time.
CHILD = r"""
import json, os, sys, time
def report():
    peak = None
    with open("/proc/self/status") as f:  # this program's own peak RSS (not the forked parent's)
        for line in f:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
    with open(os.environ["SIEVE_BENCH_REPORT"], "w") as f:
        json.dump({"heavy": sorted(m for m in %r if m in sys.modules), "first_lm": FIRST[0], "rss_mb": peak}, f)
FIRST = [None]
if os.environ.get("SIEVE_BENCH_FIRST_LM"):
    # rag.lm.local imports DSPy: it is patched when the command imports it, not imported here ahead of the command
    # (which would take DSPy's import out of what `rag ask` overlaps with its index load)
    import importlib.abc, importlib.machinery
    def first_call(self, *args, **kwargs):
        FIRST[0] = time.time()
        report()
        os._exit(0)
    class PatchOnImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "rag.lm.local":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            run = spec.loader.exec_module
            def exec_module(module):
                run(module)
                module.LlamaCppEngine.complete = first_call
            spec.loader.exec_module = exec_module
            return spec
    sys.meta_path.insert(0, PatchOnImport())
import atexit
atexit.register(report)
sys.argv = ["rag", *json.loads(os.environ["SIEVE_BENCH_ARGS"])]
from rag.cli import main
main()
""" % (HEAVY,)


def popen_wait4() -> None:
    """subprocess reaps its child itself; take the rusage of that reaping instead (Popen._try_wait)."""
    original = subprocess.Popen._try_wait

    def _try_wait(self, wait_flags):
        pid, status, usage = os.wait4(self.pid, wait_flags)
        if pid == self.pid:
            self.rusage = usage
        return pid, status

    subprocess.Popen._try_wait = _try_wait  # type: ignore[method-assign]
    return original


def cold(args: list[str], env: dict[str, str], first_lm: bool = False) -> dict:
    fd, report = tempfile.mkstemp(prefix="sieve-bench-", suffix=".json")
    os.close(fd)
    environ = {**os.environ, **env, "SIEVE_BENCH_REPORT": report, "SIEVE_BENCH_ARGS": json.dumps([str(a) for a in args])}
    if first_lm:
        environ["SIEVE_BENCH_FIRST_LM"] = "1"
    start_epoch = time.time()
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    usage = getattr(proc, "rusage", None)
    try:
        data = json.loads(Path(report).read_text() or "{}")
    except ValueError:
        data = {}
    Path(report).unlink(missing_ok=True)
    result = {"wall": wall, "code": proc.returncode, "heavy": data.get("heavy"), "out": out.decode(errors="replace"),
              "err": err.decode(errors="replace")}
    if usage is not None:  # ru_maxrss would count the forked benchmark process itself: VmHWM is used instead
        result.update(cpu=usage.ru_utime + usage.ru_stime)
    result["rss_mb"] = data.get("rss_mb") or float("nan")
    if data.get("first_lm"):
        result["first_lm"] = data["first_lm"] - start_epoch
    if proc.returncode != 0 and not first_lm:
        raise SystemExit(f"rag {' '.join(map(str, args))} failed ({proc.returncode}):\n{result['err'][-2000:]}")
    return result


def med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def torch_flag(rows: list[dict]) -> str:
    heavy = rows[0].get("heavy") or []
    return "yes" if "torch" in heavy else "no"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "-"


def section_no_model(lines: list[str], env: dict[str, str], repeats: int) -> None:
    lines += ["## Commands that need no model", "",
              "| command | wall s (median) | CPU s | peak RSS MB | imports torch |", "| --- | --- | --- | --- | --- |"]
    for args in (["--help"], ["models", "--no-check"], ["artifacts"]):
        rows = [cold(args, env) for _ in range(repeats)]
        lines.append(f"| `rag {' '.join(args)}` | {med(rows, 'wall'):.2f} | {med(rows, 'cpu'):.2f} | "
                     f"{med(rows, 'rss_mb'):.0f} | {torch_flag(rows)} |")
    lines.append("")


def section_search(lines: list[str], env: dict[str, str], index_dirs: dict[str, Path], repeats: int, chunks: int) -> None:
    lines += [f"## Cold `rag search` (a new process per query; built-in corpus index, {chunks} chunks)", "",
              f"`rag search \"{QUERY}\" --k 4 --mode MODE`, median of {repeats} runs per cell, the two paths interleaved.", "",
              "| mode | path | wall s | CPU s | peak RSS MB | imports torch | torch / onnx (wall, CPU, RSS) |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for mode in MODES:
        rows: dict[str, list[dict]] = {r: [] for r in RUNTIMES}
        for _ in range(repeats):
            for runtime in RUNTIMES:
                rows[runtime].append(cold(["search", QUERY, "--k", "4", "--mode", mode, "--index-dir", index_dirs[runtime]],
                                          {**env, "SIEVE_EMBEDDING_RUNTIME": runtime}))
        t, o = rows["torch"], rows["onnx"]
        for runtime in RUNTIMES:
            r = rows[runtime]
            last = (f"{ratio(med(t, 'wall'), med(o, 'wall'))}, {ratio(med(t, 'cpu'), med(o, 'cpu'))}, "
                    f"{ratio(med(t, 'rss_mb'), med(o, 'rss_mb'))}") if runtime == "onnx" else ""
            lines.append(f"| {mode} | {runtime} | {med(r, 'wall'):.2f} | {med(r, 'cpu'):.2f} | {med(r, 'rss_mb'):.0f} | "
                         f"{torch_flag(r)} | {last} |")
    lines.append("")


def section_warm(lines: list[str], index_dirs: dict[str, Path]) -> None:
    from rag.config import Settings
    from rag.eval.golden import load_golden
    from rag.index.store import Index
    from rag.retrieval.retriever import Retriever

    questions = [i.question for i in load_golden(ROOT / "golden" / "python_ref.jsonl")][:40]
    lines += ["## Warm search latency (in one process, after a warm-up; 40 golden questions)", "",
              "| mode | torch p50 ms | onnx p50 ms | torch / onnx |", "| --- | --- | --- | --- |"]
    retrievers = {r: Retriever(Index.load(index_dirs[r], Settings(index_dir=index_dirs[r], embedding_runtime=r)),
                               top_k=4) for r in RUNTIMES}
    for mode in MODES:
        p50 = {}
        for runtime, retriever in retrievers.items():
            for q in questions[:5]:
                retriever.search(q, mode=mode)
            times = []
            for q in questions:
                t = time.perf_counter()
                retriever.search(q, mode=mode)
                times.append(time.perf_counter() - t)
            p50[runtime] = statistics.median(times) * 1000
        lines.append(f"| {mode} | {p50['torch']:.1f} | {p50['onnx']:.1f} | {ratio(p50['torch'], p50['onnx'])} |")
    lines.append("")


def section_ask(lines: list[str], env: dict[str, str], index_dirs: dict[str, Path], repeats: int) -> None:
    lines += ["## `rag ask`: start to the first language-model call", "",
              "`rag ask QUESTION --no-cache` (hybrid retrieval, the default embedded model); the process stops when "
              "the first LM call starts, so model loading inside that call is not counted.", "",
              "| path | seconds (median) | CPU s | imports torch | torch / onnx |", "| --- | --- | --- | --- | --- |"]
    rows: dict[str, list[dict]] = {r: [] for r in RUNTIMES}
    for _ in range(repeats):
        for runtime in RUNTIMES:
            res = cold(["ask", QUERY, "--no-cache", "--index-dir", index_dirs[runtime]], {**env, "SIEVE_EMBEDDING_RUNTIME": runtime},
                       first_lm=True)
            if "first_lm" not in res:
                raise SystemExit(f"rag ask made no LM call:\n{res['err'][-2000:]}")
            rows[runtime].append(res)
    for runtime in RUNTIMES:
        r = rows[runtime]
        last = ratio(med(rows["torch"], "first_lm"), med(rows["onnx"], "first_lm")) if runtime == "onnx" else ""
        lines.append(f"| {runtime} | {med(r, 'first_lm'):.2f} | {med(r, 'cpu'):.2f} | {torch_flag(r)} | {last} |")
    lines.append("")


def section_index(lines: list[str], env: dict[str, str], work: Path, shared: Path, polygraph_chunks: int,
                  repeats: int) -> None:
    corpora: list[tuple[str, list[str], int]] = []
    from rag.config import Settings
    from rag.ingest.chunking import chunk_documents
    from rag.ingest.corpus import load_folder

    s = Settings()
    aegis = shared / "aegis" / "docs"
    if aegis.is_dir():
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            n = len(chunk_documents(load_folder(aegis, show_progress=False), s.chunk_size, s.chunk_overlap))
        corpora.append((f"aegis folder ({n} chunks)", [aegis], n))
    source = shared / "polygraph" / "chunks.jsonl"
    if source.is_file() and polygraph_chunks > 0:
        subset = work / "polygraph-chunks.jsonl"
        with open(source, encoding="utf-8") as f, open(subset, "w", encoding="utf-8") as out:
            n = 0
            for line in f:
                if line.strip() and n < polygraph_chunks:
                    out.write(line)
                    n += 1
        corpora.append((f"polygraph ({n} chunks)", ["--chunks", subset], n))
    paths = {"torch": {"SIEVE_EMBEDDING_RUNTIME": "torch", "SIEVE_EMBEDDING_PRECISION": "fp32"},
             "onnx": {"SIEVE_EMBEDDING_RUNTIME": "onnx", "SIEVE_EMBEDDING_PRECISION": "fp32"},
             "onnx int8": {"SIEVE_EMBEDDING_RUNTIME": "onnx", "SIEVE_EMBEDDING_PRECISION": "int8"}}
    lines += ["## Cold `rag index` (a new process, a new index folder)", "",
              "From process start to the index written: imports, model load, embedding, bm25s, FAISS. "
              f"Median of {repeats}, the paths interleaved; the ONNX export (and its int8 quantization) is made once "
              "per model and timed below.", "",
              "| corpus | path | wall s | CPU s | chunks/s (wall) | embed s (manifest) | torch / path (wall) |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, args, n in corpora:
        rows: dict[str, list[dict]] = {p: [] for p in paths}
        embed_s: dict[str, list[float]] = {p: [] for p in paths}
        for i in range(repeats):
            for label, path_env in paths.items():
                target = work / f"idx-{label.replace(' ', '-')}-{i}-{len(args)}"
                shutil.rmtree(target, ignore_errors=True)
                rows[label].append(cold(["index", *args, "--index-dir", target, "-q"], {**env, **path_env}))
                manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
                embed_s[label].append(manifest["timings"]["embed_seconds"])
                shutil.rmtree(target, ignore_errors=True)
        for label in paths:
            r = rows[label]
            last = ratio(med(rows["torch"], "wall"), med(r, "wall")) if label != "torch" else ""
            lines.append(f"| {name} | {label} | {med(r, 'wall'):.1f} | {med(r, 'cpu'):.1f} | {n / med(r, 'wall'):.1f} | "
                         f"{statistics.median(embed_s[label]):.1f} | {last} |")
    lines.append("")


def section_quality(lines: list[str], work: Path, shared: Path, data: list[str]) -> None:
    from benchmarks.retrieval import aegis_items
    from rag.config import Settings
    from rag.eval.golden import load_golden
    from rag.eval.metrics import retrieval_report
    from rag.index.build import build_index
    from rag.ingest.chunking import chunk_documents, load_chunks_jsonl
    from rag.ingest.corpus import load_builtin_topics, load_folder
    from rag.retrieval.retriever import Retriever

    sets = [("built-in golden (all splits)", lambda s: chunk_documents(load_builtin_topics(), s.chunk_size, s.chunk_overlap),
             lambda: load_golden(ROOT / "golden" / "python_ref.jsonl"), ("recall@4", "mrr@4"))]
    if (shared / "polygraph").is_dir():
        sets.append(("polygraph dev", lambda s: load_chunks_jsonl(shared / "polygraph" / "chunks.jsonl"),
                     lambda: load_golden(shared / "polygraph" / "golden_dev.jsonl"), ("recall@4", "mrr@4")))
    if (shared / "aegis").is_dir():
        sets.append(("aegis", lambda s: chunk_documents(load_folder(shared / "aegis" / "docs", show_progress=False),
                                                        s.chunk_size, s.chunk_overlap),
                     lambda: aegis_items(shared), ("needle_recall@4", "all_needles@4")))
    variants = {"torch": ("torch", "fp32"), "onnx": ("onnx", "fp32"), "onnx int8": ("onnx", "int8")}
    lines += ["## Retrieval quality of an index built (and queried) by each path (k=4; 95% intervals)", "",
              "| data | mode | metric | " + " | ".join(variants) + " | embed s (" + " / ".join(variants) + ") |",
              "| --- | --- | --- | " + " | ".join("---" for _ in variants) + " | --- |"]
    keys = {"built-in golden (all splits)": "builtin", "polygraph dev": "polygraph", "aegis": "aegis"}
    sets = [entry for entry in sets if keys[entry[0]] in data]
    tops: dict[str, dict[str, tuple[str | None, set[str]]]] = {}
    for name, make_chunks, make_items, metrics in sets:
        reports: dict[tuple[str, str], dict] = {}
        embed_s = {}
        for label, (runtime, precision) in variants.items():
            settings = Settings(index_dir=work / "q-index", embedding_runtime=runtime, embedding_precision=precision)
            shutil.rmtree(settings.index_dir, ignore_errors=True)
            index = build_index(make_chunks(settings), settings.index_dir, settings, show_progress=False)
            embed_s[label] = index.manifest["timings"]["embed_seconds"]
            for mode in ("dense", "hybrid"):
                reports[(label, mode)] = retrieval_report(make_items(), Retriever(index, top_k=4), k=4, mode=mode)
            if name.startswith("built-in"):  # the agent's first context for each golden question
                retriever = Retriever(index, top_k=4)
                tops[label] = {it.id: (it.split, {h.chunk_id for h in retriever.search(it.question, mode="hybrid")})
                               for it in make_items()}
            shutil.rmtree(settings.index_dir, ignore_errors=True)
        for mode in ("dense", "hybrid"):
            for metric in metrics:
                cells = []
                for label in variants:
                    r = reports[(label, mode)]
                    value, ci = r[metric], r.get("ci", {}).get(metric)
                    cells.append(f"{value:.3f}" + (f" [{ci['lo']:.3f}, {ci['hi']:.3f}]" if ci else ""))
                times = " / ".join(f"{embed_s[v]:.0f}" for v in variants)
                lines.append(f"| {name} | {mode} | {metric} | {' | '.join(cells)} | {times} |")
    lines.append("")
    if {"onnx", "onnx int8"} <= tops.keys():
        same: dict[str, list[int]] = {}
        for item_id, (split, ids) in tops["onnx"].items():
            same.setdefault(split or "none", []).append(int(tops["onnx int8"][item_id][1] == ids))
        lines += ["What int8 changes for the agent: the golden questions whose hybrid top-4 (the agent's first context) "
                  "is the same set with the int8 index as with fp32 ONNX: "
                  + ", ".join(f"{split} {sum(v)} of {len(v)}" for split, v in sorted(same.items())) + ".", ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "benchmarks", help="benchmark data folder")
    parser.add_argument("--out", type=Path, default=None, help="also write the printed Markdown to this file")
    parser.add_argument("--repeats", type=int, default=3, help="cold runs per cell (median reported)")
    parser.add_argument("--index-repeats", type=int, default=1, help="cold index builds per cell")
    parser.add_argument("--polygraph-chunks", type=int, default=2594, help="polygraph chunks indexed (0: skip)")
    parser.add_argument("--search-topics", type=int, default=0,
                        help="index only the first N built-in topics for the search and ask runs (0: all 79)")
    parser.add_argument("--only", nargs="*", default=None,
                        choices=("no-model", "search", "warm", "ask", "index", "quality"), help="sections to run")
    parser.add_argument("--home", type=Path, default=None,
                        help="SIEVE_HOME for the runs (default: a new temporary one; the ONNX export and the embedded "
                             "model file are then made there first)")
    parser.add_argument("--quality", action="store_true", help="also build full indexes with each path and score them")
    parser.add_argument("--quality-data", nargs="*", default=["builtin", "polygraph", "aegis"],
                        choices=("builtin", "polygraph", "aegis"), help="data sets of --quality")
    args = parser.parse_args(argv)
    popen_wait4()
    work = Path(tempfile.mkdtemp(prefix="sieve-startup-"))
    # SIEVE_HOME: holds the ONNX export (made below if missing) and the embedded model file for rag ask
    home = args.home.expanduser() if args.home else work / "home"
    env = {"SIEVE_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    os.environ.update(env)
    sections = set(args.only or ("no-model", "search", "warm", "ask", "index")) | ({"quality"} if args.quality else set())
    load_start = os.getloadavg()
    lines = ["# Start-up and indexing speed: torch path vs ONNX Runtime path", ""]
    try:
        from rag.index.export import ensure_export

        t = time.perf_counter()
        folder = ensure_export("default")
        export_s = time.perf_counter() - t
        meta = json.loads((folder / "encoder.json").read_text(encoding="utf-8"))
        # each path queries the index it builds: torch an fp32 one, onnx one at the default precision (int8)
        index_dirs = {runtime: work / f"builtin-index-{runtime}" for runtime in RUNTIMES}
        for runtime, index_dir in index_dirs.items():
            if args.search_topics:
                from pydoc_data.topics import topics as all_topics

                from rag.config import Settings
                from rag.index.build import build_index
                from rag.ingest.chunking import chunk_documents
                from rag.ingest.corpus import load_builtin_topics

                names = sorted(all_topics)[: args.search_topics]
                s = Settings(index_dir=index_dir, embedding_runtime=runtime)
                build_index(chunk_documents(load_builtin_topics(names), s.chunk_size, s.chunk_overlap), index_dir, s,
                            show_progress=False)
            else:
                cold(["index", "--index-dir", index_dir, "-q"], {**env, "SIEVE_EMBEDDING_RUNTIME": runtime})
        chunks_searched = json.loads((index_dirs["onnx"] / "manifest.json").read_text(encoding="utf-8"))["counts"]["chunks"]
        body: list[str] = []
        if "no-model" in sections:
            section_no_model(body, env, args.repeats)
        if "search" in sections:
            section_search(body, env, index_dirs, args.repeats, chunks_searched)
        if "warm" in sections:
            section_warm(body, index_dirs)
        if "ask" in sections:
            section_ask(body, env, index_dirs, args.repeats)
        if "index" in sections:
            section_index(body, env, work, args.shared, args.polygraph_chunks, args.index_repeats)
        if "quality" in sections:
            section_quality(body, work, args.shared, args.quality_data)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    import onnxruntime
    import torch

    from rag.lm.probe import cpu_flags

    flags = cpu_flags()  # int8 speed depends on them: VNNI multiplies int8 in one step, plain AVX2 does not
    simd = ", ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags) or "no AVX2"
    lines += [
        f"Machine: {platform.machine()} ({simd}), {os.cpu_count()} cores, Python {platform.python_version()}, torch "
        f"{torch.__version__}, onnxruntime {onnxruntime.__version__}; load average {load_start[0]:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end (other processes share the cores: wall times vary from run to run; the "
        "ratios of the two paths, measured interleaved in the same run, carry over).",
        f"Generated by `python benchmarks/startup.py{' ' + ' '.join(argv or sys.argv[1:]) if (argv or sys.argv[1:]) else ''}` "
        f"on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        f"One-time ONNX export of all-MiniLM-L6-v2 (`torch.onnx.export`, checked against sentence-transformers: lowest "
        f"cosine {meta['checked']['min_cosine']:.6f} on {meta['checked']['texts']} texts): "
        f"{meta.get('export_seconds', export_s):.1f} s, made by the first `rag index` (or first query) and reused after.",
        "",
        *body,
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
