"""HyDE: a hypothetical passage whose embedding stands in for the question's (Gao et al., 2022)."""

import dspy


class HypotheticalPassage(dspy.Signature):
    """Write a short passage, as it might appear in the documentation, that answers the question.

    Use the vocabulary such documentation uses. It is only used to search for real passages and is never shown
    to anyone, so write plainly and do not hedge; two to four sentences."""

    question: str = dspy.InputField()
    passage: str = dspy.OutputField(desc="two to four sentences in the documentation's style")
