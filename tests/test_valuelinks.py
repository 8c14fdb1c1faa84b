"""Value links (rag.data.valuelinks) over the ops demo's real tables: what a question names, as the tables spell it."""

from __future__ import annotations

import pytest

from rag.data.schemalink import column_values
from rag.data.valuelinks import ValueLinks, section


@pytest.fixture(scope="module")
def tables(ops_tables):
    return ops_tables


@pytest.fixture(scope="module")
def links(tables):
    record, warehouse = tables
    return ValueLinks.from_record(record, warehouse, column_values(record, warehouse))


def one(warehouse, sql):
    return warehouse.run(sql).rows[0][0]


def test_a_named_customer_comes_with_its_key_as_the_table_holds_it(tables, links):
    _, warehouse = tables
    name, key = warehouse.run("SELECT name, customer_id FROM customers ORDER BY customer_id DESC LIMIT 1").rows[0]
    assert links.lines(f"What did {name.upper()} ship in March?") == [
        f"'{name}' is a value of customers.name (its customer_id is '{key}')"]


def test_a_category_value_names_its_column_and_a_city_each_column_that_holds_it(tables, links):
    _, warehouse = tables
    city = one(warehouse, "SELECT origin FROM shipments WHERE origin IN (SELECT destination FROM shipments) LIMIT 1")
    found = links.lines(f"How many express shipments left {city} last year?")
    assert found == ["'express' is a value of shipments.service_level",
                     f"'{city}' is a value of shipments.origin, shipments.destination"]


def test_a_record_id_is_spelled_as_stored_and_named_by_the_column_it_keys(tables, links):
    _, warehouse = tables
    shipment = one(warehouse, "SELECT shipment_id FROM claims ORDER BY claim_id LIMIT 1")  # also in claims.shipment_id
    claim = one(warehouse, "SELECT claim_id FROM claims ORDER BY claim_id LIMIT 1")
    assert links.lines(f"Why was claim {claim.lower()} filed for {shipment}?") == [
        f"'{claim}' is claims.claim_id", f"'{shipment}' is shipments.shipment_id"]


def test_an_id_the_tables_do_not_hold_and_a_name_they_do_not_know_give_nothing(links):
    assert links.lines("What did Nobody Logistics Ltd ship on S99999?") == []
    assert section([]) == ""


def test_the_longest_match_wins_and_a_value_named_twice_is_told_once(tables, links):
    _, warehouse = tables
    carrier = one(warehouse, "SELECT name FROM carriers WHERE name ILIKE '%express%' LIMIT 1")  # holds 'express'
    key = one(warehouse, f"SELECT carrier_id FROM carriers WHERE name = '{carrier}'")
    found = links.lines(f"Delivered or not: how many of {carrier}'s shipments were delivered?")
    assert found == ["'delivered' is a value of shipments.status",
                     f"'{carrier}' is a value of carriers.name (its carrier_id is '{key}')"]


def test_the_lines_are_bounded_and_the_section_heads_them(tables):
    record, warehouse = tables
    bounded = ValueLinks.from_record(record, warehouse, column_values(record, warehouse), limit=2)
    found = bounded.lines("Open, paid or rejected damage claims on express or economy shipments?")
    assert len(found) == 2 and found[0] == "'open' is a value of claims.status"
    assert section(found).splitlines()[3:] == [f"  {line}" for line in found]
    assert section(found).startswith("\n\nTHE QUESTION NAMES")


def test_names_only_tells_names_and_ids_and_no_category(tables):
    record, warehouse = tables
    names = ValueLinks.from_record(record, warehouse, column_values(record, warehouse), names_only=True)
    name, key = warehouse.run("SELECT name, customer_id FROM customers ORDER BY customer_id LIMIT 1").rows[0]
    claim = one(warehouse, "SELECT claim_id FROM claims ORDER BY claim_id LIMIT 1")
    assert names.lines(f"How many open claims on express shipments did {name} file, and why {claim}?") == [
        f"'{name}' is a value of customers.name (its customer_id is '{key}')", f"'{claim}' is claims.claim_id"]
