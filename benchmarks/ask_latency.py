"""`rag ask` wall time per answerable question, cold start included, per embedded model, side by side.

Run: python benchmarks/ask_latency.py [--models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b] [--n 10] [--config full]
                                      [--out benchmarks/results/ask_latency.md]

Each question is a fresh `rag ask QUESTION --no-cache --json` process (imports, index and model load
included, as a user sees it) on the answerable items of the golden test split, in file order. The table
gives p50 / p95 / mean wall seconds per model, the outcome counts, and each model's p50 as a ratio of the
first model's. Run it on an otherwise idle machine: these figures are the machine's, not the model's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.golden import load_golden  # noqa: E402
from benchmarks.tables import emit  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    low, high = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ask(question: str, model: str, config_flags: list[str]) -> dict:
    cmd = ["rag", "ask", question, "--no-cache", "--json", "--set", f"embedded_model={model}", *config_flags]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        return {"wall_s": wall, "outcome": "error", "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    data = json.loads(proc.stdout)
    steps = data["trace"]["steps"]
    return {"wall_s": wall, "outcome": data["trace"].get("outcome") or ("refused" if data["refused"] else "answered"),
            "lm_s": sum((s.get("latency_ms") or 0) for s in steps if s["node"] != "retrieve") / 1000,
            "steps": len(steps)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="qwen2.5-coder-1.5b,qwen2.5-coder-0.5b")
    parser.add_argument("--n", type=int, default=10, help="answerable test questions per model")
    parser.add_argument("--golden", default=str(ROOT / "golden" / "python_ref.jsonl"))
    parser.add_argument("--no-reflection", action="store_true", help="baseline: retrieve then answer")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    items = [it for it in load_golden(args.golden) if it.split == "test" and it.type == "answerable"][: args.n]
    flags = ["--no-reflection"] if args.no_reflection else []
    rows = []
    for model in args.models.split(","):
        results = []
        for i, it in enumerate(items, 1):
            res = ask(it.question, model, flags)
            results.append(res)
            print(f"[{model}] {i}/{len(items)} {res['wall_s']:.1f} s {res['outcome']}", file=sys.stderr, flush=True)
        walls = [r["wall_s"] for r in results]
        lm = [r["lm_s"] for r in results if "lm_s" in r]
        outcomes = {o: sum(r["outcome"] == o for r in results) for o in ("answered", "refused", "error")}
        rows.append((model, len(walls), percentile(walls, 0.5), percentile(walls, 0.95), statistics.mean(walls),
                     statistics.mean(lm) if lm else float("nan"), outcomes))
    base = rows[0][2]
    lines = [f"`rag ask` wall seconds per answerable test question, cold start included "
             f"({'baseline, no reflection' if args.no_reflection else 'full: grade + answer'}; "
             f"{os.cpu_count()} cores; `python benchmarks/ask_latency.py --n {args.n}`)", "",
             "| model | n | p50 s | p95 s | mean s | mean LM s | answered / refused / error | p50 ratio |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for model, n, p50, p95, mean, lm_mean, o in rows:
        lines.append(f"| {model} | {n} | {p50:.1f} | {p95:.1f} | {mean:.1f} | {lm_mean:.1f} | "
                     f"{o['answered']} / {o['refused']} / {o['error']} | {p50 / base:.2f} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
