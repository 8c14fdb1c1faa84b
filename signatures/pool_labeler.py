"""PoolLabeler: does one pooled passage answer an evaluation question (gold labels for a drafted set)?"""

import dspy


class PoolLabeler(dspy.Signature):
    """Decide whether the passage answers the question.

    Use only what the passage says, not what you know yourself. The passage is relevant only if it
    states the answer to the question, or the key fact the answer needs; a passage on the same topic
    that does not state it is not relevant."""

    question: str = dspy.InputField()
    passage: str = dspy.InputField(desc="one passage, headed by its document and section")
    reason: str = dspy.OutputField(desc="a few words: what the passage states or lacks", max_length=120)
    relevant: bool = dspy.OutputField(desc="true only if the passage states the answer")
