"""Tables beside the documents: real CSV, Parquet, JSON lines, SQLite and DuckDB files read into the index's
DuckDB database (rag.data.tableset), built and swapped in with a real small index (rag.index.build), and
``rag index`` taking them from the folder, from ``--tables``, or not at all (``--no-tables``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from rag.cli import app
from rag.data.tableset import build_database, discover_tables, schema_summary, table_name
from rag.errors import IndexMismatch, InputError
from rag.index.build import build_index
from rag.index.layout import replace_refusal
from rag.index.store import Index, rebuild_command
from tests.catalogue_support import checksums
from tests.retrieval_support import copy_index, settings, small_chunks

runner = CliRunner()

CLAIMS_META = """description = "One row per insurance claim"

[columns]
amount = "claim amount in EUR"
"""


def write_tables(folder: Path) -> dict[str, Path]:
    """One table file of each kind, with descriptions in a sidecar, SQL comments and DuckDB COMMENTs."""
    folder.mkdir(parents=True, exist_ok=True)
    claims = folder / "claims.csv"
    claims.write_text("claim_id,amount,city,filed\nCL1,120.5,Boston,2024-01-02\nCL2,88.0,Paris,2024-02-03\n"
                      "CL3,,Boston,2024-03-04\nCL4,120.5,Lyon,2024-03-05\n", encoding="utf-8")
    (folder / "claims.csv.meta.toml").write_text(CLAIMS_META, encoding="utf-8")
    parquet = folder / "Depot Sizes.parquet"
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT 'D' || range AS depot, range * 10 AS bays FROM range(4)) TO '{parquet}'")
    events = folder / "events.jsonl"
    events.write_text('{"kind": "scan", "n": 1}\n{"kind": null, "n": 2}\n', encoding="utf-8")
    shop = folder / "shop.sqlite"
    with sqlite3.connect(shop) as db:
        db.execute("CREATE TABLE orders ( -- one row per order\n  id INTEGER PRIMARY KEY, -- order number\n"
                   "  total REAL,\n  placed DATE\n)")
        db.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(1, 9.5, "2024-01-01"), (2, 3, "2024-02-01")])
        db.execute("CREATE TABLE returns (order_id INTEGER, reason TEXT)")  # empty: kept, with 0 rows
    db.close()
    stock = folder / "warehouse.duckdb"
    with duckdb.connect(str(stock)) as con:
        con.execute("CREATE TABLE stock (sku VARCHAR, qty INTEGER)")
        con.execute("INSERT INTO stock VALUES ('A-1', 5), ('B-2', 0)")
        con.execute("COMMENT ON TABLE stock IS 'units on hand per SKU'")
        con.execute("COMMENT ON COLUMN stock.qty IS 'units'")
    return {"claims": claims, "parquet": parquet, "events": events, "shop": shop, "stock": stock}


def by_name(record: dict) -> dict[str, dict]:
    return {t["name"]: t for t in record["tables"]}


def test_every_kind_of_table_file_is_read_with_its_types_rows_examples_and_descriptions(tmp_path: Path):
    files = write_tables(tmp_path / "data")
    sources = discover_tables(tmp_path / "data")
    assert sources == sorted(files.values())  # the sidecar is not a table
    record = build_database(sources, tmp_path / "tables.duckdb")
    assert record["file"] == "tables.duckdb" and record["sources"] == [str(p) for p in sources]
    tables = by_name(record)
    assert list(tables) == ["depot_sizes", "claims", "events", "orders", "returns", "stock"]
    claims = tables["claims"]
    assert (claims["source"], claims["rows"], claims["description"]) == (str(files["claims"]), 4,
                                                                         "One row per insurance claim")
    assert claims["columns"] == [
        {"name": "claim_id", "type": "VARCHAR", "description": None, "examples": ["CL1", "CL2", "CL3"]},
        {"name": "amount", "type": "DOUBLE", "description": "claim amount in EUR", "examples": ["120.5", "88.0"]},
        {"name": "city", "type": "VARCHAR", "description": None, "examples": ["Boston", "Paris", "Lyon"]},
        {"name": "filed", "type": "DATE", "description": None,
         "examples": ["2024-01-02", "2024-02-03", "2024-03-04"]},
    ]
    assert [(c["name"], c["type"]) for c in tables["depot_sizes"]["columns"]] == [("depot", "VARCHAR"),
                                                                                 ("bays", "BIGINT")]
    assert tables["events"]["columns"][0] == {"name": "kind", "type": "VARCHAR", "description": None,
                                              "examples": ["scan"]}
    orders = tables["orders"]
    assert (orders["source"], orders["rows"], orders["description"]) == (str(files["shop"]), 2, "one row per order")
    assert [(c["name"], c["type"], c["description"]) for c in orders["columns"]] == [
        ("id", "BIGINT", "order number"), ("total", "DOUBLE", None), ("placed", "DATE", None)]
    assert (tables["returns"]["rows"], [c["examples"] for c in tables["returns"]["columns"]]) == (0, [[], []])
    assert (tables["stock"]["description"], tables["stock"]["columns"][1]["description"]) == ("units on hand per SKU",
                                                                                               "units")
    json.dumps(record, allow_nan=False)  # JSON-safe, as the manifest needs
    # the descriptions live in the database too, and no WAL is left beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "tables.duckdb"]
    with duckdb.connect(str(tmp_path / "tables.duckdb"), read_only=True) as con:
        assert con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'claims'").fetchone()[0] == (
            "One row per insurance claim")
        assert con.execute("SELECT comment FROM duckdb_columns() WHERE table_name = 'claims' AND column_name = "
                           "'amount'").fetchone()[0] == "claim amount in EUR"
        assert con.execute("SELECT sum(total) FROM orders").fetchone()[0] == 12.5


def test_schema_summary_is_the_compact_text_the_sql_writer_reads(tmp_path: Path):
    files = write_tables(tmp_path / "data")
    record = build_database([files["claims"]], tmp_path / "t.duckdb")
    assert schema_summary(record) == (
        "TABLE claims (4 rows): One row per insurance claim\n"
        "  claim_id VARCHAR -- e.g. CL1, CL2, CL3\n"
        "  amount DOUBLE -- claim amount in EUR; e.g. 120.5, 88.0\n"
        "  city VARCHAR -- e.g. Boston, Paris, Lyon\n"
        "  filed DATE -- e.g. 2024-01-02, 2024-02-03, 2024-03-04")
    assert schema_summary(record, examples=1).splitlines()[2] == "  amount DOUBLE -- claim amount in EUR; e.g. 120.5"


def test_table_names_are_plain_identifiers_and_a_clash_names_both_files(tmp_path: Path):
    assert [table_name(s) for s in ("Claims 2024", "2024-sales", "order", "--")] == [
        "claims_2024", "t_2024_sales", "order_t", "t"]
    (tmp_path / "sub").mkdir()
    (tmp_path / "claims.csv").write_text("a\n1\n", encoding="utf-8")
    (tmp_path / "sub" / "Claims.tsv").write_text("a\tb\n1\t2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"claims\.csv and .*sub/Claims\.tsv both become table 'claims'; rename one"):
        build_database(discover_tables(tmp_path), tmp_path / "t.duckdb")


@pytest.mark.parametrize(("sidecar", "says"), [
    ("[columns]\nammount = 'typo'\n", r"claims\.csv\.meta\.toml: column 'ammount' is not in table claims \(claims\.csv\); "
                                     r"its columns are: claim_id, amount, city, filed"),
    ("description = \n", r"claims\.csv\.meta\.toml: not a valid TOML file"),
    ("descripton = 'x'\n", r"claims\.csv\.meta\.toml: expected description = .* \(found descripton\)"),
    ("aliases = 'case'\n", r"claims\.csv\.meta\.toml: aliases must be a list of words .* e\.g\. aliases = \["),
    ("aliases = ['case', '']\n", r"claims\.csv\.meta\.toml: aliases must be a list"),
    ("[columns]\ncity = {aliases = 'town'}\n", r"claims\.csv\.meta\.toml: column 'city': expected city = "
                                              r"\{description = .*aliases = \[.*\(found a value of the wrong type\)"),
    ("[columns]\ncity = {descr = 'x'}\n", r"claims\.csv\.meta\.toml: column 'city': expected .* \(found descr\)"),
])
def test_a_bad_sidecar_names_its_file_and_what_is_wrong(tmp_path: Path, sidecar: str, says: str):
    files = write_tables(tmp_path / "data")
    (tmp_path / "data" / "claims.csv.meta.toml").write_text(sidecar, encoding="utf-8")
    with pytest.raises(InputError, match=says):
        build_database([files["claims"]], tmp_path / "t.duckdb")


def test_a_database_sidecar_describes_its_tables_by_name(tmp_path: Path):
    files = write_tables(tmp_path / "data")
    side = tmp_path / "data" / "shop.sqlite.meta.toml"
    side.write_text("[tables.returns]\ndescription = 'returned orders'\n[tables.returns.columns]\nreason = 'why'\n",
                    encoding="utf-8")
    tables = by_name(build_database([files["shop"]], tmp_path / "t.duckdb"))
    assert tables["returns"]["description"] == "returned orders"
    assert tables["returns"]["columns"][1]["description"] == "why"
    assert tables["orders"]["description"] == "one row per order"  # its SQL comment, not overridden
    side.write_text("[tables.refunds]\ndescription = 'x'\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"shop\.sqlite\.meta\.toml: \[tables\.refunds\]: the database holds no "
                                         r"table 'refunds'; its tables are: orders, returns"):
        build_database([files["shop"]], tmp_path / "t2.duckdb")


@pytest.mark.parametrize(("name", "content", "says"), [
    ("bad.parquet", b"not parquet", r"bad\.parquet: cannot read it as PARQUET \(.*Parquet"),
    ("bad.jsonl", b"{oops\n", r"bad\.jsonl: cannot read it as JSONL \(Malformed JSON"),
    ("bad.sqlite", b"SQLite format 3\x00" + b"junk" * 40, r"bad\.sqlite: cannot read this SQLite database"),
    ("bad.duckdb", b"nothing like a database", r"bad\.duckdb: not a SQLite or DuckDB database"),
    ("empty.csv", b"", r"empty\.csv: empty file"),
])
def test_a_malformed_file_is_one_line_naming_it(tmp_path: Path, name: str, content: bytes, says: str):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(InputError, match=says) as caught:
        build_database([tmp_path / name], tmp_path / "t.duckdb")
    assert "\n" not in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no half-written database left


def test_discovery_skips_hidden_files_other_db_files_and_index_folders(tmp_path: Path):
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.csv").write_text("a\n1\n")
    (tmp_path / ".y.csv").write_text("a\n1\n")
    (tmp_path / "Thumbs.db").write_bytes(b"\xd0\xcf\x11\xe0 an OLE file, not a database")
    (tmp_path / "notes.md").write_text("# notes\n")
    (tmp_path / "a.ndjson").write_text('{"a": 1}\n')
    copy_index(tmp_path / "idx")  # its chunks.jsonl is the index's, not a table
    assert discover_tables(tmp_path) == [tmp_path / "a.ndjson"]
    assert discover_tables(tmp_path / "a.ndjson") == [tmp_path / "a.ndjson"]


# ---------------------------------------------------------------------- the index build
def test_an_index_with_tables_holds_the_database_and_the_record(tmp_path: Path):
    files = write_tables(tmp_path / "data")
    root = copy_index(tmp_path / "idx")  # the same chunks: embeddings reused, only the tables are new
    index = build_index(list(small_chunks()), root, settings(index_dir=root), show_progress=False,
                        tables=sorted(files.values()))
    assert sorted(p.name for p in root.iterdir()) == ["bm25", "chunks.jsonl", "dense.faiss", "embeddings.npy",
                                                      "manifest.json", "tables.duckdb", "windows.faiss", "windows.npy"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "idx"]  # no staging or build folder left
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["tables"] == index.tables_record
    assert list(by_name(index.tables_record)) == ["depot_sizes", "claims", "events", "orders", "returns", "stock"]
    assert index.tables_path == root / "tables.duckdb" and "tables_seconds" in manifest["timings"]
    assert replace_refusal(root) is None  # a later build may replace it
    with duckdb.connect(str(index.tables_path), read_only=True, config={"enable_external_access": False}) as con:
        assert con.execute("SELECT count(*) FROM claims WHERE city = 'Boston'").fetchone()[0] == 2
    again = Index.load(root, settings(index_dir=root))
    assert again.tables_record == index.tables_record

    # rebuilt without tables: the swap replaces the folder, so no database is left
    plain = build_index(list(small_chunks()), root, settings(index_dir=root), show_progress=False)
    assert not (root / "tables.duckdb").exists()
    assert (plain.tables_record, plain.tables_path) == (None, None) and "tables" not in plain.manifest


def test_a_table_that_fails_leaves_the_previous_index_untouched(tmp_path: Path):
    files = write_tables(tmp_path / "data")
    root = copy_index(tmp_path / "idx")
    build_index(list(small_chunks()), root, settings(index_dir=root), show_progress=False, tables=[files["claims"]])
    before = checksums(root)
    (tmp_path / "data" / "broken.parquet").write_bytes(b"PAR1 but not really")
    with pytest.raises(InputError, match=r"broken\.parquet: cannot read it as PARQUET"):
        build_index(list(small_chunks())[:3], root, settings(index_dir=root), show_progress=False,
                    tables=[files["claims"], tmp_path / "data" / "broken.parquet"])
    assert checksums(root) == before  # same manifest, same files, byte for byte
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "idx"]


def test_a_missing_database_is_an_incomplete_index(tmp_path: Path):
    files = write_tables(tmp_path / "data")
    root = copy_index(tmp_path / "idx")
    build_index(list(small_chunks()), root, settings(index_dir=root), show_progress=False, tables=[files["events"]])
    (root / "tables.duckdb").unlink()
    with pytest.raises(IndexMismatch, match=r"incomplete \(missing tables\.duckdb\)\. Rebuild it with: rag index "
                                            r"--tables .*events\.jsonl"):
        Index.load(root, settings(index_dir=root))


def test_the_rebuild_command_names_tables_from_outside_the_folder():
    manifest = {"corpus": {"source": "folder:/work/docs"},
                "tables": {"sources": ["/work/docs/data/claims.csv", "/exports/stock.parquet"]}}
    assert rebuild_command(Path("/work/idx"), manifest) == (
        "rag index /work/docs --tables /exports/stock.parquet --index-dir /work/idx")


# ---------------------------------------------------------------------- rag index
@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "claims.md").write_text("# Claims\n\nA claim over 100 EUR needs a receipt.\n", encoding="utf-8")
    (folder / "data").mkdir()
    (folder / "data" / "claims.csv").write_text("claim_id,amount\nCL1,120.5\nCL2,88.0\n", encoding="utf-8")
    return folder


def test_rag_index_takes_the_tables_in_the_folder_or_leaves_them_out(tmp_path: Path, docs: Path):
    idx = tmp_path / "idx"
    result = runner.invoke(app, ["index", str(docs), "--index-dir", str(idx)])
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith("; tables: claims (2 rows)")
    assert "tables: claims (2 rows)" in result.stderr  # the progress output says it too
    assert "unsupported" not in result.stderr
    index = Index.load(idx, settings(index_dir=idx))
    assert index.manifest["counts"]["documents"] == 1 and list(by_name(index.tables_record)) == ["claims"]

    extra = write_tables(tmp_path / "exports")
    result = runner.invoke(app, ["index", str(docs), "--index-dir", str(idx), "-q", "--tables", str(extra["stock"])])
    assert result.exit_code == 0, result.output
    assert "tables: claims (2 rows), stock (2 rows)" in result.stdout
    index = Index.load(idx, settings(index_dir=idx))
    assert f"--tables {extra['stock']}" in rebuild_command(idx, index.manifest)

    result = runner.invoke(app, ["index", str(docs), "--index-dir", str(idx), "-q", "--no-tables"])
    assert result.exit_code == 0, result.output
    assert "tables" not in result.stdout and not (idx / "tables.duckdb").exists()


def test_rag_index_refuses_a_folder_of_tables_alone(tmp_path: Path, docs: Path):
    result = runner.invoke(app, ["index", str(docs / "data"), "--index-dir", str(tmp_path / "idx")])
    assert result.exit_code == 1
    assert isinstance(result.exception, InputError)
    assert "holds 1 table file(s) (claims.csv) but no documents; an index needs documents" in str(result.exception)
    assert not (tmp_path / "idx").exists()


def test_a_column_s_aliases_reach_the_sql_writer_the_router_and_the_critic(tmp_path: Path):
    """``city = {description = "...", aliases = [...]}``: the words staff use for a column, kept in the record, shown
    beside its description, linked by the cue router as the column's own and read by the coverage checks."""
    from rag.data.coverage import _about
    from rag.data.schemalink import Vocabulary, read_cues

    files = write_tables(tmp_path / "data")
    (tmp_path / "data" / "claims.csv.meta.toml").write_text(
        'description = "One row per insurance claim"\n[columns]\n'
        'city = {description = "Branch that took the claim", aliases = ["office", "intake  branch"]}\n'
        'amount = "Claimed amount in EUR"\n', encoding="utf-8")
    record = build_database([files["claims"]], tmp_path / "t.duckdb")
    city = next(c for c in record["tables"][0]["columns"] if c["name"] == "city")
    assert (city["description"], city["aliases"]) == ("Branch that took the claim", ["office", "intake branch"])
    assert "amount" in [c["name"] for c in record["tables"][0]["columns"] if "aliases" not in c]
    assert "-- Branch that took the claim; also called: office, intake branch; e.g. Boston" in schema_summary(record)
    vocab = Vocabulary.from_record(record)
    without = Vocabulary.from_record({"tables": [{**record["tables"][0], "columns": [
        {k: v for k, v in c.items() if k != "aliases"} for c in record["tables"][0]["columns"]]}]})
    assert read_cues("busiest office?", vocab).route == "data" and read_cues("busiest office?", without).route == "docs"
    assert "office" in vocab.columns and "office" not in without.columns
    assert ("intake", "branch") in vocab.column_phrases
    assert _about(city) == "Branch that took the claim (also called: office, intake branch)"


def test_aliases_name_a_table_for_the_sql_writer_and_the_router(tmp_path: Path):
    """A sidecar's aliases: kept in the record, shown in the schema summary, and words the cue router links."""
    from rag.data.schemalink import Vocabulary, read_cues

    files = write_tables(tmp_path / "data")
    (tmp_path / "data" / "claims.csv.meta.toml").write_text(
        'description = "One row per insurance claim"\naliases = ["case", "insurance  dispute"]\n', encoding="utf-8")
    record = build_database([files["claims"]], tmp_path / "t.duckdb")
    assert record["tables"][0]["aliases"] == ["case", "insurance dispute"]
    assert schema_summary(record).splitlines()[0].endswith(": One row per insurance claim (also called: case, "
                                                           "insurance dispute)")
    vocab = Vocabulary.from_record(record)
    assert read_cues("How many cases were filed in Lyon?", vocab).route == "data"
    assert read_cues("Which disputes are the largest?", vocab).route == "data"
    without = Vocabulary.from_record({"tables": [{**record["tables"][0], "aliases": []}]})
    assert read_cues("How many cases were filed in Lyon?", without).route == "docs"
