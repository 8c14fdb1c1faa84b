"""What constrained decoding costs the embedded model, and what Sieve's lazy grammar check saves, side by side.

Run: python benchmarks/grammar_decode.py [--model qwen2.5-coder-1.5b] [--tokens 80] [--repeats 3]
                                         [--agent 0] [--out FILE]

Part 1, one prompt: four peers on one loaded model (the engine's own load: ``rag.lm.local.load_llama``), greedy,
the same ``max_tokens``, KV cache reset before each call, the peers taking turns: free text and a JSON-schema
grammar, each through llama-cpp-python's sampler chain and through ``rag.lm.sampling``'s greedy sampler (which
checks the grammar on the top token only). The table gives each peer's best decode speed, its ratio to the chain
with a grammar (what Sieve ran before), and whether its text equals the chain's.

Part 2, ``--agent N``: the first N dev questions of the golden set through the whole agent (grade, rewrite, answer),
once with ``llama_lazy_grammar`` on and once off, taking turns (which goes first alternates), the KV cache reset
before each run, the LM cache off. It reports the model seconds and output tokens of each, and how many runs took
the same decisions and wrote the same answer: the lazy check must change no token.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.agent_pairs import agent_pairs  # noqa: E402
from benchmarks.tables import emit  # noqa: E402
from rag.lm.grammar import json_grammar  # noqa: E402
from rag.lm.local import default_threads, load_llama  # noqa: E402
from rag.lm.models import DEFAULT_MODEL, model_path  # noqa: E402

SCHEMA = {"type": "object", "required": ["subject", "relevant", "answer"],
          "properties": {"subject": {"type": "string", "maxLength": 60}, "relevant": {"type": "boolean"},
                         "answer": {"type": "string", "maxLength": 600}}}
PROMPT = "Explain in detail what the Python nonlocal statement does, with an example. " * 3
PEERS = {  # name: (grammar?, lazy?)
    "free text, llama-cpp-python chain": (False, False),
    "free text, Sieve greedy": (False, True),
    "JSON grammar, llama-cpp-python chain": (True, False),
    "JSON grammar, Sieve lazy check": (True, True),
}
BASE = "JSON grammar, llama-cpp-python chain"


class SampleClock:
    """Time spent choosing tokens (``Llama.sample``: the sampler, not the model's forward pass) on one model."""

    def __init__(self, llm) -> None:
        self.seconds, self.tokens, inner = 0.0, 0, llm.sample

        def timed(*a, **kw):
            start = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                self.seconds += time.perf_counter() - start
                self.tokens += 1

        llm.sample = timed

    def take(self) -> dict[str, float]:
        out, self.seconds, self.tokens = {"sample_s": self.seconds, "sampled": self.tokens}, 0.0, 0
        return out


def one_prompt(args: argparse.Namespace) -> list[str]:
    llm, _ = load_llama(model_path(args.model), 4096)
    clock = SampleClock(llm)
    best: dict[str, float] = {}
    per_token: dict[str, float] = {}
    texts: dict[str, set[str]] = {}
    prompt_tokens = 0
    for rep in range(args.repeats):
        for name, (grammar, lazy) in PEERS.items():
            llm.reset()
            llm._sieve_lazy_grammar_on = lazy
            extra = {"grammar": json_grammar(SCHEMA)} if grammar else {}
            start = time.perf_counter()
            out = llm.create_chat_completion(messages=[{"role": "user", "content": PROMPT}], max_tokens=args.tokens,
                                             temperature=0.0, **extra)
            seconds = time.perf_counter() - start
            sampled, n = clock.take().values()
            per_token[name] = min(per_token.get(name, float("inf")), sampled / max(n, 1))
            usage = out["usage"]
            prompt_tokens = usage["prompt_tokens"]
            best[name] = max(best.get(name, 0.0), usage["completion_tokens"] / seconds)
            texts.setdefault(name, set()).add(out["choices"][0]["message"]["content"])
            print(f"repeat {rep + 1} {name}: {usage['completion_tokens']} tokens in {seconds:.1f} s", file=sys.stderr)
    same = {name: texts[name] == texts[f"{name.split(',')[0]}, llama-cpp-python chain"] for name in PEERS}
    lines = [f"## One prompt ({args.model}, {default_threads()} threads, {prompt_tokens}-token prompt, "
             f"{args.tokens} tokens out, best of {args.repeats})", "",
             "| peer | tokens/s (incl. prompt) | relative to the chain with a grammar | ms choosing each token | "
             "text equals the chain's |", "| --- | ---: | ---: | ---: | --- |"]
    lines += [f"| {name} | {speed:.2f} | {speed / best[BASE]:.2f}x | {per_token[name] * 1000:.1f} | "
              f"{'yes' if same[name] else 'NO'} |" for name, speed in best.items()]
    return lines


def agent_runs(args: argparse.Namespace) -> list[str]:
    base, items, totals, same = agent_pairs("llama_lazy_grammar", (True, False), args.agent, probes=(SampleClock,))
    on, off = totals[True], totals[False]
    lines = [f"## The agent on {len(items)} dev questions ({base.embedded_model}, LM cache off)", "",
             "| llama_lazy_grammar | LM calls | output tokens | LM seconds | LM speed-up | seconds choosing tokens | "
             "ms per token chosen |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, t in (("off (llama-cpp-python's chain)", off), ("on (default)", on)):
        lines.append(f"| {name} | {t['calls']:.0f} | {t['out']:.0f} | {t['lm_s']:.1f} | {off['lm_s'] / t['lm_s']:.2f}x | "
                     f"{t['sample_s']:.2f} | {t['sample_s'] / max(t['sampled'], 1) * 1000:.1f} |")
    lines += ["", f"Runs with the same steps, verdicts, rewrites, chosen passages and answer: {same} of {len(items)}."]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--tokens", type=int, default=80)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--agent", type=int, default=0, help="dev questions to run through the agent both ways")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = ["# Constrained decoding: llama-cpp-python's sampler chain against Sieve's lazy grammar check", ""]
    lines += one_prompt(args)
    if args.agent:
        lines += [""] + agent_runs(args)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
