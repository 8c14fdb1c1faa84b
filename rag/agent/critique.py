"""The grounding critic: after an answer, is every claim in the evidence it cites?

    answer -> critique -> done                        grounded
                       -> answer (with the reason) -> critique ...   at most ``retries`` times
                       -> done, low_confidence        still not grounded

This is the second bounded loop, after the grader's: the grader decides before answering whether the context can
answer at all; the critic checks what was written. It reads the passages and SQL results the answer cites (all that
were shown when it cites none), so a claim from the model's own memory is caught. A critic output that cannot be
used leaves the answer as it is, with a note: the critic may flag an answer, never lose one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dspy

from rag.agent.context import format_context
from rag.agent.trace import Step, Trace
from rag.errors import DataError, SieveError
from signatures import Answerer, GroundingCritic

Revision = Answerer.append(
    "feedback", dspy.InputField(desc="what a reviewer found unsupported in your previous answer"), type_=str,
).with_instructions(Answerer.instructions + "\n\nA reviewer found a claim of your previous answer unsupported by "
                    "the passages (feedback). Write the answer again, stating only what the passages say.")


class Critic(dspy.Module):
    def __init__(self, retries: int = 1):
        super().__init__()
        self.retries = retries  # answers written again after an ungrounded verdict; then the answer is flagged
        self.check = dspy.Predict(GroundingCritic)
        self.revise = dspy.Predict(Revision)

    def judge(self, question: str, answer: str, cited: list[str], hits: list[Any], trace: Trace,
              call: Callable[..., Any], max_chars: int | None = None) -> tuple[bool | None, str]:
        """(grounded, reason) for ``answer``, as a ``critique`` step; grounded is None when the critic's output could
        not be used."""
        step = trace.add(Step(node="critique", query=question))
        evidence = [h for h in hits if h.chunk_id in cited] or list(hits)
        step.shown_ids = [h.chunk_id for h in evidence]
        try:
            pred, stats = call("grader", self.check, [], question=question, answer=answer,
                               evidence=format_context(evidence, max_chars=max_chars))
        except SieveError as exc:
            if not isinstance(exc, DataError):
                raise
            pred, stats, problem = None, None, str(exc)
        except Exception as exc:  # an output the adapter cannot parse
            pred, stats, problem = None, None, " ".join(str(exc).split())[:200]
        if pred is None:
            step.notes.append(f"critic output unusable ({problem}); the answer is returned unchecked")
            return None, ""
        step.record(stats)
        step.verdict = bool(pred.grounded)
        step.reason = " ".join(str(pred.reason or "").split()) or None
        return step.verdict, step.reason or "the critic found a claim the evidence does not state"
