"""Rewriter: a better search query after a failed retrieval."""

import dspy


class Rewriter(dspy.Signature):
    """Write one new search query to find passages in a technical knowledge base that answer the question.

    The queries already tried did not retrieve the answer; the grader's reason says what was missing.
    Use the specific technical terms the documentation would use (names of statements, operators,
    methods, keywords), not the wording of the queries already tried. Return only the query."""

    question: str = dspy.InputField()
    tried_queries: list[str] = dspy.InputField(desc="queries already used, in order")
    grader_reason: str = dspy.InputField(desc="why the last retrieved passages were judged not relevant")
    query: str = dspy.OutputField(desc="a short keyword-rich search query")
