"""VagueQuestionDrafter: a question in a user's loose words about a fact one passage states."""

import dspy


class VagueQuestionDrafter(dspy.Signature):
    """Write one question about a fact the passage states, worded the way a user who does not know
    the documents' terms would ask it: loose, everyday words, the symptom or the goal rather than the
    name the documents use, and none of the passage's distinctive phrases.

    The passage must still answer the question. The reference answer is short and says only what the
    passage states."""

    passage: str = dspy.InputField(desc="one passage of the documents, headed by its document and section")
    question: str = dspy.OutputField(desc="one loosely worded question the passage answers", max_length=200)
    reference_answer: str = dspy.OutputField(desc="the answer in one or two sentences, from the passage only",
                                             max_length=300)
