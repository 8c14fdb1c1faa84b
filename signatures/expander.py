"""Expander: other phrasings of a question, so retrieval is not held to the asker's vocabulary."""

import dspy


class Expander(dspy.Signature):
    """Write alternative search queries for the question, as the documentation itself would phrase it.

    Each query should say the same need in other words: the technical terms, names of statements, commands,
    options or policy terms a reference text would use, which the question may not contain. Keep each query
    short. Do not answer the question."""

    question: str = dspy.InputField()
    n: int = dspy.InputField(desc="how many queries to write")
    queries: list[str] = dspy.OutputField(desc="n short, keyword-rich search queries, each different")
