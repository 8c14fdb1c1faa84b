"""Dev questions through the whole agent under two values of one setting, taking turns on one loaded model.

Used by the decoding benchmarks (``grammar_decode.py``, ``draft_decode.py``): each question runs once per value,
which value goes first alternating question by question, the KV cache reset before each run and the LM cache
off, so both values do their own work from the same start. Reports per value the LM calls, output tokens and
model seconds, plus what the caller's probes count, and how many questions took the same steps, verdicts,
rewrites, chosen passages and answer under both values.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]


def agent_pairs(setting: str, values: Sequence[Any], n: int,
                probes: Sequence[Callable[[Any], Any]] = ()) -> tuple[Any, list, dict[Any, dict[str, float]], int]:
    """(settings, items, totals per value, questions with identical runs). A probe is made from the loaded
    ``llama_cpp.Llama`` and has ``take() -> dict[str, float]``: what it counted since the last take."""
    from rag.agent.program import build_program
    from rag.config import load_settings
    from rag.eval.golden import load_golden
    from rag.lm.configure import configure_dspy
    from rag.lm.local import load_llama
    from rag.lm.models import model_path
    from rag.retrieval.retriever import Retriever

    base = load_settings({"cache": False})
    configure_dspy(base)
    retriever = Retriever.from_settings(base)
    programs = {v: build_program(base.replace(**{setting: v}), use_artifact=False, retriever=retriever) for v in values}
    llm, _ = load_llama(model_path(base.embedded_model), base.n_ctx, base.n_threads, base.llama_extra_bufts)
    counters = [make(llm) for make in probes]
    items = [item for item in load_golden(ROOT / "golden" / "python_ref.jsonl") if item.split == "dev"][:n]
    totals: dict[Any, dict[str, float]] = {v: collections.defaultdict(float) for v in values}
    same = 0
    for i, item in enumerate(items):
        seen = {}
        for value in (values if i % 2 == 0 else list(values)[::-1]):
            llm.reset()  # no KV-cache help from the other value's run of the same question
            for counter in counters:
                counter.take()
            pred = programs[value].agent(question=item.question)
            for counter in counters:
                for key, amount in counter.take().items():
                    totals[value][key] += amount
            steps = pred.trace.steps
            lm_steps = [s for s in steps if s.model]
            seconds = sum(s.latency_ms for s in lm_steps) / 1000
            totals[value]["lm_s"] += seconds
            totals[value]["out"] += sum(s.tokens_out or 0 for s in lm_steps)
            totals[value]["calls"] += len(lm_steps)
            seen[value] = ([(s.node, s.verdict, s.reason, s.subject, s.rewrite, s.answer, tuple(s.chosen_ids))
                            for s in steps], pred.answer)
            print(f"{item.id} {setting}={value}: {len(steps)} steps, {seconds:.1f} s, "
                  f"{sum(s.tokens_out or 0 for s in lm_steps)} tokens out", file=sys.stderr)
        same += all(run == seen[values[0]] for run in seen.values())
    return base, items, totals, same
