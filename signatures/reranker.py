"""Reranker: which of the retrieved passages answer the question, best first (listwise, one call)."""

import dspy


class Reranker(dspy.Signature):
    """Rank the numbered passages by how directly each answers the question.

    A passage ranks high only if it states the answer or the exact fact asked for; a passage that merely
    shares words or a topic with the question ranks low or is left out. List the numbers of the useful
    passages, most useful first."""

    question: str = dspy.InputField()
    passages: str = dspy.InputField(desc="numbered passages: [n] title, then text")
    ranking: list[int] = dspy.OutputField(desc="passage numbers, most useful first; leave out passages that do not help")
