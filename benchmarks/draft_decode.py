"""What prompt-lookup drafting (``llama_draft_tokens``) saves the embedded model in the agent, side by side.

Run: python benchmarks/draft_decode.py [--agent 8] [--values 0,8] [--repeats 5] [--out FILE]

Part 1, what a decode step costs by the number of tokens it evaluates: on the default model after a 1,100-token
prompt (this README's text), one llama.cpp batch of 1, 2, 3, 4, 6 and 9 tokens with logits at every position, as
drafting evaluates them, median of ``--repeats``. Drafting can only pay where a batch of n costs well under n
single steps.

Part 2 (``--agent N``, 0 skips it): the first N dev questions of the golden set through the whole agent (grade, rewrite, answer) once per value of
``llama_draft_tokens`` (0 = one token per decode step), taking turns on one loaded model, the KV cache reset
before each run, the LM cache off (``benchmarks/agent_pairs.py``). Per value: LM calls, output tokens, model
seconds and their ratio to 0, decode steps (llama.cpp evaluations after the prompt) and output tokens per step,
and how many questions took the same decisions and wrote the same answer as with 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.agent_pairs import agent_pairs  # noqa: E402
from benchmarks.tables import emit  # noqa: E402

PROMPT_MIN = 34  # an evaluation of more tokens than this is a prompt (drafts are at most 32 + the chosen token)


class StepCounter:
    """Decode steps on one model: ``Llama.eval`` calls after the prompt (a token, or a token and its guesses)."""

    def __init__(self, llm) -> None:
        self.steps, self.evaluated, inner = 0, 0, llm.eval

        def counted(tokens):
            if len(tokens) < PROMPT_MIN:
                self.steps += 1
                self.evaluated += len(tokens)
            return inner(tokens)

        llm.eval = counted

    def take(self) -> dict[str, float]:
        out, self.steps, self.evaluated = {"steps": self.steps, "evaluated": self.evaluated}, 0, 0
        return out


def batch_cost(repeats: int) -> list[str]:
    from rag.config import load_settings
    from rag.lm.local import default_threads, load_llama
    from rag.lm.models import model_path

    settings = load_settings({})
    llm, _ = load_llama(model_path(settings.embedded_model), settings.n_ctx, settings.n_threads,
                        settings.llama_extra_bufts)
    prompt = llm.tokenize((ROOT / "README.md").read_text(encoding="utf-8")[:6000].encode("utf-8"))[:1100]
    llm.reset()
    llm.eval(prompt)
    past = llm.n_tokens
    seconds: dict[int, list[float]] = {}
    for _ in range(repeats):
        for n in (1, 2, 3, 4, 6, 9):
            llm._ctx.kv_cache_seq_rm(-1, past, -1)
            start = time.perf_counter()
            llm._batch.set_batch(batch=prompt[100:100 + n], n_past=past, logits_all=True)
            llm._ctx.decode(llm._batch)
            seconds.setdefault(n, []).append(time.perf_counter() - start)
    llm.reset()
    one = statistics.median(seconds[1])
    lines = [f"## One decode step by the tokens it evaluates ({settings.embedded_model}, {default_threads()} threads, "
             f"after a {len(prompt)}-token prompt, median of {repeats})", "",
             "| tokens in the step | ms | ms per token | relative to 1 token |", "| ---: | ---: | ---: | ---: |"]
    for n, values in seconds.items():
        ms = statistics.median(values) * 1000
        lines.append(f"| {n} | {ms:.1f} | {ms / n:.1f} | {ms / 1000 / one:.2f}x |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", type=int, default=8, help="dev questions to run through the agent")
    parser.add_argument("--values", default="0,8", help="llama_draft_tokens values, comma-separated; the first is the base")
    parser.add_argument("--repeats", type=int, default=5, help="repeats of each batch size in part 1")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    values = [int(v) for v in args.values.split(",")]
    lines = ["# Prompt-lookup drafting", ""] + batch_cost(args.repeats)
    if args.agent:
        lines += [""] + agent_lines(values, args.agent)
    emit(lines, args.out)


def agent_lines(values: list[int], n: int) -> list[str]:
    base, items, totals, same = agent_pairs("llama_draft_tokens", values, n, probes=(StepCounter,))
    first = totals[values[0]]
    lines = [f"## The agent on {len(items)} dev questions ({base.embedded_model}, LM cache off, "
             f"values taking turns)", "",
             "| llama_draft_tokens | LM calls | output tokens | LM seconds | speed-up | decode steps | "
             "output tokens per step | tokens evaluated per step |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for value in values:
        t = totals[value]
        lines.append(f"| {value} | {t['calls']:.0f} | {t['out']:.0f} | {t['lm_s']:.1f} | {first['lm_s'] / t['lm_s']:.2f}x | "
                     f"{t['steps']:.0f} | {t['out'] / max(t['steps'], 1):.2f} | {t['evaluated'] / max(t['steps'], 1):.2f} |")
    lines += ["", f"Questions with the same steps, verdicts, rewrites, chosen passages and answer under every value: "
              f"{same} of {len(items)}."]
    return lines


if __name__ == "__main__":
    main()
