"""QuestionDrafter: an answerable evaluation question drawn from one passage, with a grounded reference answer."""

import dspy


class QuestionDrafter(dspy.Signature):
    """Write one question that a user of these documents could ask and that the passage answers.

    The question asks for one fact the passage states plainly, in the words a user would use, and it
    makes sense without the passage (name the subject; never write "this passage" or "the text").
    The reference answer is short, says only what the passage states, and answers the question fully."""

    passage: str = dspy.InputField(desc="one passage of the documents, headed by its document and section")
    question: str = dspy.OutputField(desc="one question the passage answers", max_length=200)
    reference_answer: str = dspy.OutputField(desc="the answer in one or two sentences, from the passage only",
                                             max_length=300)
