"""The model-free router (rag.data.schemalink) over the ops demo's real tables and policies: the vocabulary it reads
from the database and the documents, and the route it gives each kind of question, near-misses included."""

from __future__ import annotations

import pytest

from rag.data import Warehouse, build_database, discover_tables, write_ops_demo
from rag.data.schemalink import Vocabulary, read_cues, terms, words


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    root = tmp_path_factory.mktemp("links")
    write_ops_demo(root / "demo")
    corpus = root / "demo" / "corpus"
    record = build_database(discover_tables(corpus), root / "tables.duckdb")
    documents = [p.read_text(encoding="utf-8") for p in sorted((corpus / "policies").glob("*.md"))]
    with Warehouse(root / "tables.duckdb") as warehouse:
        return Vocabulary.from_warehouse(record, warehouse, documents)


def test_the_vocabulary_comes_from_the_tables_and_the_documents(vocab):
    assert {"shipment", "claim", "customer", "carrier"} <= vocab.tables
    assert {"weight", "status", "credit", "limit", "date"} <= vocab.columns  # "date": a DATE column
    assert ("credit", "limit") in vocab.column_phrases
    assert ("rotterdam",) in vocab.names and ("open",) in vocab.values and ("open",) not in vocab.names
    assert {"cl9999", "s99999"} <= vocab.ids  # claim and shipment ids, from the examples
    assert ("fuel", "surcharge") in vocab.doc_terms
    assert ("shipment", "number") in vocab.column_phrases  # shipment_id
    assert all(map(vocab.explains, ["base", "depot", "gross", "gold-tier"]))  # "Base freight charge in euros, before
    assert not any(map(vocab.explains, ["surcharge", "dangerous"]))  # the fuel surcharge."; a flag's condition
    everywhere = Vocabulary.from_record({}, documents=[f"Acme Corp rule {n}: late fees apply" for n in range(10)])
    assert ("late", "fees") not in everywhere.doc_terms  # in every passage: the corpus's own words, not one rule's
    assert ("late", "fees") in Vocabulary.from_record({}, documents=["Acme: late fees apply", "Acme: none", "x", "y"]).doc_terms


@pytest.mark.parametrize("question, route", [
    # the documents: rules, even when they name a table or say "how many"
    ("What paperwork goes with a hazardous load?", "docs"),
    ("Within how many days must a customer ask for a return?", "docs"),
    ("What's the most a claims handler may approve on their own?", "docs"),
    ("Does the fuel surcharge apply to economy shipments?", "docs"),
    # the tables alone: counts, lists, records, thresholds the question gives
    ("How many claims did Rotterdam customers file in May 2024?", "data"),
    ("list every gold tier carrier", "data"),
    ("What is the status of claim CL0007?", "data"),
    ("How many shipments were delivered after their promised date?", "data"),
    ("How many claims are above EUR 2,000?", "data"),
    # the words a column's description names it with are the tables' own, though the documents use them too
    ("Sum of base freight for Hamburg shipments?", "data"),
    ("Which origin depot handled the most shipments?", "data"),
    ("Show the shipment numbers of every lost shipment", "data"),
    ("How many shipments went with gold-tier carriers?", "data"),
    ("Could you list the open claims?", "data"),  # a request, not a modal rule
    ("Break down the claims by reason", "data"),  # a grouping, not a broken rule
    ("Give me a breakdown of claims by status", "data"),
    ("Monthly shipment counts, please", "data"),
    # a rule of the documents applied to the rows
    ("How many claims are above the amount a handler can approve?", "both"),
    ("Which express shipments are heavy enough to need advance booking?", "both"),
    ("Total fuel surcharge on shipments to Lyon", "both"),
    ("Are any claims still open past the escalation deadline?", "both"),
    ("Was claim CL0003 filed in time?", "both"),  # a deadline the question leans on without giving it
    ("By what date can the customer of shipment S00012 still claim?", "both"),
    ("Which carriers miss the on-time target?", "both"),
    ("How many hazardous shipments went with carriers that may not carry dangerous goods?", "both"),  # a flag's
    # description ("contains dangerous goods") is its condition, so it does not make the rule's words the tables'
    # a comparison with a value the rows hold, and a charge left out of a figure, apply no rule
    ("How many Rotterdam shipments arrived after the delivery date promised?", "data"),
    ("Sum of base freight on express shipments, excluding the fuel surcharge", "data"),
    ("Claims filed in 2024 by Rotterdam customers: how many, and what do they total?", "data"),  # counted before
    ("How much have we paid out on claims this year?", "data"),  # summed over the table after the verb
    ("Top 5 carriers by claim amount for 2024", "data"),  # a top few heading the question
    ("heaviest shipment of 2024 - which customer booked it?", "data"),
    ("Customers with a credit limit over 40,000 EUR?", "data"),  # a noun phrase asks for rows
    ("Gold tier carriers, listed by region, with their credit limits, highest limit first", "data"),  # the column
    ("Shipments collected in March 2024 - count?", "data"),
    # a rule's words that are also the tables': said together by the documents, or in their plain sense
    ("How much freight credit do customers get for shipments delivered late?", "both"),  # two columns' words
    ("Which carriers moved hazardous shipments they are not approved to carry?", "both"),  # not the claim status
    ("How many customers are on the standard payment terms?", "both"),  # not the service level
    ("How much severe-delay credit went to Rotterdam customers?", "both"),  # a hyphenated term, by its parts
    ("Which carriers end 2024 under review?", "both"),
    ("How many delivered shipments were still inside the return window on 31 December?", "both"),
    # a rule's own figure, though it counts: "how many X does a Y need", "the minimum number of"
    ("How many shipments does a new customer need before it can become a key account?", "docs"),
    ("Maximum number of pallet layers in block storage?", "docs"),
    ("How many days after a booking can the customer still cancel?", "docs"),  # counts days, not bookings
    ("Does a customer get any refund if their shipment arrives a day late?", "docs"),  # "any" is not "any shipment"
    ("What is a key account, and what does that mean for its shipments?", "docs"),  # "mean": a verb
    # the words staff use for the rows (the demo's sidecar aliases), a negated modal, a superlative
    ("how many loads went to Lyon in May?", "data"),
    ("Which hauliers serve the North region?", "data"),
    ("Any standard consignments over 20,000 kg?", "data"),  # "standard" is the consignments' own service level
    ("Which carriers moved hazardous shipments they shouldn't have?", "both"),
    ("cheapest shipment to Lyon?", "data"),
    ("no. of claims filed in june", "data"),  # "no. of": number of
    ("I'd like a list of the open claims", "data"),  # a request, not a modal
    ("what's the most we'd refund on claim CL0005?", "both"),  # we'd: would, a rule applied to a record
    ("How many shipments arrived after the date we'd promised?", "data"),  # we'd promised: had
])
def test_each_kind_of_question_gets_its_route(vocab, question, route):
    cues = read_cues(question, vocab)
    assert cues.route == route, cues.reason


def test_the_reason_names_the_words_that_decided(vocab):
    both = read_cues("How many claims exceed the standard liability cap?", vocab)
    assert both.route == "both" and "how many" in both.reason and "'exceed the standard liability cap'" in both.reason
    data = read_cues("Which carrier handled the most shipments in May 2024?", vocab)
    assert data.route == "data" and "nothing it needs from the documents" in data.reason  # May: the month
    docs = read_cues("Who signs off a new carrier?", vocab)
    assert docs.route == "docs" and docs.reason.startswith("asks for nothing computed from rows")


def test_an_index_whose_tables_name_nothing_the_question_says_routes_to_the_documents():
    vocab = Vocabulary.from_record({"tables": [{"name": "orders", "columns": [{"name": "order_id", "type": "VARCHAR"}]}]})
    assert read_cues("How many vacation days do employees get?", vocab).route == "docs"
    assert read_cues("How many orders were placed?", vocab).route == "data"


def test_words_and_terms_read_possessives_column_names_and_inflections():
    assert words("the policy's cap on credit_limit_eur") == ["the", "policy", "cap", "on", "credit", "limit", "eur"]
    assert terms("severely delayed") == terms("a severe delay") != set()  # one root for both spellings
    assert terms("severe delay credit") <= terms("a severe-delay credit")  # a hyphenated word also by its parts


def test_the_tables_say_a_pair_only_when_they_put_its_words_together(vocab):
    assert vocab.says("credit", "limit") and vocab.says("base", "freight")  # a column's name, its naming clause
    assert vocab.says("gold", "tier") and vocab.says("promised", "date")  # a value beside its column; a date column
    assert vocab.explains("freight") and vocab.explains("credit") and not vocab.says("freight", "credit")


def test_values_are_read_from_columns_whatever_their_names(tmp_path):
    import duckdb

    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    con.execute('CREATE TABLE orders ("odd ""name""" VARCHAR, city VARCHAR, n INTEGER)')
    con.execute("INSERT INTO orders VALUES ('x1', 'Paris', 1), ('x2', 'Lyon', 2)")
    con.close()
    record = {"tables": [{"name": "orders", "columns": [{"name": 'odd "name"', "type": "VARCHAR"},
                                                        {"name": "city", "type": "VARCHAR"}, {"name": "n", "type": "INTEGER"}]}]}
    with Warehouse(tmp_path / "t.duckdb") as warehouse:
        vocab = Vocabulary.from_warehouse(record, warehouse)
    assert {("paris",), ("lyon",), ("x1",)} <= vocab.values
    assert read_cues("Did anything go to Lyon and Paris?", vocab).route == "docs"  # no table, no count: not rows
    assert read_cues("Which orders went to Lyon?", vocab).route == "data"
