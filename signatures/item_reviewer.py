"""ItemReviewer: should one drafted evaluation item be kept in the golden set (the automatic review pass)?"""

import dspy


class ItemReviewer(dspy.Signature):
    """Review one drafted item of an evaluation set and decide whether to keep it or reject it.

    Use only what the passages say, not what you know yourself. By the item's type:
    - answerable: keep it when the question is clear and makes sense on its own (it names its subject
      and never says "this passage" or "the text") and the passages support the reference answer;
      otherwise reject it.
    - vague: the question is loosely worded on purpose; keep it when the passages state its answer (the
      reference answer), even though the wording is loose; reject it when they do not.
    - unanswerable: the system should refuse it; reject it when the passages answer the question, keep it
      when they do not."""

    item_type: str = dspy.InputField(desc="answerable, vague or unanswerable")
    question: str = dspy.InputField()
    reference_answer: str = dspy.InputField()
    passages: str = dspy.InputField(desc="the item's gold and seed passages, each headed by its [id], document and section")
    reason: str = dspy.OutputField(desc="a few words: why the item is kept or rejected", max_length=160)
    keep: bool = dspy.OutputField(desc="true to keep the item, false to reject it")
