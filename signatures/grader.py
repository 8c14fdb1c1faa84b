"""Grader: is the retrieved context enough to answer the question?"""

import dspy


class Grader(dspy.Signature):
    """Judge whether the context passages contain the information needed to answer the question.

    Use only what the passages say, not what you know yourself. A passage counts only if it directly
    states the answer; a passage that merely shares words or the topic with the question does not.
    First list the ids of the passages that state the answer, then say whether the context is
    relevant, then give a short reason."""

    question: str = dspy.InputField()
    context: str = dspy.InputField(desc="numbered passages, each headed by its [chunk id]")
    relevant_chunk_ids: list[str] = dspy.OutputField(desc="ids of the passages that state the answer, copied from the context; [] if none")
    relevant: bool = dspy.OutputField(desc="true only if a listed passage states the answer")
    reason: str = dspy.OutputField(desc="a few words: what the passages say or what is missing", max_length=100)
