"""Short names (rag.data.shortnames) over the ops demo's real tables: a name said by its leading words."""

from __future__ import annotations

import pytest

from rag.data.schemalink import Vocabulary, column_values, read_cues
from rag.data.shortnames import ShortNames
from rag.data.valuelinks import ValueLinks


@pytest.fixture(scope="module")
def tables(ops_tables):
    record, warehouse = ops_tables
    values = column_values(record, warehouse)
    return record, warehouse, values, ShortNames.from_record(record, values)


def unique_prefix(names: list[str], n: int) -> tuple[str, str]:
    """A name whose first ``n`` words start no other name, and those words."""
    for name in names:
        head = " ".join(name.split()[:n])
        if len(name.split()) > n and sum(other.startswith(head + " ") or other == head for other in names) == 1:
            return name, head
    raise AssertionError(f"no name with a unique {n}-word prefix")


def test_the_leading_words_of_one_name_link_to_it_and_shared_ones_do_not(tables):
    _, warehouse, values, short = tables
    customers = values["customers.name"]
    name, head = unique_prefix(customers, 2)
    assert [(text, cols) for _, _, text, cols in short.spans(f"How many claims has {head} filed?")] == [
        (name, ["customers.name"])]
    first = next(n.split()[0] for n in customers if sum(o.split()[0] == n.split()[0] for o in customers) > 1)
    assert short.spans(f"What did {first} ship?") == []  # "Birch" starts several customers: no link
    assert short.spans("How many claims has Nobody Foods filed?") == []


def test_one_word_links_capitalised_inside_the_question_or_in_one_typed_all_lower_case(tables):
    _, _, values, short = tables
    carriers = values["carriers.name"]
    name, head = unique_prefix(carriers, 1)
    assert [text for _, _, text, _ in short.spans(f"Is {head} under review?")] == [name]
    assert short.spans(f"Is {head.lower()} under review?") == []  # the writer uses capitals, not for this word
    assert short.spans(f"{head} shipments in May") == []  # the first word is capitalised anyway
    # typed without any capital, case tells nothing: the unique leading word links, first or not
    assert [text for _, _, text, _ in short.spans(f"is {head.lower()} under review?")] == [name]
    assert [text for _, _, text, _ in short.spans(f"{head.lower()} shipments in may")] == [name]
    assert short.spans("how many express claims in may") == []  # a table or category word never links
    assert ("express",) not in short.forms and ("claim",) not in short.forms


def test_the_sql_writer_is_told_the_stored_name_and_its_key(tables):
    record, warehouse, values, short = tables
    name, head = unique_prefix(values["customers.name"], 2)
    key = warehouse.run(f"SELECT customer_id FROM customers WHERE name = '{name}'").rows[0][0]
    line = f"'{name}' is a value of customers.name (its customer_id is '{key}')"
    on = ValueLinks.from_record(record, warehouse, values, names_only=True, short=short)
    off = ValueLinks.from_record(record, warehouse, values, names_only=True)
    assert on.lines(f"What credit limit has {head} got?") == [line]
    assert off.lines(f"What credit limit has {head} got?") == []
    assert on.lines(f"What credit limit has {name} got?") == [line]  # the whole name as before


def test_the_cue_router_counts_a_short_name_as_naming_a_record(tables):
    record, warehouse, values, _ = tables
    name, head = unique_prefix(values["customers.name"], 2)
    question = f"What credit limit and payment terms has {head} got?"
    assert read_cues(question, Vocabulary.from_record(record, values)).route == "docs"
    cues = read_cues(question, Vocabulary.from_record(record, values, short_names=True))
    assert cues.route == "data" and head.lower() in cues.reason


def test_a_short_name_ending_in_a_category_word_still_names_a_record(tables):
    """"Alder Chemicals": "chemicals" is also a customer segment; the name wins over the category, as for the whole
    name."""
    record, _, values, _ = tables
    vocab = Vocabulary.from_record(record, values, short_names=True)
    segment_named = [(k, v) for k, v in sorted(vocab.short.forms.items())
                     if len(k) == 2 and v[1] == ["customers.name"] and (k[1],) in vocab.values]
    assert segment_named, "the demo has customers named after their segment"
    (head, _), = segment_named[:1]
    cues = read_cues(f"What credit limit and payment terms has {' '.join(w.capitalize() for w in head)} got?", vocab)
    assert cues.route == "data" and " ".join(head) in cues.reason
