"""rag.agent.stated: whether an answer from the passages states the quantity its question asks for (the critic's
``quantity`` check, an option), and the check at the critic, scripted with no model call."""

from __future__ import annotations

import pytest

from rag.agent.stated import figures, unstated


@pytest.mark.parametrize("question, answer", [
    # no figure at all: the nearest passage instead
    ("How many deliveries got refused by the consignee last year?",
     "A consignee who refuses a delivery must state the reason to the crew."),
    # only the question's own figure
    ("What was the fuel surcharge percentage before it was set at 12.5%?", "The surcharge was 12.5% before it was set."),
    # a figure in another unit than the one asked
    ("How many hours of training does someone need before they can get a forklift certificate?",
     "Only certified operators may drive a forklift, and the certificate is renewed every 3 years."),
    ("What's the max weight per pallet position on the racking?", "Pallets may be stacked no more than 3 levels high."),
    # a year is not a figure, nor are the digits of an id or a citation
    ("How many shipments did we move in 2023?", "In 2024 we moved shipments for S00072 [policies/returns.md#001]."),
])
def test_an_answer_without_the_quantity_asked_is_named(question, answer):
    assert unstated(question, answer) is not None


@pytest.mark.parametrize("question, answer", [
    ("How many days does finance have to pay an approved claim?", "Within 30 days of the invoice date [claims.md#001]."),
    ("How many days' notice do we need?", "Bookings need two working days' notice."),  # a number word, a word between
    ("How long do we keep invoices?", "Invoices are kept for seven years."),
    ("What percentage is the fuel surcharge?", "It is 12.5 percent."),
    ("How heavy may a pallet be?", "A pallet may weigh at most 1.2 t."),
    ("How many hours of training?", "The course is one 8-hour day."),
    ("Who is our safety officer?", "The managing director."),  # no quantity asked
    ("What is the speed limit in the warehouse?", "10 km/h."),
])
def test_an_answer_stating_the_quantity_asked_is_left_alone(question, answer):
    assert unstated(question, answer) is None


def test_figures_read_digits_and_number_words_with_the_words_after_them():
    assert figures("Bookings need two working days' notice; EUR 20 per kg; 12.5% in 2024, 1,000 kg") == [
        (2.0, "working days"), (20.0, "per kg"), (12.5, "%"), (1000.0, "kg")]


def test_the_critic_flags_an_answer_from_the_passages_only_with_the_check():
    """At the critic: flagged with a ``quantity`` critique step when the check is on and the answer cites no query
    result; left alone without the check, and when it cites one (a SQL result's figures are the other checks')."""
    from rag.agent.critique import Critic
    from rag.agent.trace import Trace
    from rag.retrieval.retriever import Hit

    question = "How much do we charge per day to store a refused delivery?"
    answer = "A refused delivery travels back to the origin depot [policies/returns.md#001]."
    passage = Hit(chunk_id="policies/returns.md#001", text="The shipment travels back to the origin depot.", title="",
                  source="", rank=0, score=0.0, stages={})
    result = Hit(chunk_id="sql:1", text="(no rows)", title="", source="", rank=0, score=0.0, stages={},
                 meta={"sql": "SELECT 1", "rows": []})
    trace = Trace(question)
    reason = Critic(checks="numbers+quantity").unstated(question, answer, [passage.chunk_id], [passage], trace)
    assert reason is not None and "how much" in reason.lower()
    assert [(s.node, s.check, s.verdict) for s in trace.steps] == [("critique", "quantity", False)]
    assert Critic(checks="numbers").unstated(question, answer, [passage.chunk_id], [passage], Trace(question)) is None
    assert Critic(checks="numbers+quantity").unstated(question, answer, ["sql:1"], [passage, result],
                                                      Trace(question)) is None
