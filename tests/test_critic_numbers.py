"""The critic's number check (rag.agent.critique.unsupported_numbers): what counts as a number the evidence holds."""

from __future__ import annotations

import pytest

from rag.agent.critique import unsupported_numbers

SQL = "SQL: SELECT AVG(weight_kg) AS kg, COUNT(*) AS n FROM shipments\nResult:\nkg | n\n1234.5678 | 2500"


@pytest.mark.parametrize("answer", [
    "The average is 1234.57 kg over 2500 shipments [sql:1].",  # rounded to the answer's precision
    "About 1235 kg on average, 2,500 shipments [sql:1].",  # rounded to a whole number; a thousands separator
    "Claims must be filed within 30 days [policies/claims.md#003].",  # the number is in the passage
    "In 2024 there were 2500 shipments.",  # the year is in the question
    "1. Check the 2500 shipments\n2. Report back",  # list numbering is not a claim
    "Half the claims, 40% of them, were rejected.",  # 0.4 in the evidence as a share
])
def test_numbers_the_question_or_evidence_hold_pass(answer):
    evidence = [SQL, "A claim must be filed within 30 days of delivery.", "rejected share: 0.4"]
    assert unsupported_numbers(answer, ["How many shipments were there in 2024?", *evidence]) == []


def test_a_number_nothing_holds_is_named_once_as_written():
    answer = "There are 2,512 shipments, 2,512 of them late, weighing 1234.7 kg [sql:1]; see [sql:2]."
    assert unsupported_numbers(answer, [SQL]) == ["2,512", "1234.7"]  # 1234.5678 is 1234.6 at one decimal


def test_an_answer_without_numbers_passes_and_citation_ids_are_not_numbers():
    assert unsupported_numbers("Photographs and the signed receipt [policies/claims.md#000].", []) == []
    assert unsupported_numbers("See [12] and [sql:3].", []) == []
