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
    # a column two tables hold, neither in the query: from the nearer (claims reach customer_id through shipments)
    ("SELECT COUNT(*) AS total_claims FROM claims WHERE customer_id = 'CU018'",
     "SELECT COUNT(*) FROM claims cl JOIN shipments s ON s.shipment_id = cl.shipment_id WHERE s.customer_id = 'CU018'"),
    # a qualified column no table of the query has: the table that has it joined, the column moved to it
    ("SELECT c.claim_id, c.amount_eur FROM customers c JOIN shipments s ON c.customer_id = s.customer_id "
     "WHERE c.name = 'Iris Motors NV' AND s.service_level = 'express' AND s.weight_kg > 500",
     "SELECT cl.claim_id, cl.amount_eur FROM claims cl JOIN shipments s ON s.shipment_id = cl.shipment_id JOIN customers "
     "cu ON cu.customer_id = s.customer_id WHERE cu.name = 'Iris Motors NV' AND s.service_level = 'express' AND s.weight_kg > 500"),
    # the joined table has a column of the same name ("status"): the query's own table keeps it
    ("SELECT AVG(DATE_DIFF('day', delivered_on, filed_on)) AS d FROM shipments WHERE status = 'lost'",
     "SELECT AVG(DATE_DIFF('day', s.delivered_on, cl.filed_on)) AS d FROM shipments s JOIN claims cl "
     "ON cl.shipment_id = s.shipment_id WHERE s.status = 'lost'"),
    # a JOIN on a column one side lacks goes through the table between
    ("SELECT customers.country, ROUND(AVG(claims.amount_eur), 2) AS avg_eur FROM customers JOIN claims "
     "ON customers.customer_id = claims.customer_id GROUP BY customers.country ORDER BY avg_eur DESC LIMIT 1",
     "SELECT cu.country, ROUND(AVG(cl.amount_eur), 2) AS avg_eur FROM customers cu JOIN shipments s ON s.customer_id = "
     "cu.customer_id JOIN claims cl ON cl.shipment_id = s.shipment_id GROUP BY cu.country ORDER BY avg_eur DESC LIMIT 1"),
    ("SELECT COUNT(*) FROM claims cl JOIN customers c ON cl.customer_id = c.customer_id WHERE c.segment = 'pharma'",
     "SELECT COUNT(*) FROM claims cl JOIN shipments s ON s.shipment_id = cl.shipment_id JOIN customers c "
     "ON c.customer_id = s.customer_id WHERE c.segment = 'pharma'"),
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
    "SELECT COUNT(*) FROM customers AS T1 JOIN carriers AS T2 ON T1.name = T2.name WHERE T1.carrier_id = T2.carrier_id",  # T2.k = T2.k
    "SELECT name, COUNT(*) FROM claims GROUP BY name",  # customers and carriers both hold a name, equally far: no guess
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


def test_the_writer_can_answer_with_a_sql_block_instead_of_json(tables):
    """sql_output = "text" (rag.agent.sqltext): the writer's prompt asks for a ```sql block and sets no response
    format (no grammar); the statement is read from the block and still runs through the guard."""
    from dspy.clients.base_lm import GLOBAL_HISTORY

    from rag.agent.sqltext import SQLTextAdapter

    warehouse, record = tables
    sql = "SELECT COUNT(*) AS n FROM claims WHERE status = 'open'"
    dspy.configure(lm=DummyLM([{"sql": sql}], adapter=SQLTextAdapter()))
    route = DataRoute(warehouse, "TABLE claims (300 rows)", columns=columns_of(record), text_sql=True)
    trace = Trace(question="How many claims are open?")
    start = len(GLOBAL_HISTORY)
    hits = route.query(trace.question, trace, lambda role, predictor, ids, **kw: (predictor(**kw), _NoCost()))
    step = trace.of("sql")[0]
    assert [h.chunk_id for h in hits] == ["sql:1"] and step.verdict is True and step.sql.startswith(sql)
    call = GLOBAL_HISTORY[start]
    user = call["messages"][-1]["content"]
    assert user.startswith("Tables:\nTABLE claims") and user.endswith("Write only the query, in one ```sql code block.")
    assert "How many claims are open?" in user and not call["kwargs"].get("response_format")


@pytest.mark.parametrize("reply, sql", [
    ("Here it is:\n```sql\nSELECT 1;\n```\nDone.", "SELECT 1"),
    ("```\nSELECT region FROM carriers\n```", "SELECT region FROM carriers"),
    ("SELECT 2;", "SELECT 2"),  # no block: the whole reply
    ('{"sql": "SELECT 3"}', "SELECT 3"),  # JSON anyway
    ("[[ ## sql ## ]]\nSELECT 4\n\n[[ ## completed ## ]]", "SELECT 4"),  # DSPy's chat layout
    ("{not json", "{not json"),
    ("", ""),
])
def test_the_statement_is_read_from_the_first_block(reply, sql):
    from rag.agent.sqltext import statement

    assert statement(reply) == sql


def test_examples_and_a_failed_query_go_into_the_text_prompt():
    from rag.agent.sqltext import SQLTextAdapter
    from signatures import SQLWriter

    messages = SQLTextAdapter().format(SQLWriter, [{"question": "How many carriers?", "sql": "SELECT COUNT(*) FROM carriers"}],
                                       {"question": "q", "tables": "T", "documents": "[p#1] limit 500 kg",
                                        "previous": "SELECT x\nerror: no column x"})
    user = messages[-1]["content"]
    order = [user.index(s) for s in ("Tables:", "Documents:", "Examples:", "```sql\nSELECT COUNT(*) FROM carriers\n```",
                                     "Previous query", "Question: q")]
    assert order == sorted(order) and SQLWriter.instructions in user
