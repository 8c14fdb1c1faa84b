"""Answerer: an answer drawn only from the graded-relevant context, with citations."""

import dspy


class Answerer(dspy.Signature):
    """Answer the question using only the context passages, and cite them.

    First list the ids of the passages you use, then write the answer. Put the id of each passage in
    square brackets after the sentence it supports, e.g. [topic#001]. Do not add facts that the
    passages do not state. Be brief: one to three sentences."""

    question: str = dspy.InputField()
    context: str = dspy.InputField(desc="numbered passages, each headed by its [chunk id]")
    cited_ids: list[str] = dspy.OutputField(desc="ids of the passages the answer uses, copied from the context")
    answer: str = dspy.OutputField(desc="a short answer with inline [chunk id] citations")
