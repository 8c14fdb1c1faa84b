"""Embedded LM latency: a grader call and an answer call with ~1,200-token prompts, cold and warm.

Run: python benchmarks/lm.py [--repeats 3] [--out benchmarks/results/lm.md]

Rows: "cold" = first call in this process (model load shown separately; empty KV cache,
grammar compiled); "warm" = later calls with a different question over the same passages
(llama.cpp reuses the shared prompt prefix); "raw llama.cpp" = the same prompt sent straight to
``Llama.create_chat_completion`` without DSPy (the peer; ratio = Sieve/raw).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dspy  # noqa: E402

from rag.config import Settings  # noqa: E402
from rag.lm import grammar as json_grammars  # noqa: E402
from rag.lm import local  # noqa: E402
from rag.lm.configure import build_lm  # noqa: E402

PASSAGE = ("The Forth Bridge is a cantilever railway bridge across the Firth of Forth in the east of "
           "Scotland, 9 miles west of central Edinburgh. Construction began in 1882 and it opened on 4 March "
           "1890. It spans 2,467 m and carries two tracks about 46 m above high tide.")


class Grade(dspy.Signature):
    """Decide whether the retrieved context is enough to answer the question."""

    question: str = dspy.InputField()
    context: str = dspy.InputField()
    relevant: bool = dspy.OutputField()
    reasons: list[str] = dspy.OutputField(desc="at most two short reasons")


class Answer(dspy.Signature):
    """Answer the question from the context only, citing passage numbers like [1]."""

    question: str = dspy.InputField()
    context: str = dspy.InputField()
    answer: str = dspy.OutputField()


QUESTIONS = ["When did the Forth Bridge open?", "How long is the Forth Bridge?", "Where is the Forth Bridge?",
             "How high above the tide are the tracks?"]


def context_of(n: int) -> str:
    return "\n\n".join(f"[{i}] {PASSAGE}" for i in range(1, n + 1))


def timed_call(lm, signature, question, context):
    start = time.perf_counter()
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        dspy.Predict(signature)(question=question, context=context)
    seconds = time.perf_counter() - start
    usage = lm.history[-1]["usage"]
    return seconds, usage["prompt_tokens"], usage["completion_tokens"]


def raw_call(llama, messages, max_tokens, grammar=None):
    start = time.perf_counter()
    out = llama.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=0.0, seed=0,
                                       grammar=grammar)
    return time.perf_counter() - start, out["usage"]["prompt_tokens"], out["usage"]["completion_tokens"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="warm calls per row (median reported)")
    parser.add_argument("--passages", type=int, default=12, help="passages in the context (12 ~ 1,200 prompt tokens with the grader instructions)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/lm.md"))
    args = parser.parse_args()

    settings = Settings(cache=False)
    start = time.perf_counter()
    lm = build_lm("embedded", settings)
    llama = lm.engine.load()
    load_s = time.perf_counter() - start
    context = context_of(args.passages)
    rows = []
    for name, signature in (("grader", Grade), ("answer", Answer)):
        llama.reset()
        mark = len(lm.history)
        cold = timed_call(lm, signature, QUESTIONS[0], context)
        warm = [timed_call(lm, signature, QUESTIONS[1 + i % 3], context) for i in range(args.repeats)]
        # the peer: the exact messages DSPy sent, in the same order, with the same bounded grammar
        entries = lm.history[mark:]
        schema = json_grammars.bound_schema(entries[0]["kwargs"]["response_format"].model_json_schema(),
                                    settings.embedded_max_tokens)
        grammar = json_grammars.json_grammar(schema)
        llama.reset()
        raw = [raw_call(llama, entry["messages"], settings.embedded_max_tokens, grammar) for entry in entries]
        med = lambda calls: tuple(statistics.median(c[i] for c in calls) for i in range(3))  # noqa: E731
        for label, (sec, pt, ct), peer in (("cold", cold, raw[0]), ("warm", med(warm), med(raw[1:]))):
            rows.append((name, label, pt, ct, sec, (pt + ct) / sec, ct / sec, peer[0], sec / peer[0]))
            print(f"{name} {label}: {sec:.2f}s ({pt:.0f} prompt tok, {ct:.0f} output tok)", file=sys.stderr, flush=True)

    load = os.getloadavg()[0]
    lines = [
        f"Machine: {os.cpu_count()} CPUs, 1-min load average at the end {load:.1f} (other work running inflates times).",
        f"Embedded model: {lm.engine.model_path.name}, n_ctx={settings.n_ctx}, CPU threads={llama.n_threads}, "
        f"model load {load_s:.2f}s (once per process).",
        "",
        "| call | run | prompt tok | output tok | Sieve latency s | total tok/s | output tok/s | raw llama.cpp s | ratio Sieve/raw |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, label, pt, ct, sec, tps, ops, raw, ratio in rows:
        lines.append(f"| {name} | {label} | {pt:.0f} | {ct:.0f} | {sec:.2f} | {tps:.0f} | {ops:.1f} | {raw:.2f} | {ratio:.2f} |")
    lines += ["", "warm = median of %d calls with other questions over the same passages (shared prefix reused);"
              % args.repeats, "raw llama.cpp = the same messages, same order, same bounded grammar, straight to "
              "Llama.create_chat_completion (no DSPy); total tok/s = (prompt + output) / latency.", f"engine stats: {local.stats()}"]
    text = "\n".join(lines)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("# benchmarks/lm.py\n\n" + text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
