"""`rag ask` wall time per answerable question, cold start included, per embedded model, side by side.

Run: python benchmarks/ask_latency.py [--models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b] [--n 10] [--config full]
                                      [--extra-bufts auto] [--compare KEY=V1,V2]
                                      [--artifact NAME [--uncompiled]]
                                      [--out benchmarks/results/ask_latency.md]

Each question is a fresh `rag ask QUESTION --no-cache --json` process (imports, index and model load
included, as a user sees it) on the answerable items of the golden test split, in file order. The table
gives p50 / p95 / mean wall seconds per model, the outcome counts, and each model's p50 as a ratio of the
first model's. ``--extra-bufts on,off`` runs each model with llama.cpp's extra buffer types (the CPU
repack kernels) on and off (the ``llama_extra_bufts`` setting), the variants taking turns question by
question, in alternating order (A B, B A, ...: back-to-back processes differ by up to 1.2x with the same work). ``--compare id_choices=true,false`` does the same for any setting (each value as ``--set KEY=VALUE``).
``--artifact NAME`` runs a compiled program; ``--uncompiled`` adds the uncompiled program as one more variant
in the same turns, so the compiled runs' ratios are against it.
Run it on an otherwise idle machine: these figures are the machine's, not the model's.
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

from benchmarks.tables import emit  # noqa: E402
from rag.eval.golden import load_golden  # noqa: E402

UNCOMPILED = "uncompiled (--no-artifact)"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    low, high = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ask(question: str, model: str, config_flags: list[str], extra_bufts: str = "auto") -> dict:
    cmd = ["rag", "ask", question, "--no-cache", "--json", "--set", f"embedded_model={model}",
           "--set", f"llama_extra_bufts={extra_bufts}", *config_flags]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        return {"wall_s": wall, "outcome": "error", "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    data = json.loads(proc.stdout)
    steps = data["trace"]["steps"]
    totals = data["trace"].get("totals") or {}
    return {"wall_s": wall, "outcome": data["trace"].get("outcome") or ("refused" if data["refused"] else "answered"),
            "lm_s": sum((s.get("latency_ms") or 0) for s in steps if s["node"] != "retrieve") / 1000,
            "steps": len(steps), "tokens_in": totals.get("tokens_in"), "tokens_out": totals.get("tokens_out")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="qwen2.5-coder-1.5b,qwen2.5-coder-0.5b")
    parser.add_argument("--n", type=int, default=10, help="answerable test questions per model")
    parser.add_argument("--golden", default=str(ROOT / "golden" / "python_ref.jsonl"))
    parser.add_argument("--no-reflection", action="store_true", help="baseline: retrieve then answer")
    parser.add_argument("--extra-bufts", default="auto", help="llama_extra_bufts values to compare, e.g. on,off")
    parser.add_argument("--compare", help="a setting and the values to compare, e.g. id_choices=true,false")
    parser.add_argument("--artifact", help="run a compiled program (artifacts/NAME), as rag ask --artifact")
    parser.add_argument("--uncompiled", action="store_true",
                        help="with --artifact: also run the uncompiled program (rag ask --no-artifact), taking turns")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.uncompiled and not args.artifact:
        parser.error("--uncompiled adds a run without the artifact; give --artifact NAME too")
    items = [it for it in load_golden(args.golden) if it.split == "test" and it.type == "answerable"][: args.n]
    base = ["--no-reflection"] if args.no_reflection else []
    flags = base + (["--artifact", args.artifact] if args.artifact else [])
    key, _, values = (args.compare or "").partition("=")
    if args.compare and not (key and values):
        parser.error(f"--compare {args.compare!r}: give a setting and its values, e.g. id_choices=true,false")
    settings = [f"{key}={v}" for v in values.split(",")] if args.compare else [""]
    if args.uncompiled:
        settings = [UNCOMPILED, *settings]
    variants = [(model, bufts, setting) for model in args.models.split(",") for bufts in args.extra_bufts.split(",")
                for setting in settings]
    results: dict[tuple[str, str, str], list[dict]] = {v: [] for v in variants}
    for i, it in enumerate(items, 1):
        # the order alternates question by question (A B, then B A), so no variant always runs first
        for model, bufts, setting in (variants if i % 2 else variants[::-1]):
            if setting == UNCOMPILED:
                res = ask(it.question, model, [*base, "--no-artifact"], bufts)
            else:
                res = ask(it.question, model, flags + (["--set", setting] if setting else []), bufts)
            results[(model, bufts, setting)].append(res)
            print(f"[{model}, extra_bufts={bufts}{', ' + setting if setting else ''}] {i}/{len(items)} {res['wall_s']:.1f} s {res['outcome']} "
                  f"({res.get('steps', '?')} steps, {res.get('tokens_out', '?')} output tokens)", file=sys.stderr, flush=True)
    rows = []
    for (model, bufts, setting), done in results.items():
        walls = [r["wall_s"] for r in done]
        lm = [r["lm_s"] for r in done if "lm_s" in r]
        outcomes = {o: sum(r["outcome"] == o for r in done) for o in ("answered", "refused", "error")}
        outs = [r["tokens_out"] for r in done if r.get("tokens_out") is not None]
        outcomes["tokens_out"] = statistics.mean(outs) if outs else float("nan")
        steps = [r["steps"] for r in done if "steps" in r]
        outcomes["steps"] = statistics.mean(steps) if steps else float("nan")
        label = model if len(args.extra_bufts.split(",")) == 1 else f"{model}, extra buffer types {bufts}"
        label += f", {setting}" if len(settings) > 1 else ""
        rows.append((label, len(walls), percentile(walls, 0.5), percentile(walls, 0.95), statistics.mean(walls),
                     statistics.mean(lm) if lm else float("nan"), outcomes))
    base = rows[0][2]
    lines = [f"`rag ask` wall seconds per answerable test question, cold start included "
             f"({'baseline, no reflection' if args.no_reflection else 'full: grade + answer'}; "
             f"{os.cpu_count()} cores; `python benchmarks/ask_latency.py {' '.join(sys.argv[1:])}`)", "",
             "| model | n | p50 s | p95 s | mean s | mean LM s | mean steps | mean output tokens | "
             "answered / refused / error | p50 ratio |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for model, n, p50, p95, mean, lm_mean, o in rows:
        lines.append(f"| {model} | {n} | {p50:.1f} | {p95:.1f} | {mean:.1f} | {lm_mean:.1f} | {o['steps']:.1f} | "
                     f"{o['tokens_out']:.0f} | {o['answered']} / {o['refused']} / {o['error']} | {p50 / base:.2f} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
