"""The critic's number check (rag.agent.critique.unsupported_numbers): what counts as a number the evidence holds."""

from __future__ import annotations

import pytest

from rag.agent.stated import cited_for_values, unsupported_numbers

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


@pytest.mark.parametrize("answer, hollow", [
    ("The credit limit on the Orchid Pharma GmbH account is [sql:1].", ["account is [sql:1]"]),
    ("The claim CL0004 was paid out on [sql:1].", ["out on [sql:1]"]),
    ("The account manager for Umber Pharma NV is [policies/weight_limits.md#000]. The rest.",
     ["NV is [policies/weight_limits.md#000]"]),
    ("The accounts on stop are [policies/credit_terms.md#001] and [policies/claims.md#000].",
     ["stop are [policies/credit_terms.md#001]"]),
    ("The cancellation fee is 10, as stated in [policies/weight_limits.md#000].", []),  # where it is stated
    ("Abnormal loads are described in [policies/weight_limits.md#001] and need a quote.", []),
    ("Claims must be filed within 30 days [policies/claims.md#000].", []),  # the value, then its citation
    ("The limit is EUR 50,000 [policies/credit_terms.md#000].", []),
    ("According to [policies/claims.md#000], claims over EUR 5,000 need approval.", []),
    ("The driver of S01754, the express that went missing, was [sql:1].", ["missing, was [sql:1]"]),  # a comma
    ("Zephyr Chemicals S.L. has been a customer of ours since [sql:1].", ["ours since [sql:1]"]),  # a start date
    ("Accounts have been on stop since [policies/credit_terms.md#001] says so.", []),  # not ending its clause
    ("The invoice number for S01367 (Milan to Porto, EUR 2,016.21 freight) is [sql:1].",
     ["freight) is [sql:1]"]),  # a closing bracket before the verb
    ('The status called "lost" is [sql:1].', ['lost" is [sql:1]']),
    ("See [policies/claims.md#000] at [policies/claims.md#001].", []),  # a citation's id is not a word before it
])
def test_a_citation_standing_where_the_value_belongs_is_found(answer, hollow):
    assert cited_for_values(answer) == hollow
