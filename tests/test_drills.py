"""rag.data.drills on tables unlike the demo's: no descriptions, odd names, no keys, a table of one row."""

from __future__ import annotations

import pytest

from rag.data import Warehouse, build_database
from rag.data.drills import _singular, _words, drills


@pytest.fixture()
def warehouse(tmp_path):
    (tmp_path / "Orders.csv").write_text(
        "order_id,Client Name,region,total_usd,placed_at,shipped_at,rush\n"
        + "".join(f"O{i:03d},{'Acme' if i % 3 else 'Globex'},{['north', 'south'][i % 2]},{10 + i * 1.5},"
                  f"2023-0{1 + i % 3}-{10 + i % 9},2023-0{1 + i % 3}-{11 + i % 9 + i % 4},{str(i % 4 == 0).lower()}\n"
                  for i in range(30)), encoding="utf-8")
    (tmp_path / "settings.csv").write_text("key,value\nmode,fast\n", encoding="utf-8")
    record = build_database([tmp_path / "Orders.csv", tmp_path / "settings.csv"], tmp_path / "t.duckdb")
    with Warehouse(tmp_path / "t.duckdb") as w:
        yield record, w


def test_drills_quote_odd_names_and_skip_what_has_no_shape(warehouse):
    record, w = warehouse
    items = drills(record, w)
    assert items, "a table with a key, categories, numbers and dates gets drills"
    for item in items:  # each one runs again, through the guard, to the rows it records
        assert w.run(item["gold_sql"], max_rows=15).to_dict()["rows"] == item["gold_result"]
    assert {i["id"].split("-")[1] for i in items} == {"orders"}  # settings: one row, nothing to count by
    assert any(i["gold_sql"].endswith("WHERE \"Client Name\" = 'Acme'") for i in items)  # quoted, as DuckDB needs
    gap = next(i for i in items if "days after" in i["question"])
    assert "shipped_at - placed_at > " in gap["gold_sql"]  # the later date minus the earlier
    assert any(i["gold_sql"].endswith("WHERE rush") for i in items)


def test_drills_of_a_database_without_tables_are_none(tmp_path):
    assert drills({"tables": []}, None) == []


def test_an_empty_table_and_a_list_column_get_no_drills_and_no_error(tmp_path):
    (tmp_path / "empty.csv").write_text("event_id,happened_on,kind\n", encoding="utf-8")
    (tmp_path / "tags.jsonl").write_text('{"tag_id": "T1", "labels": ["a", "b"]}\n{"tag_id": "T2", "labels": []}\n',
                                         encoding="utf-8")
    record = build_database([tmp_path / "empty.csv", tmp_path / "tags.jsonl"], tmp_path / "t.duckdb")
    with Warehouse(tmp_path / "t.duckdb") as w:
        assert [i for i in drills(record, w) if "labels" in i["gold_sql"] or "empty" in i["gold_sql"]] == []


@pytest.mark.parametrize(("column", "words"), [("freight_eur", "freight"), ("shipped_on", "shipped"),
                                               ("credit_limit_eur", "credit limit"), ("id", "id")])
def test_column_words_drop_units_and_key_suffixes(column, words):
    assert _words(column) == words


@pytest.mark.parametrize(("table", "one"), [("shipments", "shipment"), ("companies", "company"), ("address", "address")])
def test_singular(table, one):
    assert _singular(table) == one
