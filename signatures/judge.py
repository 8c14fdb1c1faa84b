"""Judge: is a candidate answer correct against the reference, and faithful to its context?"""

import dspy


class Judge(dspy.Signature):
    """Grade a candidate answer to the question.

    correct: the candidate states the same fact as the reference answer (wording may differ; extra
    detail is fine; a refusal, a different fact or a missing key part is not correct).
    faithful: every claim in the candidate is supported by the context passages."""

    question: str = dspy.InputField()
    reference_answer: str = dspy.InputField()
    candidate_answer: str = dspy.InputField()
    context: str = dspy.InputField(desc="the passages the candidate was given")
    correct: bool = dspy.OutputField()
    faithful: bool = dspy.OutputField()
    reason: str = dspy.OutputField(desc="a few words: how the candidate compares with the reference", max_length=120)
