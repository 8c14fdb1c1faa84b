"""The Judge: an LM that grades an answer against the reference and its context (used by ``rag eval``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import dspy

from rag.agent.context import format_context
from rag.usage.metering import metered_call
from signatures import Judge

NO_PASSAGES = "(no passages)"  # the context when an answer was shown no passages


class AnswerJudge:
    """``judge(question, reference, answer, passages) -> dict(correct, faithful, reason, latency_ms, ...)``.

    ``passages`` are what the answerer was shown, as (chunk_id, title, text). ``lm`` None = the configured LM.
    ``compiled_from`` names the artifact whose compiled judge (instructions and demos) was loaded, else None.
    """

    def __init__(self, lm: dspy.BaseLM | None = None):
        self.lm = lm
        self.predict = dspy.Predict(Judge)
        self.compiled_from: str | None = None

    def load_compiled(self, artifact: Any) -> None:
        """Load the compiled judge of ``artifact`` (rag.agent.artifacts.Artifact with a judge.json)."""
        from rag.agent import artifacts

        artifacts.apply(None, artifact, judge=self.predict)
        self.compiled_from = artifact.name

    @property
    def description(self) -> str:
        return f"compiled judge from artifact {self.compiled_from}" if self.compiled_from else "uncompiled judge"

    def __call__(self, question: str, reference: str, answer: str,
                 passages: Sequence[tuple[str, str, str]]) -> dict[str, Any]:
        hits = [SimpleNamespace(chunk_id=c, title=t, text=x) for c, t, x in passages]
        pred, stats = metered_call(self.predict, self.lm, question=question, reference_answer=reference or "",
                                   candidate_answer=answer, context=format_context(hits) or NO_PASSAGES)
        return {"correct": bool(pred.correct), "faithful": bool(pred.faithful), "reason": str(pred.reason or ""),
                "latency_ms": stats.latency_ms, "tokens_in": stats.tokens_in, "tokens_out": stats.tokens_out,
                "cost": stats.cost, "model": stats.model, "cached": stats.cached}


def answer_passages(prediction: Mapping[str, Any], chunk_text: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """The (id, title, text) passages the answer step was shown, titles taken from the retrieval hits."""
    steps = prediction["trace"]["steps"]
    titles = {h["chunk_id"]: h.get("title") or "" for s in steps if s["node"] == "retrieve" for h in s.get("hits") or []}
    answer = next((s for s in steps if s["node"] == "answer"), None)
    ids = list(answer.get("shown_ids") or []) if answer else []
    return [(cid, titles.get(cid, ""), chunk_text.get(cid, "")) for cid in ids]
