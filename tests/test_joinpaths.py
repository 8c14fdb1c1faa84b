"""Join paths (rag.data.joinpaths) over the ops demo's real schema, and the line the value links add with them."""

from __future__ import annotations

from rag.data.joinpaths import JoinPaths
from rag.data.schemalink import column_values
from rag.data.valuelinks import ValueLinks


def test_a_table_reaches_another_through_the_keys_they_share_and_not_through_other_columns(ops_tables):
    record, _ = ops_tables
    paths = JoinPaths.from_record(record)
    assert paths.line("claims", "customers") == ("claims reach customers through shipments: claims.shipment_id = "
                                                 "shipments.shipment_id AND shipments.customer_id = customers.customer_id")
    assert paths.line("customers", "carriers").startswith("customers reach carriers through shipments: ")
    assert paths.line("claims", "shipments") is None  # a direct join: the schema shows it
    assert paths.line("shipments", "shipments") is None and paths.line("nowhere", "customers") is None
    assert [c for _, c in paths.edges["claims"]] == ["shipment_id"]  # claims.status and shipments.status: no join
    assert paths.asked("How many of their claims were rejected, by carrier?") == ["claims", "carriers"]


def test_the_links_add_the_path_from_the_table_asked_about_to_the_named_record(ops_tables):
    record, warehouse = ops_tables
    values = column_values(record, warehouse)
    name = next(v for v in values["customers.name"] if len(v.split()) > 1)
    key = warehouse.run(f"SELECT customer_id FROM customers WHERE name = '{name}'").rows[0][0]
    on = ValueLinks.from_record(record, warehouse, values, names_only=True, paths=True)
    off = ValueLinks.from_record(record, warehouse, values, names_only=True)
    question = f"How many claims has {name} filed?"
    assert on.lines(question) == [f"'{name}' is a value of customers.name (its customer_id is '{key}')",
                                  "claims reach customers through shipments: claims.shipment_id = shipments.shipment_id"
                                  " AND shipments.customer_id = customers.customer_id"]
    assert off.lines(question) == on.lines(question)[:1]
    assert on.lines(f"How many shipments did {name} send?") == on.lines(question)[:1]  # shipments hold its key
    claim = warehouse.run("SELECT claim_id FROM claims LIMIT 1").rows[0][0]
    assert on.lines(f"Which carrier had the shipment of claim {claim}?")[-1].startswith(
        "carriers reach claims through shipments: ")
