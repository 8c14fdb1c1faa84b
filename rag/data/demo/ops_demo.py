"""``rag demo ops``: an offline, synthetic freight-operations dataset with a golden set, for the data route.

:func:`write_ops_demo` writes, from ``random.Random(seed)`` alone (no wall clock, no real data), the same bytes for
the same seed::

    DEST/.sieve-demo.json            the marker: what wrote the folder (only folders with it are overwritten)
    DEST/README.md                   what the folder is, and the commands to index and evaluate it
    DEST/corpus/policies/*.md        12 policy documents of Kestrel Freight (rag.data.demo.ops_policies)
    DEST/corpus/data/<table>.csv     carriers, customers, shipments, claims
    DEST/corpus/data/<table>.csv.meta.toml   the table's description and one per column
    DEST/golden.jsonl                questions routed docs | data | both, and unanswerable ones (rag.data.demo.ops_golden)

The folder is built in a temporary sibling and moved into place; over a previous demo only the entries above are
replaced, so an index or eval runs kept inside it survive.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import random
import shutil
import tempfile
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from rag.data.demo import ops_policies as P
from rag.errors import InputError
from rag.paths import sieve_home

DEMO_VERSION = 2  # 2: the sidecars list aliases (the words staff use for a table's rows)
MARKER = ".sieve-demo.json"
OWNED = (MARKER, "README.md", "golden.jsonl", "corpus")  # what a rewrite replaces; anything else is left alone

COLUMNS = {
    "carriers": ("Road carriers subcontracted by Kestrel Freight, one row per carrier.", {
        "carrier_id": "Carrier identifier, e.g. C01 (shipments.carrier_id refers to it).",
        "name": "Carrier company name.",
        "region": "Region the carrier mainly serves: North, South, East, West or Central.",
        "contract_tier": "Contract tier: gold, silver or bronze (only gold may carry hazardous goods).",
    }),
    "customers": ("Customer accounts, one row per customer.", {
        "customer_id": "Customer identifier, e.g. CU001 (shipments.customer_id refers to it).",
        "name": "Customer company name.",
        "country": "Country of the customer's head office.",
        "segment": "Industry segment: food, pharma, chemicals, retail, automotive or electronics.",
        "key_account": "true for key accounts (eligible for longer payment terms).",
        "payment_terms_days": "Agreed payment terms in days from the invoice date.",
        "credit_limit_eur": "Credit limit of the account in euros.",
    }),
    "shipments": ("Shipments shipped in 2024, one row per shipment, as of 2024-12-31.", {
        "shipment_id": "Shipment identifier, e.g. S00001.",
        "customer_id": "The customer who booked it (customers.customer_id).",
        "carrier_id": "The carrier that carried it (carriers.carrier_id).",
        "origin": "Origin depot city.",
        "destination": "Destination city.",
        "service_level": "express, standard or economy.",
        "weight_kg": "Gross weight in kilograms.",
        "hazardous": "true when the shipment contains dangerous goods.",
        "freight_eur": "Base freight charge in euros, before the fuel surcharge.",
        "shipped_on": "Date the shipment was collected.",
        "promised_on": "Promised delivery date (ship date plus the service level's transit days).",
        "delivered_on": "Actual delivery date; empty while in transit or when lost.",
        "status": "delivered, in_transit or lost.",
    }),
    "claims": ("Customer claims against shipments, one row per claim.", {
        "claim_id": "Claim identifier, e.g. CL0001.",
        "shipment_id": "The shipment claimed for (shipments.shipment_id).",
        "amount_eur": "Amount claimed in euros.",
        "filed_on": "Date the claim was filed.",
        "status": "open, approved, rejected or paid.",
        "reason": "damage, loss, shortage or delay.",
    }),
}

_CARRIERS = ["Northwind Haulage", "Bluefin Logistics", "Alpine Express Freight", "Baltic Line Transport",
             "Meridian Carriers", "Ironbridge Freight", "Silverline Cargo", "Tagus Road Services", "Danube Connect",
             "Celtic Crossing Haulage", "Vistula Freight Partners", "Rhone Valley Transport"]
_REGIONS = ["North", "South", "East", "West", "Central"]
_HUBS = ["Rotterdam", "Hamburg", "Antwerp", "Lyon", "Milan", "Warsaw"]
_CITIES = _HUBS + ["Madrid", "Prague", "Vienna", "Gothenburg", "Barcelona", "Munich", "Brussels", "Copenhagen",
                   "Budapest", "Porto", "Zurich", "Marseille"]
_COUNTRIES = {"Germany": "GmbH", "Netherlands": "B.V.", "France": "SAS", "Italy": "S.p.A.", "Spain": "S.L.",
              "Poland": "Sp. z o.o.", "Belgium": "NV", "Czechia": "s.r.o."}
_PREFIXES = ["Alder", "Birch", "Cobalt", "Delta", "Ember", "Fjord", "Granite", "Harbor", "Iris", "Juniper", "Kite",
             "Linden", "Marble", "Nordic", "Orchid", "Pioneer", "Quarry", "Redwood", "Summit", "Tidal", "Umber",
             "Vertex", "Willow", "Zephyr"]
_TRADES = {"Foods": "food", "Beverages": "food", "Pharma": "pharma", "Chemicals": "chemicals", "Retail": "retail",
           "Home": "retail", "Textiles": "retail", "Motors": "automotive", "Parts": "automotive",
           "Electronics": "electronics"}
_RELIABILITY = [0.975, 0.965, 0.955, 0.945, 0.935, 0.925, 0.915, 0.905, 0.885, 0.855, 0.81, 0.75]
_SNAPSHOT = date.fromisoformat(P.SNAPSHOT)


def default_dest() -> Path:
    """Where ``rag demo ops`` writes without a destination: ``$SIEVE_HOME/demo/ops``."""
    return sieve_home() / "demo" / "ops"


def generate_tables(seed: int = 7) -> dict[str, list[dict[str, Any]]]:
    """The four tables as lists of rows (dicts in column order), every value drawn from ``random.Random(seed)``."""
    rng = random.Random(seed)
    names = rng.sample(_CARRIERS, len(_CARRIERS))
    tiers = rng.sample(["gold"] * 4 + ["silver"] * 4 + ["bronze"] * 4, 12)
    reliability = rng.sample(_RELIABILITY, 12)
    carriers = [{"carrier_id": f"C{i + 1:02d}", "name": names[i], "region": rng.choice(_REGIONS),
                 "contract_tier": tiers[i]} for i in range(12)]
    quality = {c["carrier_id"]: r + rng.uniform(-0.015, 0.015) for c, r in zip(carriers, reliability)}
    volume = {c["carrier_id"]: rng.uniform(0.5, 1.5) for c in carriers}

    customers = []
    for i, (prefix, trade) in enumerate(rng.sample([(p, t) for p in _PREFIXES for t in _TRADES], 80)):
        country = rng.choice(sorted(_COUNTRIES))
        key = rng.random() < 0.15
        terms = (P.KEY_ACCOUNT_TERMS_DAYS if rng.random() < 0.8 else 45) if key else (
            P.STANDARD_TERMS_DAYS if rng.random() < 0.9 else rng.choice([45, 60]))
        limit = rng.randrange(60, 210, 10) * 1000 if key else min(150_000, round(rng.lognormvariate(math.log(20_000), 0.7), -3))
        customers.append({"customer_id": f"CU{i + 1:03d}", "name": f"{prefix} {trade} {_COUNTRIES[country]}",
                          "country": country, "segment": _TRADES[trade], "key_account": key,
                          "payment_terms_days": terms, "credit_limit_eur": max(5000, int(limit))})
    demand = {c["customer_id"]: rng.lognormvariate(0, 0.9) * (2.5 if c["key_account"] else 1) for c in customers}

    gold = [c["carrier_id"] for c in carriers if c["contract_tier"] == P.HAZARDOUS_TIER]
    rows = []
    for _ in range(2500):
        level = rng.choices(list(P.TRANSIT_DAYS), weights=[20, 55, 25])[0]
        hazardous = rng.random() < 0.04
        carrier = (rng.choice(gold) if hazardous and rng.random() < 0.85
                   else rng.choices(list(volume), weights=list(volume.values()))[0])
        median = {"express": 80, "standard": 400, "economy": 900}[level]
        weight = round(min(P.MAX_KG, max(0.5, rng.lognormvariate(math.log(median), 1.0))), 1)
        rate = {"express": (45, 1.9), "standard": (30, 0.6), "economy": (25, 0.35)}[level]
        freight = round((rate[0] + rate[1] * weight) * rng.uniform(0.9, 1.1), 2)
        shipped = date(2024, 1, 1) + timedelta(days=rng.randrange(366))
        shipped -= timedelta(days=1 if shipped.weekday() == 6 else 0)  # no collections on Sundays
        transit = P.TRANSIT_DAYS[level]
        promised = shipped + timedelta(days=transit)
        on_time = quality[carrier] - (0.03 if level == "express" else 0.0)
        if rng.random() < on_time:
            delivered = shipped + timedelta(days=rng.randint(max(1, transit * 2 // 3), transit))
        else:
            delivered = promised + timedelta(days=min(15, 1 + int(rng.expovariate(1 / 2.2))))
        lost = rng.random() < 0.005 and promised + timedelta(days=7) <= _SNAPSHOT
        status = "lost" if lost else "in_transit" if delivered > _SNAPSHOT else "delivered"
        rows.append({"customer_id": rng.choices(list(demand), weights=list(demand.values()))[0],
                     "carrier_id": carrier, "origin": (origin := rng.choice(_HUBS)),
                     "destination": rng.choice([c for c in _CITIES if c != origin]), "service_level": level,
                     "weight_kg": weight, "hazardous": hazardous, "freight_eur": freight, "shipped_on": shipped,
                     "promised_on": promised, "delivered_on": delivered if status == "delivered" else None,
                     "status": status})
    rows.sort(key=lambda r: (r["shipped_on"], r["customer_id"], r["carrier_id"], r["freight_eur"]))
    shipments = [{"shipment_id": f"S{i + 1:05d}", **r} for i, r in enumerate(rows)]
    return {"carriers": carriers, "customers": customers, "shipments": shipments,
            "claims": _claims(rng, shipments, quality)}


def _claims(rng: random.Random, shipments: list[dict], quality: dict[str, float]) -> list[dict[str, Any]]:
    """About 300 claims: every lost shipment, and delivered ones drawn more often from late, hazardous shipments
    and the worse carriers (weighted sampling without replacement: the largest ``u ** (1 / w)``)."""
    lost = [s for s in shipments if s["status"] == "lost"]
    pool = [s for s in shipments if s["status"] == "delivered" and s["delivered_on"] < _SNAPSHOT]
    weight = lambda s: ((1 + 4 * (1 - quality[s["carrier_id"]])) * (2.0 if s["delivered_on"] > s["promised_on"] else 1)
                        * (1.5 if s["hazardous"] else 1))
    drawn = sorted(pool, key=lambda s: rng.random() ** (1 / weight(s)), reverse=True)[:300 - len(lost)]
    rows = []
    for s in sorted(lost + drawn, key=lambda s: s["shipment_id"]):
        late = s["delivered_on"] is not None and s["delivered_on"] > s["promised_on"]
        reason = "loss" if s["status"] == "lost" else ("delay" if late and rng.random() < 0.4 else
                                                       rng.choices(["damage", "shortage", "delay"], [60, 30, 10])[0])
        amount = (s["weight_kg"] * rng.lognormvariate(math.log(25), 0.8) if reason == "loss"
                  else s["freight_eur"] * rng.uniform(0.2, 1.0) if reason == "delay"
                  else rng.lognormvariate(math.log(1800 if reason == "damage" else 900), 0.9 if reason == "damage" else 0.8))
        base = s["delivered_on"] or s["promised_on"]
        days = rng.randint(P.CLAIM_FILING_DAYS + 1, 70) if rng.random() < 0.12 else rng.randint(1, P.CLAIM_FILING_DAYS)
        filed = min(base + timedelta(days=days), _SNAPSHOT)
        age = (_SNAPSHOT - filed).days
        if (filed - base).days > P.CLAIM_FILING_DAYS:
            status = "rejected" if rng.random() < 0.85 else "open"
        else:
            odds = [80, 20, 0, 0] if age <= 14 else [35, 20, 15, 30] if age <= 60 else [8, 7, 20, 65]
            status = rng.choices(["open", "approved", "rejected", "paid"], odds)[0]
        rows.append({"shipment_id": s["shipment_id"], "amount_eur": round(min(150_000.0, max(25.0, amount)), 2),
                     "filed_on": filed, "status": status, "reason": reason})
    rows.sort(key=lambda r: (r["filed_on"], r["shipment_id"]))
    return [{"claim_id": f"CL{i + 1:04d}", **r} for i, r in enumerate(rows)]


def _cell(value: Any, column: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.1f}" if column == "weight_kg" else f"{value:.2f}"
    return value.isoformat() if isinstance(value, date) else str(value)


def table_csv(rows: list[dict[str, Any]]) -> str:
    """CSV text with a header; an empty field is NULL, booleans are true/false, dates ISO."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(list(rows[0]))
    writer.writerows([_cell(v, k) for k, v in r.items()] for r in rows)
    return out.getvalue()


# Other words the operations staff use for a table's rows: the sidecar's ``aliases``, which the router links to the
# table and the SQL writer is shown ("how many loads went out", "hauliers in the North").
ALIASES = {
    "carriers": ["haulier", "haulage firm", "trucking company"],
    "customers": ["client"],
    "shipments": ["load", "consignment", "booking"],
    "claims": [],
}


def meta_toml(table: str) -> str:
    """The ``<table>.csv.meta.toml`` sidecar: ``description``, ``aliases`` and a ``[columns]`` table, column ->
    description."""
    description, columns = COLUMNS[table]
    lines = [f"description = {json.dumps(description)}"]
    if ALIASES[table]:
        lines.append(f"aliases = [{', '.join(map(json.dumps, ALIASES[table]))}]")
    lines += ["", "[columns]"]
    return "\n".join(lines + [f"{name} = {json.dumps(text)}" for name, text in columns.items()]) + "\n"


README = """# Kestrel Freight: the ops demo

A synthetic freight-operations dataset written by `rag demo ops` (seed {seed}); nothing in it is real.

- `corpus/policies/`: the policy documents of a fictional carrier, Kestrel Freight.
- `corpus/data/`: its tables ({tables}), each with a `.meta.toml` description and the words staff use for its rows (`aliases`); they describe 2024, as of {snapshot}.
- `golden.jsonl`: {n} questions; `route` says where the answer is (`docs`, `data` or `both`), and unanswerable ones
  have `should_refuse: true`. Data questions carry `gold_sql`, `gold_result` (computed with DuckDB when the folder
  was written) and the `key_facts` an answer must contain.

From this folder:

```
rag index corpus --index-dir index
rag eval --golden golden.jsonl --index-dir index
```
"""


def write_ops_demo(dest: Path, *, seed: int = 7, force: bool = False) -> dict[str, Any]:
    """Write the demo into ``dest`` (see the module docstring) and return a summary: paths, row counts per table,
    golden counts by route, type and split. ``dest`` must be new, empty, or a previous demo folder (it holds
    :data:`MARKER`); a previous demo of another seed or version is replaced only with ``force``."""
    from rag.data.demo.ops_golden import build_golden, counts

    dest = Path(dest).expanduser().absolute()
    previous = _check_dest(dest, seed, force)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        tables = generate_tables(seed)
        data, policies = tmp / "corpus" / "data", tmp / "corpus" / "policies"
        data.mkdir(parents=True)
        policies.mkdir()
        for name, text in P.policy_documents().items():
            (policies / name).write_text(text, encoding="utf-8")
        for name, rows in tables.items():
            (data / f"{name}.csv").write_text(table_csv(rows), encoding="utf-8")
            (data / f"{name}.csv.meta.toml").write_text(meta_toml(name), encoding="utf-8")
        items = build_golden(data, P.policy_documents())
        (tmp / "golden.jsonl").write_text("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items),
                                          encoding="utf-8")
        (tmp / "README.md").write_text(README.format(seed=seed, tables=", ".join(tables), n=len(items),
                                                     snapshot=P.SNAPSHOT), encoding="utf-8")
        marker = {"demo": "ops", "seed": seed, "version": DEMO_VERSION, "files": list(OWNED[1:])}
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        _swap_in(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"dest": str(dest), "corpus": str(dest / "corpus"), "golden": str(dest / "golden.jsonl"),
            "policies": len(P.policy_documents()), "tables": {name: len(rows) for name, rows in tables.items()},
            "golden_counts": counts(items), "seed": seed, "version": DEMO_VERSION,
            "replaced": previous, "kept": sorted(p.name for p in dest.iterdir() if p.name not in OWNED)}


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The marker of a demo folder, or None when ``folder`` holds none (or an unreadable one)."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and marker.get("demo") == "ops" else None


def _check_dest(dest: Path, seed: int, force: bool) -> dict[str, Any] | None:
    """InputError unless ``dest`` may be written; the previous demo's marker when it is one."""
    if dest.exists() and not dest.is_dir():
        raise InputError(f"{dest} is a file, not a folder; give a new or empty folder for the demo")
    if not dest.exists() or not any(dest.iterdir()):
        return None
    marker = read_marker(dest)
    if marker is None:
        raise InputError(f"{dest} is not empty and is not a demo folder (no {MARKER}); give a new or empty folder, "
                         "e.g. rag demo ops ./ops-demo")
    if (marker.get("seed"), marker.get("version")) != (seed, DEMO_VERSION) and not force:
        raise InputError(f"{dest} holds the ops demo of seed {marker.get('seed')} (version {marker.get('version')}); "
                         f"add --force to replace it with seed {seed}, then rebuild its index")
    return marker


def _swap_in(tmp: Path, dest: Path) -> None:
    """Move the new folder into place: whole when ``dest`` is new or empty, else entry by entry over a previous
    demo (each old entry moved aside first, removed once the new one is in)."""
    if not dest.exists() or not any(dest.iterdir()):
        if dest.exists():
            dest.rmdir()
        os.replace(tmp, dest)
        tmp.mkdir()  # the caller's cleanup removes it
        return
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
    try:
        for name in OWNED[1:] + OWNED[:1]:  # the marker last: it vouches for the rest
            if (dest / name).exists():
                os.replace(dest / name, old / name)
            os.replace(tmp / name, dest / name)
    finally:
        shutil.rmtree(old, ignore_errors=True)
