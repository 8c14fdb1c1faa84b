"""`rag demo ops`: the synthetic freight-operations demo (rag/data/demo/: ops_demo.py, ops_policies.py, ops_golden.py).

Fast and model-free: the folder is written by the generator, re-read with the project's golden loader, every gold
query is re-run with DuckDB over the CSVs (independently of the generator's own connection), and the command is
driven through typer's runner and, for its one-line error, a real subprocess."""

from __future__ import annotations

import csv
import datetime as dt
import json
import subprocess
import sys
import tomllib
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from rag.cli import app
from rag.data.demo import ops_demo
from rag.data.demo.ops_demo import MARKER, write_ops_demo
from rag.errors import InputError
from rag.eval.golden import collapse, load_golden

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("carriers", "customers", "shipments", "claims")
runner = CliRunner()


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("ops") / "demo"
    write_ops_demo(dest, seed=7)
    return dest


@pytest.fixture(scope="module")
def items(demo: Path) -> list[dict]:
    return [json.loads(line) for line in (demo / "golden.jsonl").read_text(encoding="utf-8").splitlines()]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _group(item: dict) -> str:
    return "unanswerable" if item["should_refuse"] else item["route"]


def _policies(demo: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted((demo / "corpus" / "policies").glob("*.md"))}


def _query(demo: Path, sql: str) -> list[list]:
    """``sql`` over views of the demo's CSVs, rows as JSON values (dates ISO, decimals as floats)."""
    con = duckdb.connect(":memory:")
    con.execute("SET threads = 1")
    for name in TABLES:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_csv('{demo / 'corpus' / 'data' / name}.csv', header = true)")
    rows = con.execute(sql).fetchall()
    con.close()
    return [[v.isoformat() if isinstance(v, dt.date) else float(v) if isinstance(v, Decimal) else v for v in r]
            for r in rows]


def test_the_same_seed_writes_the_same_bytes_and_another_seed_other_data(tmp_path: Path, demo: Path):
    summary = write_ops_demo(tmp_path / "again", seed=7)
    again = _files(tmp_path / "again")
    assert again == _files(demo)
    assert {"README.md", MARKER, "golden.jsonl", "corpus/data/claims.csv", "corpus/data/claims.csv.meta.toml",
            "corpus/policies/claims.md"} <= set(again)
    assert summary["tables"] == {"carriers": 12, "customers": 80, "shipments": 2500, "claims": 300}
    assert summary["golden_counts"]["group"] == {"docs": 12, "data": 14, "both": 12, "unanswerable": 11}
    other = _files(Path(write_ops_demo(tmp_path / "other", seed=8)["dest"]))
    assert other["corpus/data/shipments.csv"] != again["corpus/data/shipments.csv"]
    assert other["corpus/policies/claims.md"] == again["corpus/policies/claims.md"]  # the rules do not depend on it
    assert json.loads(again[MARKER]) == {"demo": "ops", "seed": 7, "version": ops_demo.DEMO_VERSION,
                                         "files": ["README.md", "golden.jsonl", "corpus"]}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary sibling left


def test_the_golden_file_loads_with_the_project_loader_and_meets_the_minimums(demo: Path, items: list[dict]):
    loaded = load_golden(demo / "golden.jsonl")
    assert [it.id for it in loaded] == [it["id"] for it in items]
    assert len(loaded) >= 40
    groups = [("unanswerable" if it.should_refuse else it.meta["route"]) for it in loaded]
    assert {g: groups.count(g) for g in set(groups)} == {"docs": 12, "data": 14, "both": 12, "unanswerable": 11}
    for it in loaded:
        assert it.meta["route"] in ("docs", "data", "both")
        assert it.should_refuse == (it.type == "unanswerable")
        assert isinstance(it.meta["key_facts"], list)
        if it.should_refuse:
            assert it.evidence == [] and "gold_sql" not in it.meta and it.meta["absent_terms"]
        elif it.meta["route"] == "docs":
            assert it.evidence and "gold_sql" not in it.meta
        else:
            assert it.meta["gold_sql"].startswith("SELECT ") and it.meta["gold_result"]
            assert bool(it.evidence) == (it.meta["route"] == "both")
    assert {it.type for it in loaded} == {"answerable", "vague", "unanswerable"}


def test_every_gold_query_reruns_to_its_gold_result(demo: Path, items: list[dict]):
    queried = [it for it in items if "gold_sql" in it]
    assert len(queried) == 26
    for it in queried:
        assert _query(demo, it["gold_sql"]) == it["gold_result"], it["id"]


def test_a_top_n_answer_is_not_a_tie(demo: Path, items: list[dict]):
    for it in items:
        sql = it.get("gold_sql", "")
        if " LIMIT " in sql:
            head, n = sql.rsplit(" LIMIT ", 1)
            rows = _query(demo, f"{head} LIMIT {int(n) + 1}")
            assert len(rows) <= int(n) or rows[-1][-1] != rows[-2][-1], it["id"]


def test_the_gold_queries_run_on_the_index_database_too(tmp_path: Path, demo: Path, items: list[dict]):
    """The tables as `rag index` loads them (rag.data.tableset, with the .meta.toml sidecars) give the same rows."""
    tableset = pytest.importorskip("rag.data.tableset")
    if not hasattr(tableset, "build_database") or not hasattr(tableset, "discover_tables"):
        pytest.skip("rag.data.tableset has no build_database/discover_tables yet")
    record = tableset.build_database(tableset.discover_tables(demo / "corpus" / "data"), tmp_path / "t.duckdb")
    assert sorted(t["name"] for t in record["tables"]) == sorted(TABLES)
    con = duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True)
    try:
        for it in (it for it in items if "gold_sql" in it):
            rows = [[v.isoformat() if isinstance(v, dt.date) else float(v) if isinstance(v, Decimal) else v
                     for v in r] for r in con.execute(it["gold_sql"]).fetchall()]
            assert rows == it["gold_result"], it["id"]
    finally:
        con.close()


def test_evidence_is_verbatim_in_a_policy_and_absent_terms_are_absent(demo: Path, items: list[dict]):
    policies = _policies(demo)
    headers = " ".join((demo / "corpus" / "data" / f"{t}.csv").read_text().split("\n", 1)[0] for t in TABLES)
    everything = (" ".join(policies.values()) + " " + headers.replace("_", " ")).lower()
    for it in items:
        for ev in it["evidence"]:
            assert any(ev in text for text in policies.values()), (it["id"], ev)
            assert 4 <= len(ev.split()) <= 20 and collapse(ev) == ev
        for term in it.get("absent_terms", []):
            assert term.lower() not in everything, (it["id"], term)


def test_key_facts_come_from_the_result_or_the_policy(demo: Path, items: list[dict]):
    policies = " ".join(_policies(demo).values())
    for it in items:
        facts = it["key_facts"]
        if it["should_refuse"]:
            assert facts == []
            continue
        assert facts, it["id"]
        result = json.dumps(it.get("gold_result"))
        for fact in facts:
            if it["route"] == "data":
                assert fact in result, (it["id"], fact)
            elif it["route"] == "both":
                assert fact in result or any(fact in ev for ev in it["evidence"]), (it["id"], fact)
            else:
                assert fact in policies, (it["id"], fact)
        if it["route"] == "both":
            assert any(fact in result for fact in facts) and any(f in e for f in facts for e in it["evidence"])


def test_splits_are_stratified_by_route(items: list[dict]):
    for group in ("docs", "data", "both", "unanswerable"):
        splits = [it["split"] for it in items if _group(it) == group]
        assert set(splits) == {"train", "dev", "test"}, group
        assert splits.count("train") / len(splits) == pytest.approx(0.4, abs=0.1)
        assert splits.count("dev") / len(splits) == pytest.approx(0.3, abs=0.1)


def test_the_policies_and_tables_look_like_an_operation(demo: Path):
    policies = _policies(demo)
    assert len(policies) == 12
    for name, text in policies.items():
        assert text.startswith("# ") and text.count("\n## ") >= 3, name
        assert 150 <= len(text.split()) <= 400, name
    assert "Claims above EUR 5,000 require manager approval" in policies["claims.md"]
    data = demo / "corpus" / "data"
    for table in TABLES:
        header = next(csv.reader((data / f"{table}.csv").open(encoding="utf-8")))
        meta = tomllib.loads((data / f"{table}.csv.meta.toml").read_text(encoding="utf-8"))
        assert meta["description"] and list(meta["columns"]) == header, table
    one = lambda sql: _query(demo, sql)[0][0]
    assert one("SELECT COUNT(*) FROM shipments WHERE delivered_on IS NULL AND status = 'delivered'") == 0
    assert one("SELECT COUNT(*) FROM shipments WHERE status = 'in_transit'") > 0
    assert one("SELECT COUNT(*) FROM shipments WHERE status = 'lost'") > 0
    assert one("SELECT COUNT(*) FROM shipments WHERE delivered_on > DATE '2024-12-31' OR shipped_on < DATE '2024-01-01'") == 0
    assert one("SELECT COUNT(*) FROM claims c LEFT JOIN shipments s USING (shipment_id) WHERE s.shipment_id IS NULL") == 0
    assert one("SELECT COUNT(*) FROM shipments s LEFT JOIN carriers c USING (carrier_id) WHERE c.name IS NULL") == 0
    rates = [r[0] for r in _query(demo, "SELECT AVG(CASE WHEN delivered_on <= promised_on THEN 1 ELSE 0 END) "
                                        "FROM shipments WHERE delivered_on IS NOT NULL GROUP BY carrier_id")]
    assert min(rates) < 0.85 and max(rates) > 0.93  # some carriers are clearly worse than others
    assert set(r[0] for r in _query(demo, "SELECT DISTINCT status FROM claims")) == {"open", "approved", "rejected", "paid"}


def test_the_command_writes_the_demo_and_prints_the_next_commands(tmp_path: Path, isolated_sieve_home: Path):
    dest = tmp_path / "my demo"
    result = runner.invoke(app, ["demo", "ops", str(dest)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"rag index '{dest / 'corpus'}' --index-dir '{dest / 'index'}'" in out
    assert f"rag ask --index-dir '{dest / 'index'}' 'How many open claims exceed the amount" in out
    assert f"rag eval --golden '{dest / 'golden.jsonl'}' --index-dir '{dest / 'index'}'" in out
    assert (dest / "golden.jsonl").is_file() and (dest / MARKER).is_file()

    (dest / "index").mkdir()
    (dest / "index" / "kept.txt").write_text("an index built from the demo")
    again = runner.invoke(app, ["demo", "ops", str(dest)])  # the same seed over a demo folder: fine
    assert again.exit_code == 0 and (dest / "index" / "kept.txt").is_file()
    other = runner.invoke(app, ["demo", "ops", str(dest), "--seed", "3"])
    assert isinstance(other.exception, InputError) and "--force" in str(other.exception)
    forced = runner.invoke(app, ["demo", "ops", str(dest), "--seed", "3", "--force"])
    assert forced.exit_code == 0 and json.loads((dest / MARKER).read_text())["seed"] == 3
    assert (dest / "index" / "kept.txt").is_file() and "rebuild it" in forced.stderr

    default = runner.invoke(app, ["demo", "ops"])
    assert default.exit_code == 0 and (isolated_sieve_home / "demo" / "ops" / "golden.jsonl").is_file()


def test_the_command_refuses_a_folder_that_is_not_a_demo(tmp_path: Path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("my own files")
    result = runner.invoke(app, ["demo", "ops", str(mine), "--force"])
    assert isinstance(result.exception, InputError)
    message = str(result.exception)
    assert str(mine) in message and "not a demo folder" in message and "new or empty folder" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"] and (mine / "notes.md").read_text() == "my own files"

    proc = subprocess.run([sys.executable, "-m", "rag", "demo", "ops", str(mine)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert proc.returncode == 1 and proc.stdout == ""
    assert errors == [f"Error: {message}"] and "\n" not in message


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch):
    import rag.data.demo.ops_golden as golden

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(golden, "build_golden", boom)
    with pytest.raises(RuntimeError):
        write_ops_demo(tmp_path / "demo")
    assert list(tmp_path.iterdir()) == []
