"""SourceRouter: is the answer in the documents, in the data tables, or does it need both?"""

from typing import Literal

import dspy


class SourceRouter(dspy.Signature):
    """Decide where the answer to the question can be found.

    "docs": the documents (policies, rules, definitions, procedures written in prose).
    "data": the tables (counts, totals, averages, lists or values stored in rows).
    "both": a rule or number from the documents applied to the data, e.g. how many rows exceed a limit the
    policy sets. When unsure, choose "both"."""

    question: str = dspy.InputField()
    tables: str = dspy.InputField(desc="the data tables: names, columns, example values")
    reason: str = dspy.OutputField(desc="a few words: what the question asks for and where that is", max_length=80)
    source: Literal["docs", "data", "both"] = dspy.OutputField()
