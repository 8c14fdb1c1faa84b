"""The SQL guard and the read-only warehouse on a small real DuckDB file: hostile statements and near-misses are
refused (by the guard, and where it matters by DuckDB too), legitimate queries run with correct answers, LIMIT and
time bounds hold, and the database file is byte-for-byte the same afterwards."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import time
from decimal import Decimal

import duckdb
import pytest

from rag.data.sqlguard import ALLOWED_FUNCTIONS, check_sql
from rag.data.warehouse import QueryResult, Warehouse
from rag.errors import DataError, SQLFailed, SQLRejected

CARRIERS = [(f"carrier_{i:03d}", ("north", "south", "east", "west")[i % 4], "abc"[i % 3]) for i in range(200)]
STATUSES = ("delivered", "in_transit", "lost", "returned")
CLAIM_STATUSES = ("open", "paid", "rejected")
ORIGINS = ("Rotterdam", "Hamburg", "Antwerp", "Le Havre", "Gdansk")


def _make_data() -> dict[str, list[tuple]]:
    rng = random.Random(36)
    start = dt.date(2024, 1, 1)
    shipments = [(i, rng.choice(CARRIERS[:12])[0], rng.choice(ORIGINS), round(rng.uniform(1, 1000), 2),
                  start + dt.timedelta(days=rng.randrange(366)), rng.choice(STATUSES)) for i in range(1, 401)]
    claims = []
    for i in range(1, 301):
        ship = rng.choice(shipments)
        filed = ship[4] + dt.timedelta(days=rng.randrange(1, 60))
        claims.append((i, ship[0], Decimal(rng.randrange(1000, 500000)) / 100, rng.choice(CLAIM_STATUSES), filed))
    return {"shipments": shipments, "claims": claims, "carriers": CARRIERS}


DATA = _make_data()
SHIPMENTS = {s[0]: s for s in DATA["shipments"]}


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    """The database file; its teardown checks that nothing in the module changed a byte of it."""
    path = tmp_path_factory.mktemp("guard") / "tables.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE carriers (name VARCHAR, region VARCHAR, \"group\" VARCHAR)")
    con.execute("CREATE TABLE shipments (id INTEGER, carrier VARCHAR, origin VARCHAR, weight_kg DOUBLE, "
                "shipped_on DATE, status VARCHAR)")
    con.execute("CREATE TABLE claims (id INTEGER, shipment_id INTEGER, amount DECIMAL(10, 2), status VARCHAR, "
                "filed_on DATE)")
    for table, rows in DATA.items():
        con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    con.close()
    before = _sha256(path)
    yield path
    assert _sha256(path) == before, "the database file changed during the module"


@pytest.fixture(scope="module")
def warehouse(db_path):
    with Warehouse(db_path) as wh:
        yield wh


HOSTILE = [
    ("delete", "DELETE FROM claims"),
    ("delete_where", "DELETE FROM claims WHERE id = 1"),
    ("update", "UPDATE claims SET amount = 0"),
    ("insert_values", "INSERT INTO carriers VALUES ('x', 'y', 'z')"),
    ("insert_select", "INSERT INTO carriers SELECT * FROM carriers"),
    ("merge", "MERGE INTO claims USING claims c2 ON claims.id = c2.id WHEN MATCHED THEN DELETE"),
    ("create_table", "CREATE TABLE x (a INTEGER)"),
    ("create_table_as_select", "CREATE TABLE stolen AS SELECT * FROM claims"),
    ("create_temp_table", "CREATE TEMP TABLE t AS SELECT 1"),
    ("create_view", "CREATE VIEW v AS SELECT 1"),
    ("create_macro", "CREATE MACRO m() AS 1"),
    ("create_secret", "CREATE SECRET (TYPE s3, KEY_ID 'x', SECRET 'y')"),
    ("drop_table", "DROP TABLE claims"),
    ("alter_table", "ALTER TABLE claims ADD COLUMN x INTEGER"),
    ("truncate", "TRUNCATE claims"),
    ("select_into", "SELECT * INTO stolen FROM claims"),
    ("cte_delete_returning", "WITH x AS (DELETE FROM claims RETURNING *) SELECT * FROM x"),
    ("cte_insert_returning", "WITH x AS (INSERT INTO carriers VALUES ('a', 'b', 'c') RETURNING *) SELECT * FROM x"),
    ("cte_update_returning", "WITH x AS (UPDATE claims SET amount = 0 RETURNING *) SELECT count(*) FROM x"),
    ("second_cte_drop", "WITH a AS (SELECT 1), b AS (DROP TABLE claims) SELECT * FROM a"),
    ("subquery_insert_returning", "SELECT * FROM (INSERT INTO carriers VALUES ('a', 'b', 'c') RETURNING *)"),
    ("in_subquery_delete", "SELECT * FROM claims WHERE id IN (DELETE FROM claims RETURNING id)"),
    ("two_statements", "SELECT 1; DROP TABLE claims"),
    ("two_selects", "SELECT 1; SELECT 2"),
    ("delete_then_select", "DELETE FROM claims; SELECT 1"),
    ("drop_after_line_comment", "SELECT 1 -- harmless\n; DROP TABLE claims"),
    ("drop_after_block_comment", "SELECT 1 /* harmless */; DROP TABLE claims"),
    ("drop_after_empty_comment", "SELECT 1 ;/* */ DROP TABLE claims"),
    ("drop_then_trailing_comment", "SELECT 1; DROP TABLE claims; --"),
    ("drop_behind_leading_comment", "/* SELECT */ DROP TABLE claims"),
    ("string_then_drop", "SELECT ';'; DROP TABLE claims"),
    ("attach_file", "ATTACH '/nonexistent/sieve/x.db' AS x"),
    ("attach_memory", "ATTACH ':memory:' AS m"),
    ("detach", "DETACH x"),
    ("copy_table_to_file", "COPY claims TO '/nonexistent/sieve/out.csv'"),
    ("copy_query_to_file", "COPY (SELECT * FROM claims) TO '/nonexistent/sieve/out.csv'"),
    ("copy_from_file", "COPY claims FROM '/etc/passwd'"),
    ("export_database", "EXPORT DATABASE '/nonexistent/sieve/export'"),
    ("import_database", "IMPORT DATABASE '/nonexistent/sieve/export'"),
    ("read_csv", "SELECT * FROM read_csv('/etc/passwd')"),
    ("read_csv_auto", "SELECT * FROM read_csv_auto('/etc/passwd')"),
    ("read_parquet", "SELECT * FROM read_parquet('/nonexistent/x.parquet')"),
    ("read_json", "SELECT * FROM read_json('/nonexistent/x.json')"),
    ("read_json_auto", "SELECT * FROM read_json_auto('/nonexistent/x.json')"),
    ("read_text", "SELECT * FROM read_text('/etc/passwd')"),
    ("read_blob", "SELECT * FROM read_blob('/etc/passwd')"),
    ("glob", "SELECT * FROM glob('*')"),
    ("parquet_scan", "SELECT * FROM parquet_scan('/nonexistent/x.parquet')"),
    ("sqlite_scan", "SELECT * FROM sqlite_scan('/nonexistent/x.db', 't')"),
    ("sniff_csv", "SELECT * FROM sniff_csv('/etc/passwd')"),
    ("quoted_function_name", "SELECT * FROM \"read_csv\"('/etc/passwd')"),
    ("schema_qualified_read_csv", "SELECT * FROM main.read_csv('/etc/passwd')"),
    ("read_csv_joined", "SELECT * FROM claims JOIN read_csv('/etc/passwd') r ON true"),
    ("read_csv_in_exists", "SELECT count(*) FROM claims WHERE EXISTS (SELECT 1 FROM read_csv('/etc/passwd'))"),
    ("read_csv_comma_join", "SELECT * FROM claims, read_csv('/etc/passwd')"),
    ("string_path_as_table", "SELECT * FROM '/etc/passwd'"),
    ("string_csv_as_table", "FROM 'data.csv'"),
    ("quoted_file_name_as_table", "SELECT * FROM \"claims.csv\""),
    ("url_as_table", "SELECT * FROM 'https://example.com/x.parquet'"),
    ("pragma_database_list", "PRAGMA database_list"),
    ("pragma_setting", "PRAGMA enable_profiling"),
    ("pragma_table_function", "SELECT * FROM pragma_table_info('claims')"),
    ("set_external_access_on", "SET enable_external_access = true"),
    ("set_threads", "SET threads = 64"),
    ("set_variable", "SET VARIABLE x = 1"),
    ("reset", "RESET threads"),
    ("install_extension", "INSTALL httpfs"),
    ("load_extension", "LOAD httpfs"),
    ("load_extension_file", "LOAD '/nonexistent/evil.duckdb_extension'"),
    ("call", "CALL pragma_version()"),
    ("getenv", "SELECT getenv('HOME')"),
    ("getvariable", "SELECT getvariable('x')"),
    ("current_setting", "SELECT current_setting('enable_external_access')"),
    ("duckdb_settings", "SELECT * FROM duckdb_settings()"),
    ("duckdb_extensions", "SELECT * FROM duckdb_extensions()"),
    ("duckdb_tables_view", "SELECT * FROM duckdb_tables"),
    ("information_schema", "SELECT * FROM information_schema.tables"),
    ("pg_catalog", "SELECT * FROM pg_catalog.pg_tables"),
    ("sqlite_master", "SELECT * FROM sqlite_master"),
    ("query_function", "SELECT * FROM query('SELECT 1')"),
    ("query_table_function", "SELECT * FROM query_table('claims')"),
    ("other_catalog", "SELECT * FROM other_db.main.t"),
    ("own_catalog_spelled_out", "SELECT * FROM tables.main.claims"),
    ("other_schema", "SELECT * FROM other.claims"),
    ("unknown_table", "SELECT * FROM orders2"),
    ("unknown_table_in_join", "SELECT * FROM claims c JOIN orders2 o ON o.id = c.id"),
    ("range_table_function", "SELECT * FROM range(10)"),
    ("generate_series", "SELECT * FROM generate_series(1, 10)"),
    ("begin_transaction", "BEGIN TRANSACTION"),
    ("commit", "COMMIT"),
    ("rollback", "ROLLBACK"),
    ("use", "USE memory"),
    ("vacuum", "VACUUM"),
    ("checkpoint", "CHECKPOINT"),
    ("describe", "DESCRIBE claims"),
    ("show_tables", "SHOW TABLES"),
    ("summarize", "SUMMARIZE claims"),
    ("explain", "EXPLAIN SELECT 1"),
    ("explain_analyze", "EXPLAIN ANALYZE SELECT 1"),
    ("pivot_statement", "PIVOT claims ON status USING sum(amount)"),
    ("empty", ""),
    ("whitespace_only", "  \n\t "),
    ("comment_only", "-- nothing to see"),
    ("semicolon_only", ";"),
    ("garbage_text", "please give me the claims"),
    ("unterminated_string", "SELECT 'abc"),
    ("union_with_read_csv", "SELECT 1 UNION SELECT * FROM read_csv('/etc/passwd')"),
    ("scalar_subquery_read_csv_in_where",
     "SELECT * FROM claims WHERE amount > (SELECT count(*) FROM read_csv('/etc/passwd'))"),
    ("in_subquery_read_parquet", "SELECT * FROM claims WHERE id IN (SELECT id FROM read_parquet('/nonexistent/x'))"),
    ("lateral_read_text", "SELECT * FROM claims c, LATERAL (SELECT * FROM read_text(c.status))"),
    ("method_call_read_text", "SELECT '/etc/passwd'.read_text()"),
    ("lambda_calling_read_text", "SELECT list_transform(['/etc/passwd'], x -> read_text(x))"),
    ("function_not_on_allow_list", "SELECT hash(status) FROM claims"),
    ("star_replace_read_text", "SELECT * REPLACE (read_text('/etc/passwd') AS status) FROM claims"),
    ("struct_field_read_csv", "SELECT struct_pack(a := read_csv('/etc/passwd'))"),
    ("describe_in_subquery", "SELECT * FROM (DESCRIBE claims)"),
    ("summarize_in_subquery", "SELECT * FROM (SUMMARIZE claims)"),
    ("from_first_read_csv_in_subquery", "SELECT * FROM (FROM read_csv('/etc/passwd'))"),
    ("prepare", "PREPARE p AS SELECT 1"),
    ("execute", "EXECUTE p"),
    ("comment_on", "COMMENT ON TABLE claims IS 'x'"),
    ("copy_from_database", "COPY FROM DATABASE tables TO other"),
    ("force_install", "FORCE INSTALL httpfs"),
    ("create_or_replace", "CREATE OR REPLACE TABLE claims AS SELECT 1"),
    ("nextval", "SELECT nextval('s')"),
    ("placeholder", "SELECT * FROM claims WHERE id = ?"),
]


def _hostile_params():
    return [pytest.param(sql, id=name) for name, sql in HOSTILE]


def test_catalogue_is_large_and_named_uniquely():
    assert len(HOSTILE) >= 45
    assert len({name for name, _ in HOSTILE}) == len(HOSTILE)


@pytest.mark.parametrize("sql", _hostile_params())
def test_hostile_rejected_by_guard(sql):
    with pytest.raises(SQLRejected) as info:
        check_sql(sql, ["shipments", "claims", "carriers"])
    reason = str(info.value)
    assert reason and "\n" not in reason and len(reason) <= 200


@pytest.mark.parametrize("sql", [p for p in _hostile_params() if not p.id.startswith("unknown_table")])
def test_hostile_rejected_without_a_table_list(sql):
    with pytest.raises(SQLRejected):
        check_sql(sql)


def test_table_list_decides_for_names_like_system_catalogs():
    assert check_sql("SELECT * FROM pg_data", ["pg_data"]) == "SELECT * FROM pg_data LIMIT 50"
    with pytest.raises(SQLRejected, match="system catalog"):
        check_sql("SELECT * FROM pg_data")


@pytest.mark.parametrize("sql", _hostile_params())
def test_hostile_rejected_by_warehouse(warehouse, sql):
    with pytest.raises(SQLRejected):
        warehouse.run(sql)


def test_rejection_messages_say_what_to_do():
    cases = {
        "SELECT 1; DROP TABLE x": "only one statement is allowed; found 2",
        "DELETE FROM claims": "DELETE is not allowed: only SELECT queries",
        "SELECT * FROM read_csv('/etc/passwd')": "function read_csv is not allowed (it can read files)",
        "SELECT * FROM orders2": "unknown table orders2; tables: carriers, claims, shipments",
    }
    for sql, message in cases.items():
        with pytest.raises(SQLRejected, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
            check_sql(sql, ["shipments", "claims", "carriers"])


LEGIT = [
    ("where_and_or", "SELECT count(*) FROM claims WHERE amount > 100 AND status = 'open' OR NOT (amount < 5) "
                     "AND status IN ('paid', 'approved')"),
    ("count", "SELECT count(*) AS n FROM shipments"),
    ("join_group_by", "SELECT s.carrier, count(*) AS n FROM claims c JOIN shipments s ON s.id = c.shipment_id "
                      "GROUP BY s.carrier ORDER BY n DESC, s.carrier"),
    ("group_by_having", "SELECT status, count(*) AS n, sum(amount) AS total FROM claims GROUP BY status "
                        "HAVING count(*) > 10 ORDER BY status"),
    ("window_partition_qualify", "SELECT id, carrier, weight_kg, rank() OVER (PARTITION BY carrier ORDER BY weight_kg "
                                 "DESC) AS r FROM shipments QUALIFY r = 1 ORDER BY carrier"),
    ("window_lag", "SELECT id, amount - lag(amount) OVER (ORDER BY filed_on, id) AS change FROM claims"),
    ("cte", "WITH heavy AS (SELECT * FROM shipments WHERE weight_kg > 500) SELECT count(*) AS n FROM heavy"),
    ("two_ctes", "WITH lost AS (SELECT id FROM shipments WHERE status = 'lost'), lost_claims AS (SELECT c.* FROM "
                 "claims c JOIN lost ON lost.id = c.shipment_id) SELECT count(*) AS n FROM lost_claims"),
    ("union_all", "SELECT 'shipments' AS kind, count(*) AS n FROM shipments UNION ALL "
                  "SELECT 'claims', count(*) FROM claims"),
    ("case", "SELECT CASE WHEN weight_kg > 500 THEN 'heavy' ELSE 'light' END AS cls, count(*) AS n FROM shipments "
             "GROUP BY cls ORDER BY cls"),
    ("date_trunc", "SELECT date_trunc('month', shipped_on) AS m, count(*) AS n FROM shipments GROUP BY m ORDER BY m"),
    ("extract", "SELECT extract(year FROM filed_on) AS y, count(*) AS n FROM claims GROUP BY y ORDER BY y"),
    ("date_diff", "SELECT avg(date_diff('day', s.shipped_on, c.filed_on)) AS days FROM claims c "
                  "JOIN shipments s ON s.id = c.shipment_id"),
    ("order_by_limit", "SELECT id, amount FROM claims ORDER BY amount DESC, id LIMIT 5"),
    ("string_literal_drop_table", "SELECT 'DROP TABLE claims' AS s"),
    ("string_literal_semicolon_drop", "SELECT ';DROP TABLE claims' AS s"),
    ("string_literal_path", "SELECT '/etc/passwd' AS p"),
    ("alias_named_read_csv", "SELECT 1 AS read_csv"),
    ("keyword_column_quoted", "SELECT \"group\", count(*) AS n FROM carriers GROUP BY \"group\" ORDER BY \"group\""),
    ("left_join_coalesce", "SELECT c.name, coalesce(count(s.id), 0) AS n FROM carriers c LEFT JOIN shipments s "
                           "ON s.carrier = c.name GROUP BY c.name ORDER BY n DESC, c.name"),
    ("in_subquery", "SELECT count(*) AS n FROM claims WHERE shipment_id IN "
                    "(SELECT id FROM shipments WHERE status = 'lost')"),
    ("scalar_subquery", "SELECT count(*) AS n FROM claims WHERE amount > (SELECT avg(amount) FROM claims)"),
    ("not_exists", "SELECT count(*) AS n FROM shipments s WHERE NOT EXISTS "
                   "(SELECT 1 FROM claims c WHERE c.shipment_id = s.id)"),
    ("string_functions", "SELECT upper(carrier) AS u, length(origin) AS l, split_part(carrier, '_', 2) AS num, "
                         "lower(origin) LIKE 'h%' AS h FROM shipments ORDER BY id LIMIT 3"),
    ("string_agg_distinct", "SELECT status, string_agg(DISTINCT origin, ', ' ORDER BY origin) AS origins "
                            "FROM shipments GROUP BY status ORDER BY status"),
    ("median_quantile", "SELECT median(weight_kg) AS med, quantile_cont(weight_kg, 0.9) AS p90 FROM shipments"),
    ("main_schema", "SELECT count(*) AS n FROM main.claims"),
    ("from_first", "FROM carriers SELECT name ORDER BY name LIMIT 3"),
    ("upper_case_table", "SELECT COUNT(*) AS n FROM CLAIMS"),
    ("trailing_semicolon", "SELECT count(*) AS n FROM claims;"),
    ("trailing_comment", "SELECT count(*) AS n FROM claims -- how many claims"),
    ("cte_shadowing_a_table", "WITH claims AS (SELECT 1 AS x) SELECT * FROM claims"),
    ("values_in_from", "SELECT v.a FROM (VALUES (1), (2)) AS v(a)"),
    ("unnest_list", "SELECT unnest(['a', 'b']) AS x"),
    ("group_by_all", "SELECT status, count(*) AS n FROM claims GROUP BY ALL ORDER BY ALL"),
    ("union_by_name", "SELECT id, status FROM claims UNION ALL BY NAME SELECT status, id FROM shipments"),
    ("recursive_cte_bounded", "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 10) "
                              "SELECT sum(n) AS total FROM r"),
    ("pivot_in_subquery", "SELECT * FROM (PIVOT (SELECT status FROM claims) ON status USING count(*))"),
    ("table_statement", "TABLE carriers"),
]


@pytest.mark.parametrize("sql", [pytest.param(sql, id=name) for name, sql in LEGIT])
def test_legit_runs(warehouse, sql):
    result = warehouse.run(sql)
    assert isinstance(result, QueryResult) and result.columns
    json.dumps(result.to_dict())


def _one(warehouse, sql):
    return warehouse.run(sql).rows[0][0]


def test_legit_answers_match_the_data(warehouse):
    shipments, claims = DATA["shipments"], DATA["claims"]
    lost = {s[0] for s in shipments if s[5] == "lost"}
    assert _one(warehouse, dict(LEGIT)["count"]) == 400
    assert _one(warehouse, dict(LEGIT)["cte"]) == sum(s[3] > 500 for s in shipments)
    assert _one(warehouse, dict(LEGIT)["two_ctes"]) == sum(c[1] in lost for c in claims)
    assert _one(warehouse, dict(LEGIT)["in_subquery"]) == sum(c[1] in lost for c in claims)
    assert _one(warehouse, dict(LEGIT)["not_exists"]) == len({s[0] for s in shipments} - {c[1] for c in claims})
    totals = {st: sum(c[2] for c in claims if c[3] == st) for st in CLAIM_STATUSES}
    rows = warehouse.run(dict(LEGIT)["group_by_having"]).rows
    assert {r[0]: r[2] for r in rows} == totals
    assert warehouse.run(dict(LEGIT)["union_all"]).rows == [("shipments", 400), ("claims", 300)]
    top = sorted(claims, key=lambda c: (-c[2], c[0]))[:5]
    assert warehouse.run(dict(LEGIT)["order_by_limit"]).rows == [(c[0], c[2]) for c in top]
    months = {s[4].replace(day=1) for s in shipments}
    assert len(warehouse.run(dict(LEGIT)["date_trunc"]).rows) == len(months)
    assert _one(warehouse, dict(LEGIT)["string_literal_semicolon_drop"]) == ";DROP TABLE claims"
    assert _one(warehouse, dict(LEGIT)["recursive_cte_bounded"]) == 55
    pivot = warehouse.run(dict(LEGIT)["pivot_in_subquery"])
    assert dict(zip(pivot.columns, pivot.rows[0])) == {st: sum(c[3] == st for c in claims) for st in CLAIM_STATUSES}
    groups = warehouse.run(dict(LEGIT)["keyword_column_quoted"]).rows
    assert groups == [(g, sum(c[2] == g for c in CARRIERS)) for g in "abc"]
    days = [(c[4] - SHIPMENTS[c[1]][4]).days for c in claims]
    assert _one(warehouse, dict(LEGIT)["date_diff"]) == pytest.approx(sum(days) / len(days))


FUNCTION_EXPRESSIONS = [
    "count_if(weight_kg > 100)", "any_value(carrier)", "arg_max(carrier, weight_kg)", "stddev(weight_kg)",
    "bool_or(status = 'lost')", "list(id ORDER BY id)[1]", "approx_count_distinct(origin)",
    "round(avg(weight_kg), 1)", "max(strftime(shipped_on, '%Y-%m'))", "min(make_date(2024, 1, 1))",
    "max(date_add(shipped_on, INTERVAL 1 DAY))", "max(iif(weight_kg > 1, 1, 0))", "max(if(weight_kg > 1, 1, 0))",
    "max(ifnull(NULL, 1))", "max(initcap(origin))", "max(split(carrier, '_')[1])", "max(string_split(carrier, '_')[2])",
    "max(substr(origin, 1, 3))", "max(position('a' IN origin))", "max(strpos(origin, 'a'))", "max(trim(origin))",
    "max(lpad(CAST(id AS VARCHAR), 5, '0'))", "max(regexp_replace(origin, '[aeiou]', ''))", "max(year(shipped_on))",
    "max(dayofweek(shipped_on))", "max(quarter(shipped_on))", "max(date_part('month', shipped_on))",
    "max(epoch(shipped_on))", "max(age(DATE '2025-01-01', shipped_on))", "max(TRY_CAST(carrier AS INTEGER))",
    "max(shipped_on::VARCHAR)", "max(greatest(weight_kg, 10))", "max(power(weight_kg, 2))", "max(log(weight_kg))",
    "max(mod(id, 7))", "max(starts_with(origin, 'R'))", "max(regexp_matches(origin, '^H'))",
    "max(len(list_transform([1, 2], x -> x + id)))", "string_agg(origin, ',')", "group_concat(origin)",
    "max(concat_ws('-', origin, status))", "max(left(origin, 2) || right(origin, 2))", "var_samp(weight_kg)",
    "max(current_date)", "max(strptime('2024-02-03', '%Y-%m-%d'))", "max(week(shipped_on))",
]


@pytest.mark.parametrize("expression", FUNCTION_EXPRESSIONS)
def test_allowed_functions_run_after_regeneration(warehouse, expression):
    result = warehouse.run(f"SELECT {expression} AS v FROM shipments")
    assert len(result.rows) == 1


def test_allow_list_is_a_frozenset_of_lower_case_names():
    assert isinstance(ALLOWED_FUNCTIONS, frozenset)
    assert {"count", "sum", "row_number", "date_trunc", "regexp_extract", "coalesce"} <= ALLOWED_FUNCTIONS
    assert not {"read_csv", "glob", "getenv", "query", "range", "current_setting"} & ALLOWED_FUNCTIONS
    assert all(name == name.lower() for name in ALLOWED_FUNCTIONS)


def test_limit_added_when_missing():
    assert check_sql("SELECT * FROM claims", limit=50) == "SELECT * FROM claims LIMIT 50"
    assert check_sql("SELECT 1 UNION ALL SELECT 2", limit=7) == "SELECT 1 UNION ALL SELECT 2 LIMIT 7"


def test_limit_lowered_when_too_large_and_kept_when_smaller():
    assert check_sql("SELECT * FROM claims LIMIT 1000", limit=50) == "SELECT * FROM claims LIMIT 50"
    assert check_sql("SELECT * FROM claims LIMIT 10 OFFSET 5", limit=50) == "SELECT * FROM claims LIMIT 10 OFFSET 5"
    assert check_sql("SELECT * FROM claims LIMIT 1000 OFFSET 5", limit=50) == "SELECT * FROM claims LIMIT 50 OFFSET 5"
    for unbounded in ("LIMIT ALL", "LIMIT 90 PERCENT", "LIMIT 1 + 999", "FETCH FIRST 500 ROWS ONLY"):
        assert check_sql(f"SELECT * FROM claims {unbounded}", limit=50) == "SELECT * FROM claims LIMIT 50"


def test_parenthesized_query_gets_an_outer_limit(warehouse):
    assert check_sql("(SELECT 1 LIMIT 3)", limit=50) == "(SELECT 1 LIMIT 3) LIMIT 50"
    assert len(warehouse.run("(SELECT id FROM claims ORDER BY id LIMIT 3)").rows) == 3


def test_limit_applies_to_the_top_level_query_only():
    sql = check_sql("SELECT * FROM (SELECT * FROM claims LIMIT 1000) AS t", limit=50)
    assert sql == "SELECT * FROM (SELECT * FROM claims LIMIT 1000) AS t LIMIT 50"


def test_warehouse_row_counts_follow_the_limit(warehouse):
    result = warehouse.run("SELECT * FROM claims", max_rows=30)
    assert result.sql.endswith("LIMIT 31") and len(result.rows) == 30 and result.truncated
    result = warehouse.run("SELECT * FROM claims LIMIT 1000", max_rows=30)
    assert len(result.rows) == 30 and result.truncated
    result = warehouse.run("SELECT * FROM claims LIMIT 10", max_rows=30)
    assert len(result.rows) == 10 and not result.truncated
    result = warehouse.run("SELECT * FROM claims LIMIT 30", max_rows=30)
    assert len(result.rows) == 30 and not result.truncated


def test_many_rows_are_capped(warehouse):
    result = warehouse.run("SELECT a.id, b.id FROM shipments a, shipments b", max_rows=100)
    assert len(result.rows) == 100 and result.truncated


def test_a_long_query_stops_at_the_time_limit(warehouse):
    started = time.perf_counter()
    with pytest.raises(SQLFailed, match="^the query ran past the 1 s time limit$"):
        warehouse.run("SELECT sum(a.weight_kg * b.weight_kg * c.weight_kg) FROM shipments a, shipments b, "
                      "shipments c, shipments d", time_limit_s=1)
    assert time.perf_counter() - started < 5
    assert _one(warehouse, "SELECT count(*) FROM claims") == 300  # the warehouse still answers


def test_duckdb_errors_come_back_as_one_line(warehouse):
    with pytest.raises(SQLFailed) as info:
        warehouse.run("SELECT no_such_column FROM claims")
    assert "no_such_column" in str(info.value) and "\n" not in str(info.value) and len(str(info.value)) <= 200


def test_result_to_dict_and_text(warehouse):
    result = warehouse.run("SELECT id, amount, filed_on FROM claims ORDER BY id", max_rows=25)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["columns"] == ["id", "amount", "filed_on"] and data["truncated"] is True
    first = DATA["claims"][0]
    assert data["rows"][0] == [first[0], float(first[2]), first[4].isoformat()]
    text = result.as_text(max_rows=3)
    lines = text.splitlines()
    assert lines[0] == "id | amount | filed_on"
    assert lines[1] == f"{first[0]} | {float(first[2])} | {first[4].isoformat()}"
    assert "22 more rows not shown" in text and "more than 25 rows" in text
    assert "(no rows)" in warehouse.run("SELECT * FROM claims WHERE id < 0").as_text()


def test_tables_lists_the_database(warehouse):
    assert warehouse.tables == ["carriers", "claims", "shipments"]


def test_missing_database_names_the_path(tmp_path):
    missing = tmp_path / "nowhere" / "tables.duckdb"
    with pytest.raises(DataError, match="rag index PATH") as info:
        Warehouse(missing)
    assert str(missing) in str(info.value)


def test_not_a_database_is_a_data_error(tmp_path):
    bogus = tmp_path / "tables.duckdb"
    bogus.write_text("not a database")
    with pytest.raises(DataError, match="rag index PATH"):
        Warehouse(bogus)


def test_closed_warehouse_refuses(db_path):
    wh = Warehouse(db_path)
    wh.close()
    with pytest.raises(DataError, match="closed"):
        wh.run("SELECT 1")


ESCAPES = {
    "delete": "DELETE FROM claims",
    "update": "UPDATE claims SET amount = 0",
    "insert": "INSERT INTO carriers VALUES ('x', 'y', 'z')",
    "create_table": "CREATE TABLE x (a INTEGER)",
    "drop_table": "DROP TABLE claims",
    "alter_table": "ALTER TABLE claims ADD COLUMN x INTEGER",
    "attach": "ATTACH '{dir}/attached.db' AS x",
    "copy_to": "COPY claims TO '{dir}/out.csv'",
    "copy_query_to": "COPY (SELECT 1) TO '{dir}/out.csv'",
    "export_database": "EXPORT DATABASE '{dir}/export'",
    "read_csv": "SELECT * FROM read_csv('/etc/passwd')",
    "read_text": "SELECT * FROM read_text('/etc/passwd')",
    "string_as_table": "SELECT * FROM '/etc/passwd'",
    "set_external_access_on": "SET enable_external_access = true",
    "reset_external_access": "RESET enable_external_access",
    "set_threads": "SET threads = 64",
    "install": "INSTALL httpfs",
    "load": "LOAD httpfs",
}


def test_the_connection_itself_refuses_writes_and_files(warehouse, tmp_path):
    """Defense in depth: the guard bypassed, DuckDB's read-only, no-external-access, locked connection refuses."""
    ran = []
    for name, template in ESCAPES.items():
        cursor = warehouse._con.cursor()
        try:
            cursor.execute(template.format(dir=tmp_path)).fetchall()
            ran.append(name)
        except duckdb.Error:
            pass
        finally:
            cursor.close()
    assert ran == []
    assert list(tmp_path.iterdir()) == []


def test_every_hostile_statement_run_raw_leaves_the_file_unchanged(warehouse, db_path):
    before = _sha256(db_path)
    for _, sql in HOSTILE:
        cursor = warehouse._con.cursor()
        try:
            if cursor.execute(sql) is not None:  # None: nothing to run (empty text)
                cursor.fetchmany(5)
        except duckdb.Error:
            pass
        finally:
            cursor.close()
    assert _sha256(db_path) == before
    assert _one(warehouse, "SELECT count(*) FROM claims") == 300
