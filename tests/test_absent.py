"""What a query asks that no row can give (rag.data.unrecorded), on the ops demo's real tables, and the critic's
``absent`` check flagging an answer that rests on such a query (scripted with DummyLM)."""

from __future__ import annotations

import pytest

from rag.data.schemalink import column_values
from rag.data.unrecorded import Unrecorded


@pytest.fixture(scope="module")
def absent(ops_tables):
    record, warehouse = ops_tables
    return Unrecorded.from_record(record, column_values(record, warehouse))


@pytest.mark.parametrize("sql, found", [
    ("SELECT claim_id FROM claims WHERE status = 'rejected' AND reason = 'insufficient packaging'",
     "claims.reason is never 'insufficient packaging' (its values: damage, delay, loss, shortage)"),
    ("SELECT COUNT(*) FROM claims WHERE reason IN ('water damage', 'moisture')",
     "claims.reason is never 'water damage' or 'moisture'"),
    # a column two tables of the query have: judged against both
    ("SELECT COUNT(*) FROM shipments s JOIN claims c ON c.shipment_id = s.shipment_id WHERE status = 'refused'",
     "claims.status/shipments.status is never 'refused'"),
    # a qualified column: its own table's values ('rejected' is a claim's status, never a shipment's)
    ("SELECT COUNT(*) FROM shipments s JOIN claims c ON s.shipment_id = c.shipment_id WHERE s.status = 'rejected'",
     "shipments.status is never 'rejected' (its values: delivered, in_transit, lost)"),
    # a name column: its values are too many to list
    ("SELECT COUNT(*) FROM customers WHERE name = 'Zephyr Chemicals'", "(none of its 80 values)"),
    ("SELECT EXTRACT(HOUR FROM shipped_on) AS h FROM shipments WHERE shipment_id = 'S00500'",
     "shipments.shipped_on holds dates, not times of day"),
    ("SELECT date_part('minute', CAST(filed_on AS TIMESTAMP)) FROM claims", "claims.filed_on holds dates"),
    ("SELECT hour(delivered_on) FROM shipments", "shipments.delivered_on holds dates"),
    ("SELECT strftime(shipped_on, '%H:%M') FROM shipments", "shipments.shipped_on holds dates"),
])
def test_a_value_no_row_holds_or_a_time_of_day_from_a_date_is_named(absent, sql, found):
    assert any(found in phrase for phrase in absent.find(sql)), absent.find(sql)


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM claims WHERE reason = 'damage' AND status = 'open'",  # values the columns hold
    "SELECT COUNT(*) FROM claims WHERE reason IN ('Delay', 'delay')",  # one of them is held
    "SELECT COUNT(*) FROM claims WHERE reason = 'Damage' OR reason = 'damage'",  # an OR: the other may hold
    "SELECT COUNT(*) FROM claims WHERE NOT status = 'cancelled'",  # keeps every row
    "SELECT COUNT(*) FROM claims WHERE status <> 'cancelled'",
    "SELECT COUNT(*) FROM shipments WHERE shipment_id = 'S99999'",  # 2,500 ids: not all known, not judged
    "SELECT strftime(shipped_on, '%Y-%m') AS month, COUNT(*) FROM shipments GROUP BY month",  # %m is the month
    "SELECT EXTRACT(MONTH FROM shipped_on) FROM shipments",
    "SELECT COUNT(*) FROM shipments WHERE shipped_on = '2024-03-01'",  # a date, not a text value
    "not sql at all",
])
def test_what_the_tables_can_give_is_left_alone(absent, sql):
    assert absent.find(sql) == []


def test_the_critic_flags_an_answer_resting_on_a_value_no_row_holds(ops_tables):
    """The ``absent`` check at the critic: the answer "none" to a question about a claim reason the tables never
    record is returned flagged, with the reason; without the check it is not."""
    from types import SimpleNamespace

    from rag.agent.critique import Critic
    from rag.agent.trace import Trace
    from rag.data.coverage import Coverage
    from rag.retrieval.retriever import Hit

    record, warehouse = ops_tables
    index = SimpleNamespace(tables_record=record, chunks=[])
    coverage = Coverage.for_index(index, warehouse)
    question = "Which rejected claims were turned down because of insufficient packaging?"
    sql = "SELECT claim_id FROM claims WHERE status = 'rejected' AND reason = 'insufficient packaging'"
    hit = Hit(chunk_id="sql:1", text="(no rows)", title="", source="", rank=0, score=0.0, stages={},
              meta={"sql": sql, "rows": []})
    flagged = Critic(checks="numbers+absent", coverage=coverage).off_target(question, ["sql:1"], [hit], Trace(question))
    assert flagged is not None and "claims.reason is never 'insufficient packaging'" in flagged
    assert Critic(checks="numbers+filters", coverage=coverage).off_target(question, ["sql:1"], [hit], Trace(question)) is None


@pytest.fixture(scope="module")
def periods(ops_tables):
    from rag.data.coverage import date_spans

    record, warehouse = ops_tables
    return Unrecorded.from_record(record, column_values(record, warehouse), date_spans(record, warehouse))


@pytest.mark.parametrize("sql, found", [
    # the demo's claims are filed in 2024 and its shipments collected in 2024; promised dates run into 2025
    ("SELECT COUNT(*) FROM claims WHERE filed_on BETWEEN '2025-01-01' AND '2025-01-31'",
     "claims.filed_on runs from 2024-01-12 to 2024-12-31: filed_on BETWEEN '2025-01-01' AND '2025-01-31' keeps no row"),
    ("SELECT COUNT(*) FROM shipments WHERE carrier_id = 'C12' AND shipped_on >= '2025-01-01' AND shipped_on < '2025-02-01'",
     "shipped_on >= '2025-01-01' keeps no row"),
    ("SELECT COUNT(*) FROM shipments WHERE shipped_on < DATE '2024-01-01'", "shipped_on < CAST('2024-01-01' AS DATE)"),
    ("SELECT COUNT(*) FROM shipments WHERE '2025-01-01' <= shipped_on", "'2025-01-01' <= shipped_on keeps no row"),
    ("SELECT COUNT(*) FROM shipments WHERE YEAR(shipped_on) = 2023", "YEAR(shipped_on) = 2023 keeps no row"),
    ("SELECT COUNT(*) FROM shipments s WHERE EXTRACT(YEAR FROM s.shipped_on) = 2023", "shipments.shipped_on runs from"),
    ("SELECT COUNT(*) FROM shipments WHERE date_part('year', delivered_on) = 2025", "shipments.delivered_on runs from"),
    ("SELECT COUNT(*) FROM shipments WHERE strftime(shipped_on, '%Y-%m') = '2025-01'", "keeps no row"),
    ("SELECT COUNT(*) FROM shipments WHERE date_trunc('month', shipped_on) = '2023-12-01'", "keeps no row"),
    # a qualified column: its own table's span
    ("SELECT COUNT(*) FROM shipments s JOIN claims c ON c.shipment_id = s.shipment_id WHERE c.filed_on >= '2025-01-02'",
     "claims.filed_on runs from 2024-01-12"),
])
def test_a_period_outside_what_a_date_column_holds_is_named(periods, sql, found):
    assert any(found in phrase for phrase in periods.outside(sql)), periods.outside(sql)


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM shipments WHERE promised_on >= '2025-01-01'",  # promised dates do run into 2025
    "SELECT COUNT(*) FROM shipments WHERE shipped_on = '2024-12-31'",  # the last day held
    "SELECT COUNT(*) FROM shipments WHERE YEAR(shipped_on) = 2024",
    "SELECT COUNT(*) FROM shipments WHERE shipped_on BETWEEN '2023-12-01' AND '2024-01-31'",  # overlaps
    "SELECT COUNT(*) FROM shipments WHERE shipped_on < '2024-01-01' OR status = 'lost'",  # an OR: the other may hold
    "SELECT COUNT(*) FROM shipments WHERE NOT shipped_on >= '2025-01-01'",
    "SELECT SUM(CASE WHEN shipped_on >= '2025-01-01' THEN 1 ELSE 0 END) FROM shipments",  # a CASE keeps every row
    "SELECT COUNT(*) FROM shipments s LEFT JOIN claims c ON c.shipment_id = s.shipment_id AND c.filed_on > '2025-01-01'",
    "SELECT COUNT(*) FROM shipments WHERE delivered_on > promised_on",  # no literal
    # a UNION: the other branch keeps its rows
    "SELECT shipment_id FROM shipments WHERE shipped_on > '2025-01-01' UNION SELECT shipment_id FROM claims",
    "SELECT COUNT(*) FROM claims WHERE claim_id > '2025-01-01'",  # not a date column
    "SELECT COUNT(*) FROM shipments WHERE strftime(shipped_on, '%m') = '01'",  # a month of any year
    "not sql at all",
])
def test_a_period_the_tables_hold_is_left_alone(periods, sql):
    assert periods.outside(sql) == []


def test_the_critic_flags_an_answer_resting_on_a_period_no_row_holds(ops_tables):
    """The ``period`` check at the critic: "0 claims in January 2025" when claims end in 2024 is returned flagged,
    with the reason; the question's own year passes the coverage check (promised dates run into 2025), and without
    the check the answer is not flagged."""
    from types import SimpleNamespace

    from rag.agent.critique import Critic
    from rag.agent.trace import Trace
    from rag.data.coverage import Coverage
    from rag.retrieval.retriever import Hit

    record, warehouse = ops_tables
    coverage = Coverage.for_index(SimpleNamespace(tables_record=record, chunks=[]), warehouse)
    question = "How many claims came in during January 2025?"
    assert coverage.gaps(question) == []
    sql = "SELECT COUNT(*) FROM claims WHERE filed_on BETWEEN '2025-01-01' AND '2025-01-31'"
    hit = Hit(chunk_id="sql:1", text="0", title="", source="", rank=0, score=0.0, stages={},
              meta={"sql": sql, "rows": [[0]]})
    flagged = Critic(checks="numbers+period", coverage=coverage).off_target(question, ["sql:1"], [hit], Trace(question))
    assert flagged is not None and "claims.filed_on runs from 2024-01-12 to 2024-12-31" in flagged
    assert Critic(checks="numbers+filters", coverage=coverage).off_target(question, ["sql:1"], [hit], Trace(question)) is None
