"""GroundingCritic: is every claim of an answer stated in the evidence it was written from?"""

import dspy


class GroundingCritic(dspy.Signature):
    """Check the answer against the evidence: passages from documents and results of SQL queries.

    The answer is grounded when every claim in it (each number, name, date and rule) is stated in the
    evidence or follows directly from it, such as a count read from a SQL result. It is not grounded when
    any claim is missing from the evidence or contradicts it. Do not use what you know yourself."""

    question: str = dspy.InputField()
    evidence: str = dspy.InputField(desc="numbered passages and SQL results, each headed by its [id]")
    answer: str = dspy.InputField()
    reason: str = dspy.OutputField(desc="the unsupported claim, or 'every claim is supported'", max_length=120)
    grounded: bool = dspy.OutputField(desc="true only if every claim of the answer is in the evidence")
