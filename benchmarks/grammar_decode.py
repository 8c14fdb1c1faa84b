"""What a JSON-schema grammar costs the embedded model's decoding: the same prompt, free text vs constrained.

Run: python benchmarks/grammar_decode.py [--model qwen2.5-coder-1.5b] [--tokens 80] [--repeats 3] [--out FILE]

Each repeat runs both peers back to back on one loaded model (KV cache reset before each call), greedy, the same
``max_tokens``; the table gives the best decode speed of each and their ratio, so machine load affects both alike.
The grammar is the one Sieve's engine compiles for a three-field object (``rag.lm.local._grammar``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.lm.local import _grammar, default_threads  # noqa: E402
from rag.lm.models import DEFAULT_MODEL, model_path  # noqa: E402
from benchmarks.tables import emit  # noqa: E402

SCHEMA = {"type": "object", "required": ["subject", "relevant", "answer"],
          "properties": {"subject": {"type": "string", "maxLength": 60}, "relevant": {"type": "boolean"},
                         "answer": {"type": "string", "maxLength": 600}}}
PROMPT = "Explain in detail what the Python nonlocal statement does, with an example. " * 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--tokens", type=int, default=80)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from llama_cpp import Llama

    threads = default_threads()
    llm = Llama(model_path=str(model_path(args.model)), n_ctx=2048, n_threads=threads, n_threads_batch=threads,
                verbose=False)
    peers = {"free text": {}, "JSON-schema grammar": {"grammar": _grammar(SCHEMA)}}
    best: dict[str, float] = {}
    prompt_tokens = 0
    for rep in range(args.repeats):
        for name, extra in peers.items():
            llm.reset()
            start = time.perf_counter()
            out = llm.create_chat_completion(messages=[{"role": "user", "content": PROMPT}], max_tokens=args.tokens,
                                             temperature=0.0, **extra)
            seconds = time.perf_counter() - start
            usage = out["usage"]
            prompt_tokens = usage["prompt_tokens"]
            speed = usage["completion_tokens"] / seconds
            best[name] = max(best.get(name, 0.0), speed)
            print(f"repeat {rep + 1} {name}: {usage['completion_tokens']} tokens in {seconds:.1f} s", file=sys.stderr)
    base = best["free text"]
    lines = [f"# Decoding with and without a grammar ({args.model}, {threads} threads, {prompt_tokens}-token prompt, "
             f"{args.tokens} tokens out, best of {args.repeats})", "",
             "| peer | tokens/s (incl. prompt) | relative to free text |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {speed:.2f} | {speed / base:.2f}x |" for name, speed in best.items()]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
