"""Where one question's time goes in the embedded engine: prompt reading, decoding, sampling, the rest.

Run: python benchmarks/profile_question.py ["What does the nonlocal statement do?"] [--out FILE]

Builds the agent as ``rag ask`` does (uncompiled, LM cache off), loads the model first (so the load is not
counted), then answers one question with llama-cpp-python's ``eval`` (batched prompt tokens vs single decode
steps), Sieve's sampler and ``create_chat_completion`` timed around it. What the calls take beyond eval and
sampling is Python around llama.cpp. One warm process, one question: a profile, not a benchmark.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402
from rag.agent.program import build_program  # noqa: E402
from rag.config import load_settings  # noqa: E402
from rag.lm import local, sampling  # noqa: E402
from rag.lm.configure import configure_dspy  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="Does a break statement execute the else clause of the loop it leaves?")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = load_settings({"cache": False})
    configure_dspy(settings)
    program = build_program(settings, use_artifact=False)
    llama = local.load_llama(local.LlamaCppEngine().model_path, settings.n_ctx, settings.n_threads,
                             settings.llama_extra_bufts)[0]
    seconds: dict[str, float] = collections.defaultdict(float)
    counts: collections.Counter = collections.Counter()

    def timed(name, fn, count=lambda *a, **k: 1):
        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                seconds[name] += time.perf_counter() - start
                counts[name] += count(*a, **k)
        return wrapper

    eval_ = llama.eval
    llama.eval = lambda tokens: timed("eval, prompt tokens (batched)" if len(tokens) > 1 else "eval, decode steps",
                                      eval_, lambda t: len(t))(tokens)
    llama.create_chat_completion = timed("create_chat_completion", llama.create_chat_completion)
    sampling.LazyGrammarSampler.sample = timed("sampling", sampling.LazyGrammarSampler.sample)
    start = time.perf_counter()
    pred = program.agent(question=args.question)
    total = time.perf_counter() - start
    lines = [f"One question in a warm process (`python benchmarks/profile_question.py`), {settings.embedded_model}, "
             f"question: {args.question!r}", "", "| step | prompt tokens | output tokens | s |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {s.node} | {s.tokens_in} | {s.tokens_out} | {(s.latency_ms or 0) / 1000:.2f} |" for s in pred.trace.steps]
    lines += [f"| whole question | | | {total:.2f} |", "", "| where | s | count | ms each |", "| --- | ---: | ---: | ---: |"]
    for name in ("eval, prompt tokens (batched)", "eval, decode steps", "sampling", "create_chat_completion"):
        lines.append(f"| {name} | {seconds[name]:.2f} | {counts[name]} | {1000 * seconds[name] / max(counts[name], 1):.1f} |")
    rest = seconds["create_chat_completion"] - sum(seconds[n] for n in ("eval, prompt tokens (batched)",
                                                                         "eval, decode steps", "sampling"))
    lines.append(f"| create_chat_completion less eval and sampling (Python around llama.cpp) | {rest:.2f} | | |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
