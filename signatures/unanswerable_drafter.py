"""UnanswerableDrafter: a plausible question on the documents' subject that they do not answer."""

import dspy


class UnanswerableDrafter(dspy.Signature):
    """Write one question that a user of these documents could plausibly ask, on the same subject as
    the passage, but that neither the passage nor any section of its document answers.

    Ask about a neighbouring detail the document does not cover (another option, a number, a case or
    a tool it never mentions), not about something unrelated and not about anything the section titles
    suggest it covers. Say in a few words what the document lacks to answer it."""

    passage: str = dspy.InputField(desc="one passage of the documents, headed by its document and section")
    sections: str = dspy.InputField(desc="the titles of every section of the passage's document")
    question: str = dspy.OutputField(desc="one plausible question the document does not answer", max_length=200)
    missing: str = dspy.OutputField(desc="a few words: what the document lacks to answer it", max_length=120)
