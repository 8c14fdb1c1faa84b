"""CategoryChooser: which of the collection's categories a question is about, to search those first."""

import dspy


class CategoryChooser(dspy.Signature):
    """Choose the categories of documents that would answer the question.

    Pick at most two, copied exactly from the list given; pick the one that fits best first. If none fits,
    return an empty list."""

    question: str = dspy.InputField()
    categories: list[str] = dspy.InputField(desc="the categories the collection has")
    chosen: list[str] = dspy.OutputField(desc="at most two categories from the list, best first; [] if none fits")
