"""Grader: is the retrieved context enough to answer the question?"""

import dspy


class Grader(dspy.Signature):
    """Judge whether the context passages contain the information needed to answer the question.

    Use only what the passages say, not what you know yourself. First name the subject of the
    question: the specific keyword, statement, operator, function, module or option it asks about,
    written as in the question. A passage counts only if it mentions that subject and directly states
    the answer; a passage on a related topic does not. Then list the ids of the passages that state
    the answer, say whether the context is relevant, and give a short reason."""

    question: str = dspy.InputField()
    context: str = dspy.InputField(desc="numbered passages, each headed by its [chunk id]")
    subject: str = dspy.OutputField(desc="the name the question asks about, in 1-4 words", max_length=60, default="")
    relevant_chunk_ids: list[str] = dspy.OutputField(desc="ids of the passages that state the answer, copied from the context; [] if none")
    relevant: bool = dspy.OutputField(desc="true only if a listed passage mentions the subject and states the answer")
    reason: str = dspy.OutputField(desc="a few words: what the passages say or what is missing", max_length=60)
