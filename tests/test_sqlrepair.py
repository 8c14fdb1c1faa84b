"""Schema repairs of model-written SQL (rag.data.sqlrepair) on the ops demo's real DuckDB tables, and the data
route using them before the model's one correction (scripted with DummyLM)."""

from __future__ import annotations

import dspy
import pytest
from dspy.utils import DummyLM

from rag.agent.dataroute import DataRoute
from rag.agent.trace import Trace
from rag.data import Warehouse, build_database, discover_tables, write_ops_demo
from rag.data.sqlrepair import columns_of, repair_sql
from rag.errors import SQLFailed, SQLRejected


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("repair")
    write_ops_demo(root / "demo")
    record = build_database(discover_tables(root / "demo" / "corpus"), root / "tables.duckdb")
    with Warehouse(root / "tables.duckdb") as warehouse:
        yield warehouse, record


def rows(warehouse, sql):
    return warehouse.run(sql).rows


@pytest.mark.parametrize("broken, right", [
    # the column is in the other table of the join
    ("SELECT T1.region, SUM(T1.weight_kg) AS kg FROM shipments AS T1 JOIN carriers AS T2 ON T1.carrier_id = "
     "T2.carrier_id GROUP BY T1.region ORDER BY kg DESC LIMIT 1",
     "SELECT c.region, SUM(s.weight_kg) AS kg FROM shipments s JOIN carriers c ON c.carrier_id = s.carrier_id "
     "GROUP BY c.region ORDER BY kg DESC LIMIT 1"),
    # a table named by a column but never joined
    ("SELECT COUNT(*) FROM claims WHERE amount_eur > 20 * shipments.weight_kg",
     "SELECT COUNT(*) FROM claims cl JOIN shipments s ON s.shipment_id = cl.shipment_id WHERE cl.amount_eur > 20 * s.weight_kg"),
    # a column no table of the query has, from the one table that links
    ("SELECT region, COUNT(*) AS n FROM shipments GROUP BY region ORDER BY n DESC, region LIMIT 1",
     "SELECT c.region, COUNT(*) AS n FROM shipments s JOIN carriers c ON c.carrier_id = s.carrier_id GROUP BY c.region "
     "ORDER BY n DESC, c.region LIMIT 1"),
    # a date written as a string, in date arithmetic
    ("SELECT COUNT(*) FROM claims WHERE status = 'open' AND filed_on < '2024-12-31' - INTERVAL 45 DAY",
     "SELECT COUNT(*) FROM claims WHERE status = 'open' AND filed_on < DATE '2024-12-31' - INTERVAL 45 DAY"),
    # a DATE column matched as text
    ("SELECT COUNT(*) FROM shipments WHERE destination = 'Madrid' AND shipped_on LIKE '2024-06%'",
     "SELECT COUNT(*) FROM shipments WHERE destination = 'Madrid' AND shipped_on BETWEEN DATE '2024-06-01' AND DATE '2024-06-30'"),
])
def test_a_statement_duckdb_refuses_is_fixed_to_the_right_rows(tables, broken, right):
    warehouse, record = tables
    with pytest.raises(SQLFailed):
        warehouse.run(broken)
    fixed = repair_sql(broken, columns_of(record))
    assert fixed is not None and fixed.changes
    assert rows(warehouse, fixed.sql) == rows(warehouse, right)


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM claims WHERE status = 'open'",  # nothing wrong
    "SELECT COUNT(*) FROM carriers WHERE on_time_rate < 90",  # no table has the column
    "SELECT COUNT(T1.customer_id) FROM customers AS T1 JOIN carriers AS T2 ON T1.carrier_id = T2.carrier_id",  # T2.k = T2.k
    "SELECT x FROM claims; DROP TABLE claims",  # two statements: the guard's to refuse, never "repaired" into one
    "DELETE FROM claims WHERE T1.amount_eur > 0",
    "SELECT FROM WHERE",
])
def test_what_the_schema_cannot_fix_is_left_to_the_model(tables, sql):
    _, record = tables
    assert repair_sql(sql, columns_of(record)) is None


def test_the_data_route_runs_the_repaired_statement_and_says_so(tables):
    warehouse, record = tables
    broken = ("SELECT T1.region, COUNT(*) AS n FROM shipments AS T1 JOIN carriers AS T2 ON T1.carrier_id = "
              "T2.carrier_id GROUP BY T1.region ORDER BY n DESC LIMIT 1")
    dspy.configure(lm=DummyLM([{"sql": broken}]))  # one statement: a correction would need a second answer
    route = DataRoute(warehouse, "TABLE shipments", columns=columns_of(record))
    trace = Trace(question="Which carrier region has the most shipments?")
    hits = route.query(trace.question, trace, lambda role, predictor, ids, **kw: (predictor(**kw), _NoCost()))
    step = trace.of("sql")[0]
    assert [h.chunk_id for h in hits] == ["sql:1"] and len(trace.of("sql")) == 1
    assert step.verdict is True and "T2.region" in step.sql and "T1.region -> T2.region" in step.notes[0]


def test_without_the_schema_the_failure_goes_to_the_model_as_before(tables):
    warehouse, _ = tables
    broken = "SELECT T1.region FROM shipments AS T1 JOIN carriers AS T2 ON T1.carrier_id = T2.carrier_id"
    dspy.configure(lm=DummyLM([{"sql": broken}, {"sql": "SELECT region FROM carriers"}]))
    route = DataRoute(warehouse, "TABLE shipments")
    trace = Trace(question="q")
    route.query("q", trace, lambda role, predictor, ids, **kw: (predictor(**kw), _NoCost()))
    first, second = trace.of("sql")
    assert first.verdict is False and first.reason.startswith("duckdb:") and second.verdict is True


def test_a_repair_never_gets_past_the_guard(tables):
    warehouse, record = tables
    fixed = repair_sql("SELECT T1.region, read_csv('/etc/passwd') FROM shipments AS T1 JOIN carriers AS T2 "
                       "ON T1.carrier_id = T2.carrier_id", columns_of(record))
    assert fixed is not None
    with pytest.raises(SQLRejected):
        warehouse.run(fixed.sql)


class _NoCost:
    latency_ms = tokens_in = tokens_out = cost = 0
    model, cached, notes = "scripted", False, []


def test_a_float_sum_reads_without_its_rounding_noise(tables):
    warehouse, _ = tables
    result = warehouse.run("SELECT 0.1::DOUBLE + 0.2::DOUBLE AS x, 710844.0000000006::DOUBLE AS y")
    assert result.to_dict()["rows"] == [[0.3, 710844.0]] and "0.30000000000000004" not in result.as_text()


IDLE = ("SELECT COUNT(T1.customer_id) FROM customers AS T1 INNER JOIN shipments AS T2 ON T1.customer_id = "
        "T2.customer_id WHERE T1.country = 'Belgium' AND T1.key_account = TRUE")


def test_a_join_that_only_repeats_rows_is_dropped_to_the_right_count(tables):
    """drop_idle_joins: "how many Belgian key accounts" written over customers JOIN shipments counts each customer
    once per shipment; without the join it counts customers. The idle table in FROM gives its place to the next."""
    from rag.data.sqlrepair import drop_idle_joins

    warehouse, record = tables
    schema = columns_of(record)
    right = rows(warehouse, "SELECT COUNT(*) FROM customers WHERE country = 'Belgium' AND key_account")
    assert rows(warehouse, IDLE) != right
    cut = drop_idle_joins(IDLE, schema)
    assert cut is not None and "shipments" not in cut.sql and rows(warehouse, cut.sql) == right
    assert cut.changes == ["dropped the join of shipments: none of its columns is read, it only repeats rows"]
    avg = drop_idle_joins("SELECT AVG(T2.credit_limit_eur) FROM shipments AS T1 JOIN customers AS T2 ON "
                          "T1.customer_id = T2.customer_id WHERE T2.segment = 'pharma'", schema)
    assert avg is not None and rows(warehouse, avg.sql) == rows(
        warehouse, "SELECT AVG(credit_limit_eur) FROM customers WHERE segment = 'pharma'")


@pytest.mark.parametrize("sql", [
    # COUNT(*): the repeated rows are what it counts (shipments per carrier)
    "SELECT T1.name, COUNT(*) FROM carriers AS T1 JOIN shipments AS T2 ON T1.carrier_id = T2.carrier_id GROUP BY T1.name",
    # DISTINCT: the join is the point (customers who shipped something)
    "SELECT COUNT(DISTINCT T1.customer_id) FROM customers AS T1 JOIN shipments AS T2 ON T1.customer_id = T2.customer_id",
    # both tables' columns are read
    "SELECT T1.name, SUM(T2.freight_eur) FROM customers AS T1 JOIN shipments AS T2 ON T1.customer_id = T2.customer_id "
    "GROUP BY T1.name",
    "SELECT COUNT(*) FROM claims WHERE status = 'open'",  # no join
    "SELECT x FROM claims; DROP TABLE claims",
])
def test_a_join_that_is_read_or_counted_stays(tables, sql):
    from rag.data.sqlrepair import drop_idle_joins

    _, record = tables
    assert drop_idle_joins(sql, columns_of(record)) is None


def test_the_data_route_drops_an_idle_join_when_told_and_says_so(tables):
    warehouse, record = tables
    right = rows(warehouse, "SELECT COUNT(*) FROM customers WHERE country = 'Belgium' AND key_account")
    for drop in (True, False):
        dspy.configure(lm=DummyLM([{"sql": IDLE}]))
        route = DataRoute(warehouse, "TABLE customers", columns=columns_of(record), drop_joins=drop)
        trace = Trace(question="How many Belgian key accounts do we have?")
        route.query(trace.question, trace, lambda role, predictor, ids, **kw: (predictor(**kw), _NoCost()))
        step = trace.of("sql")[0]
        got = [tuple(r) for r in step.result["rows"]]
        if drop:
            assert got == right and "shipments" not in step.sql
            assert step.notes == ["before it ran: dropped the join of shipments: none of its columns is read, it only "
                                  "repeats rows"]
        else:
            assert got != right and step.notes == []
