"""The ops demo's golden set: questions answered by the policies (``docs``), the tables (``data``), a policy rule
applied to the tables (``both``), or by nothing there (unanswerable, ``should_refuse: true``).

Items follow Sieve's golden schema (rag/eval/golden.py) plus ``route``, ``key_facts`` (short strings an answer must
contain), ``gold_sql`` and ``gold_result`` (data and both items: the query's rows, computed here with DuckDB over
the CSV files, never typed in) and ``absent_terms`` (unanswerable items: words found in no document and no table
header). ``evidence`` strings are copied from the policy text (:mod:`rag.data.demo.ops_policies`) and checked against it.
Splits are stratified by route: the k-th item of a route goes to ``SPLIT_CYCLE[k % 10]`` (40/30/30).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

from rag.data.demo import ops_policies as P

TABLES = ("carriers", "customers", "shipments", "claims")
ROUTES = ("docs", "data", "both")
SPLIT_CYCLE = ("train", "dev", "test", "train", "test", "dev", "train", "test", "dev", "train")
NOT_COVERED = "Not covered by the Kestrel Freight policies or operations tables."

Rows = list[list[Any]]


def connect(data_dir: Path):
    """An in-memory DuckDB connection with one view per table CSV of ``data_dir`` (one thread: sums come out the
    same on every run)."""
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute("SET threads = 1")
    for name in TABLES:
        path = str(Path(data_dir) / f"{name}.csv").replace("'", "''")
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_csv('{path}', header = true)")
    return con


def json_safe(rows: list[tuple]) -> Rows:
    """DuckDB rows as JSON values: dates as ISO strings, decimals as floats."""
    def cell(v: Any) -> Any:
        if isinstance(v, (dt.date, dt.datetime)):
            return v.isoformat()
        return float(v) if isinstance(v, Decimal) else v
    return [[cell(v) for v in row] for row in rows]


def plain(value: Any) -> str:
    """A value as an answer states it: 17, 12.5, 1234.56 (no thousands separators, no trailing .0)."""
    if isinstance(value, float):
        text = repr(round(value, 2))
        return text[:-2] if text.endswith(".0") else text
    return str(value)


def _docs(question: str, answer: str, evidence: list[str], facts: list[str], kind: str = "answerable") -> dict:
    return {"route": "docs", "type": kind, "question": question, "answer": answer, "evidence": evidence,
            "facts": facts}


def _data(question: str, sql: str, answer: Callable[[Rows], str], evidence: list[str] | None = None,
          facts: list[str] | None = None) -> dict:
    """A data item (a both item when it has policy ``evidence``); its key facts are the result's cells, plus
    ``facts`` (the policy's number, as the policy writes it)."""
    return {"route": "both" if evidence else "data", "type": "answerable", "question": question, "sql": sql,
            "answer": answer, "evidence": evidence or [], "facts": facts or []}


def _none(route: str, question: str, absent: list[str]) -> dict:
    return {"route": route, "type": "unanswerable", "question": question, "absent": absent}


def _list(rows: Rows, unit: str = "") -> str:
    return "; ".join(f"{r[0]}: {plain(r[1])}{unit}" for r in rows)


ON_TIME = "AVG(CASE WHEN s.delivered_on <= s.promised_on THEN 1 ELSE 0 END)"


def specs() -> list[dict]:
    """Every question, in file order within its route."""
    delay = P.SEVERE_DELAY_DAYS
    return [
        _docs("What must a customer include when filing a claim?",
              "The shipment number, the amount claimed in euros, photographs of any damage and the signed delivery receipt.",
              ["photographs of any damage and the signed delivery receipt"], ["photographs", "signed delivery receipt"]),
        _docs("How often are carrier scorecards published to carriers?", "Every quarter.",
              ["Scorecards are published to carriers every quarter"], ["quarter"]),
        _docs("What is the promised transit time for economy shipments?", f"{P.TRANSIT_DAYS['economy']} days.",
              [f"Economy shipments have a promised transit time of {P.TRANSIT_DAYS['economy']} days"],
              [f"{P.TRANSIT_DAYS['economy']} days"]),
        _docs("How far in advance must a shipment above 2,000 kg be booked?",
              "At least two working days before collection.",
              ["booked at least two working days before collection"], ["two working days"]),
        _docs("my pallets of paint are flagged hazardous - what paperwork has to travel with them?",
              "A dangerous goods declaration signed by the shipper (and written instructions for the crew).",
              ["must travel with a dangerous goods declaration signed by the shipper"],
              ["dangerous goods declaration"], "vague"),
        _docs("What is the maximum declared-value cover for one shipment?", "EUR 250,000 per shipment.",
              ["up to EUR 250,000 per shipment"], ["250,000"]),
        _docs("Within how many days of delivery must a return be requested?", "Within 14 days of delivery.",
              ["Returns must be requested within 14 days of delivery"], ["14 days"]),
        _docs("How long are claim records kept?", "10 years after the claim is closed.",
              ["Claim records are kept for 10 years after the claim is closed"], ["10 years"]),
        _docs("What interest is charged on overdue invoices?", "8% above the central bank's reference rate.",
              ["Interest of 8% above the central bank's reference rate"], ["8%"]),
        _docs("How quickly must a customer complaint be answered?", "Within 2 working days.",
              ["answered within 2 working days"], ["2 working days"]),
        _docs("how often does the fuel surcharge change?", "The rate is reviewed monthly against the diesel price index.",
              ["The surcharge rate is reviewed monthly against the national diesel price index"], ["monthly"], "vague"),
        _docs("How high may pallets be stacked in block storage?", "No more than 3 levels high.",
              ["Pallets may be stacked no more than 3 levels high in block storage"], ["3 levels"]),

        _data(f"As of {P.SNAPSHOT}, how many shipments are still in transit?",
              "SELECT COUNT(*) AS in_transit FROM shipments WHERE status = 'in_transit'",
              lambda r: f"{r[0][0]} shipments are in transit."),
        _data("How many shipments were delivered after their promised delivery date?",
              "SELECT COUNT(*) AS late FROM shipments WHERE delivered_on > promised_on",
              lambda r: f"{r[0][0]} shipments were delivered late."),
        _data("Which carrier handled the most shipments, and how many?",
              "SELECT c.name, COUNT(*) AS shipments FROM shipments s JOIN carriers c ON c.carrier_id = s.carrier_id "
              "GROUP BY c.name ORDER BY shipments DESC, c.name LIMIT 1",
              lambda r: f"{r[0][0]}, with {r[0][1]} shipments."),
        _data("What is the total amount of the claims that have been paid?",
              "SELECT ROUND(SUM(amount_eur), 2) AS paid_eur FROM claims WHERE status = 'paid'",
              lambda r: f"EUR {plain(r[0][0])}."),
        _data("What is the average weight of express shipments?",
              "SELECT ROUND(AVG(weight_kg), 1) AS avg_kg FROM shipments WHERE service_level = 'express'",
              lambda r: f"{plain(r[0][0])} kg."),
        _data("Which three carriers have the highest on-time delivery rate, and what are their rates?",
              f"SELECT c.name, ROUND(100 * {ON_TIME}, 1) AS on_time_pct FROM shipments s JOIN carriers c "
              "ON c.carrier_id = s.carrier_id WHERE s.delivered_on IS NOT NULL GROUP BY c.name "
              "ORDER BY on_time_pct DESC, c.name LIMIT 3",
              lambda r: _list(r, "%") + "."),
        _data("How many claims were filed between 1 July and 30 September 2024?",
              "SELECT COUNT(*) AS claims FROM claims WHERE filed_on BETWEEN DATE '2024-07-01' AND DATE '2024-09-30'",
              lambda r: f"{r[0][0]} claims."),
        _data("Which customer has claimed the largest total amount, and how much?",
              "SELECT cu.name, ROUND(SUM(cl.amount_eur), 2) AS claimed_eur FROM claims cl JOIN shipments s "
              "ON s.shipment_id = cl.shipment_id JOIN customers cu ON cu.customer_id = s.customer_id "
              "GROUP BY cu.name ORDER BY claimed_eur DESC, cu.name LIMIT 1",
              lambda r: f"{r[0][0]}, with EUR {plain(r[0][1])} claimed."),
        _data("How many shipments went to Madrid in June 2024?",
              "SELECT COUNT(*) AS shipments FROM shipments WHERE destination = 'Madrid' "
              "AND shipped_on BETWEEN DATE '2024-06-01' AND DATE '2024-06-30'",
              lambda r: f"{r[0][0]} shipments."),
        _data("What is the average transit time in days of delivered standard shipments?",
              "SELECT ROUND(AVG(delivered_on - shipped_on), 2) AS avg_days FROM shipments "
              "WHERE service_level = 'standard' AND delivered_on IS NOT NULL",
              lambda r: f"{plain(r[0][0])} days."),
        _data("How many claims were filed for each reason?",
              "SELECT reason, COUNT(*) AS claims FROM claims GROUP BY reason ORDER BY reason",
              lambda r: _list(r) + "."),
        _data("Which carrier region shipped the most total weight?",
              "SELECT c.region, ROUND(SUM(s.weight_kg), 1) AS total_kg FROM shipments s JOIN carriers c "
              "ON c.carrier_id = s.carrier_id GROUP BY c.region ORDER BY total_kg DESC, c.region LIMIT 1",
              lambda r: f"{r[0][0]}, with {plain(r[0][1])} kg."),
        _data("How many different customers shipped with Bluefin Logistics?",
              "SELECT COUNT(DISTINCT s.customer_id) AS customers FROM shipments s JOIN carriers c "
              "ON c.carrier_id = s.carrier_id WHERE c.name = 'Bluefin Logistics'",
              lambda r: f"{r[0][0]} customers."),
        _data("What percentage of claims were rejected?",
              "SELECT ROUND(100 * AVG(CASE WHEN status = 'rejected' THEN 1 ELSE 0 END), 1) AS rejected_pct FROM claims",
              lambda r: f"{plain(r[0][0])}%."),

        _data("How many open claims exceed the amount that requires manager approval?",
              f"SELECT COUNT(*) AS claims FROM claims WHERE status = 'open' AND amount_eur > {P.CLAIM_APPROVAL_EUR}",
              lambda r: f"{r[0][0]} open claims are above EUR {P.CLAIM_APPROVAL_EUR:,}, the amount above which a "
                        "claim needs manager approval.",
              [f"Claims above EUR {P.CLAIM_APPROVAL_EUR:,} require manager approval"], [f"{P.CLAIM_APPROVAL_EUR:,}"]),
        _data("How many claims were filed after the claims policy's filing deadline?",
              "SELECT COUNT(*) AS claims FROM claims cl JOIN shipments s ON s.shipment_id = cl.shipment_id "
              f"WHERE cl.filed_on - COALESCE(s.delivered_on, s.promised_on) > {P.CLAIM_FILING_DAYS}",
              lambda r: f"{r[0][0]} claims were filed more than {P.CLAIM_FILING_DAYS} days after delivery (or after "
                        "the promised date for undelivered shipments).",
              [f"A claim must be filed within {P.CLAIM_FILING_DAYS} days of the delivery date"],
              [f"{P.CLAIM_FILING_DAYS} days"]),
        _data("How many express shipments break the express weight limit?",
              f"SELECT COUNT(*) AS shipments FROM shipments WHERE service_level = 'express' AND weight_kg > {P.EXPRESS_MAX_KG}",
              lambda r: f"{r[0][0]} express shipments weigh more than {P.EXPRESS_MAX_KG} kg.",
              [f"Express shipments are limited to {P.EXPRESS_MAX_KG} kg per shipment"], [f"{P.EXPRESS_MAX_KG} kg"]),
        _data("How many hazardous shipments were given to carriers that may not carry hazardous goods?",
              "SELECT COUNT(*) AS shipments FROM shipments s JOIN carriers c ON c.carrier_id = s.carrier_id "
              f"WHERE s.hazardous AND c.contract_tier <> '{P.HAZARDOUS_TIER}'",
              lambda r: f"{r[0][0]} hazardous shipments went to carriers without a {P.HAZARDOUS_TIER} contract tier.",
              [f"Hazardous shipments may only be carried by carriers with a {P.HAZARDOUS_TIER} contract tier"],
              [P.HAZARDOUS_TIER]),
        _data("How many claims ask for more than the standard liability cap of their shipment?",
              "SELECT COUNT(*) AS claims FROM claims cl JOIN shipments s ON s.shipment_id = cl.shipment_id "
              f"WHERE cl.amount_eur > {P.LIABILITY_EUR_PER_KG} * s.weight_kg",
              lambda r: f"{r[0][0]} claims exceed EUR {P.LIABILITY_EUR_PER_KG} per kg of their shipment's weight.",
              [f"limited to EUR {P.LIABILITY_EUR_PER_KG} per kg of the gross weight"], [f"{P.LIABILITY_EUR_PER_KG}"]),
        _data("Which carriers fall below the minimum on-time rate of the carrier scorecard?",
              f"SELECT c.name, ROUND(100 * {ON_TIME}, 1) AS on_time_pct FROM shipments s JOIN carriers c "
              "ON c.carrier_id = s.carrier_id WHERE s.delivered_on IS NOT NULL GROUP BY c.name "
              f"HAVING COUNT(*) >= {P.SCORECARD_MIN_SHIPMENTS} AND {ON_TIME} < {P.ONTIME_THRESHOLD_PCT / 100} "
              "ORDER BY c.name",
              lambda r: f"Below {P.ONTIME_THRESHOLD_PCT}%: " + _list(r, "%") + ".",
              [f"The minimum acceptable on-time rate is {P.ONTIME_THRESHOLD_PCT}%"], [f"{P.ONTIME_THRESHOLD_PCT}%"]),
        _data("How many delivered shipments had a severe delay?",
              f"SELECT COUNT(*) AS shipments FROM shipments WHERE delivered_on - promised_on > {delay}",
              lambda r: f"{r[0][0]} shipments arrived more than {delay} days after their promised date.",
              [f"A delay of more than {delay} days is a severe delay"], [f"{delay} days"]),
        _data("How much freight credit is owed to customers for severe delays?",
              f"SELECT ROUND(SUM(freight_eur) * {P.DELAY_CREDIT_PCT / 100}, 2) AS credit_eur FROM shipments "
              f"WHERE delivered_on - promised_on > {delay}",
              lambda r: f"EUR {plain(r[0][0])} ({P.DELAY_CREDIT_PCT}% of the base freight of severely delayed shipments).",
              [f"a freight credit of {P.DELAY_CREDIT_PCT}% of the base freight charge",
               f"A delay of more than {delay} days is a severe delay"], [f"{P.DELAY_CREDIT_PCT}%"]),
        _data("What fuel surcharge was added to the shipments shipped in March 2024?",
              f"SELECT ROUND(SUM(freight_eur) * {P.FUEL_SURCHARGE_PCT / 100}, 2) AS surcharge_eur FROM shipments "
              "WHERE shipped_on BETWEEN DATE '2024-03-01' AND DATE '2024-03-31'",
              lambda r: f"EUR {plain(r[0][0])} ({P.FUEL_SURCHARGE_PCT}% of the base freight charges).",
              [f"A fuel surcharge of {P.FUEL_SURCHARGE_PCT}% is added to the base freight charge"],
              [f"{P.FUEL_SURCHARGE_PCT}%"]),
        _data(f"As of {P.SNAPSHOT}, how many open claims should have been escalated to the operations director?",
              f"SELECT COUNT(*) AS claims FROM claims WHERE status = 'open' "
              f"AND DATE '{P.SNAPSHOT}' - filed_on > {P.ESCALATION_DAYS}",
              lambda r: f"{r[0][0]} open claims have been open for more than {P.ESCALATION_DAYS} days.",
              [f"A claim that has been open for more than {P.ESCALATION_DAYS} days is escalated to the operations "
               "director"], [f"{P.ESCALATION_DAYS} days"]),
        _data("How many customers have a credit limit that needs the finance director's sign-off?",
              f"SELECT COUNT(*) AS customers FROM customers WHERE credit_limit_eur > {P.CREDIT_SIGNOFF_EUR}",
              lambda r: f"{r[0][0]} customers have a credit limit above EUR {P.CREDIT_SIGNOFF_EUR:,}.",
              [f"A credit limit above EUR {P.CREDIT_SIGNOFF_EUR:,} requires sign-off by the finance director"],
              [f"{P.CREDIT_SIGNOFF_EUR:,}"]),
        _data("How many customers that are not key accounts have payment terms longer than the standard terms?",
              f"SELECT COUNT(*) AS customers FROM customers WHERE NOT key_account "
              f"AND payment_terms_days > {P.STANDARD_TERMS_DAYS}",
              lambda r: f"{r[0][0]} customers have more than the standard {P.STANDARD_TERMS_DAYS} days without "
                        "being key accounts.",
              [f"Standard payment terms are {P.STANDARD_TERMS_DAYS} days from the invoice date"],
              [f"{P.STANDARD_TERMS_DAYS} days"]),

        _none("data", "What is the average customer satisfaction score of Bluefin Logistics?", ["satisfaction"]),
        _none("data", "What were the CO2 emissions of all express shipments in 2024?", ["co2", "emission"]),
        _none("data", "Which driver delivered the most shipments in May 2024?", ["driver"]),
        _none("data", "How many shipments will Kestrel Freight ship in March 2026?", ["2026", "forecast"]),
        _none("data", "What is the average fuel consumption per 100 km of the carriers' trucks?",
              ["fuel consumption", "litre"]),
        _none("docs", "How many weeks of parental leave does Kestrel Freight offer its staff?", ["parental"]),
        _none("docs", "Does Kestrel Freight accept payment in cryptocurrency?", ["cryptocurrency", "bitcoin"]),
        _none("docs", "What are the customs clearance fees for shipments to the United Kingdom?",
              ["customs", "united kingdom"]),
        _none("docs", "What is the company's policy on deliveries by drone?", ["drone"]),
        _none("both", "How many shipments broke the night-time noise limit of the environmental policy?",
              ["noise", "environmental"]),
        _none("both", "How many claims exceeded the deductible set in the subcontractor penalty policy?",
              ["deductible", "penalty"]),
    ]


def build_golden(data_dir: Path, policies: dict[str, str]) -> list[dict[str, Any]]:
    """The golden items: each gold query run over the CSVs of ``data_dir``; ValueError when an evidence string is
    in no policy, an absent term is in a policy or a table header, or a query returns no rows."""
    con = connect(data_dir)
    texts = list(policies.values())
    headers = " ".join((Path(data_dir) / f"{t}.csv").read_text(encoding="utf-8").split("\n", 1)[0] for t in TABLES)
    corpus = (" ".join(texts) + " " + headers.replace("_", " ")).lower()
    seen: dict[str, int] = {}
    items = []
    for spec in specs():
        route, kind = spec["route"], spec["type"]
        group = "refuse" if kind == "unanswerable" else route
        k = seen[group] = seen.get(group, 0) + 1
        split = SPLIT_CYCLE[(k - 1) % len(SPLIT_CYCLE)]
        item: dict[str, Any] = {"id": f"ops-{group}-{k:03d}", "type": kind, "question": spec["question"]}
        if kind == "unanswerable":
            present = [t for t in spec["absent"] if t in corpus]
            if present:
                raise ValueError(f"{item['id']}: absent terms occur in the demo: {present}")
            item.update(reference_answer=NOT_COVERED, should_refuse=True, evidence=[], route=route, key_facts=[],
                        absent_terms=spec["absent"], split=split)
            items.append(item)
            continue
        for ev in spec["evidence"]:
            if not any(ev in text for text in texts):
                raise ValueError(f"{item['id']}: evidence not in any policy: {ev!r}")
        facts, extra = list(spec["facts"]), {}
        answer = spec["answer"]
        if "sql" in spec:
            rows = json_safe(con.execute(spec["sql"]).fetchall())
            if not rows:
                raise ValueError(f"{item['id']}: the gold query returned no rows")
            facts = [plain(v) for row in rows for v in row if v is not None] + facts
            answer = answer(rows)
            extra = {"gold_sql": spec["sql"], "gold_result": rows}
        item.update(reference_answer=answer, should_refuse=False, evidence=spec["evidence"], route=route,
                    key_facts=list(dict.fromkeys(facts)), **extra, split=split)
        items.append(item)
    con.close()
    return items


def counts(items: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Items per group (the route of an answerable item, else ``unanswerable``), per route field, per type, per
    split, and per group and split (``"data/test"``)."""
    out: dict[str, dict[str, int]] = {"group": {}, "route": {}, "type": {}, "split": {}, "group_split": {}}
    for it in items:
        group = "unanswerable" if it["should_refuse"] else it["route"]
        for key, value in (("group", group), ("route", it["route"]), ("type", it["type"]), ("split", it["split"]),
                           ("group_split", f"{group}/{it['split']}")):
            out[key][value] = out[key].get(value, 0) + 1
    return out
