"""What prompt-lookup drafting (``llama_draft_tokens``) saves the embedded model in the agent, side by side.

Run: python benchmarks/draft_decode.py [--agent 8] [--values 0,8] [--out FILE]

The first N dev questions of the golden set through the whole agent (grade, rewrite, answer) once per value of
``llama_draft_tokens`` (0 = one token per decode step), taking turns on one loaded model, the KV cache reset
before each run, the LM cache off (``benchmarks/agent_pairs.py``). Per value: LM calls, output tokens, model
seconds and their ratio to 0, decode steps (llama.cpp evaluations after the prompt) and output tokens per step,
and how many questions took the same decisions and wrote the same answer as with 0.
"""

from __future__ import annotations

import argparse
import sys
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", type=int, default=8, help="dev questions to run through the agent")
    parser.add_argument("--values", default="0,8", help="llama_draft_tokens values, comma-separated; the first is the base")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    values = [int(v) for v in args.values.split(",")]
    base, items, totals, same = agent_pairs("llama_draft_tokens", values, args.agent, probes=(StepCounter,))
    first = totals[values[0]]
    lines = ["# Prompt-lookup drafting in the agent", "",
             f"## The agent on {len(items)} dev questions ({base.embedded_model}, LM cache off, "
             f"values taking turns)", "",
             "| llama_draft_tokens | LM calls | output tokens | LM seconds | speed-up | decode steps | "
             "output tokens per step | tokens evaluated per step |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for value in values:
        t = totals[value]
        lines.append(f"| {value} | {t['calls']:.0f} | {t['out']:.0f} | {t['lm_s']:.1f} | {first['lm_s'] / t['lm_s']:.2f}x | "
                     f"{t['steps']:.0f} | {t['out'] / max(t['steps'], 1):.2f} | {t['evaluated'] / max(t['steps'], 1):.2f} |")
    lines += ["", f"Questions with the same steps, verdicts, rewrites, chosen passages and answer under every value: "
              f"{same} of {len(items)}."]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
