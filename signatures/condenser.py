"""Condenser: a follow-up question, made standalone from the conversation before it."""

import dspy


class FollowUpCondenser(dspy.Signature):
    """Rewrite the follow-up as one standalone question that can be understood without the conversation.

    Replace every reference to the conversation ("it", "that statement", "the second one", "what about
    classes?") with what it refers to, named as the conversation names it. Keep the follow-up's intent; do not
    answer it and do not add anything it does not ask. If it already stands alone, return it unchanged."""

    conversation: str = dspy.InputField(desc="the earlier turns, oldest first: each a question (Q:) and its answer (A:)")
    follow_up: str = dspy.InputField()
    question: str = dspy.OutputField(desc="the follow-up as one standalone question")
