"""The tables of an index: table files read into one DuckDB database, and the record that describes them.

``rag index`` takes the tables it finds beside the documents (and those of ``--tables``) into ``tables.duckdb``
inside the index folder, built in the same temporary folder and swapped in with the rest (rag.index.build). The
manifest keeps :func:`build_database`'s record, so the index describes its tables without opening the database:
each table's name, source file, row count and description, and per column its DuckDB type, description and up
to three example values. :func:`schema_summary` turns that record into the text the SQL writer is shown.

What is read, by suffix (:data:`TABLE_SUFFIXES`): CSV and TSV (``read_csv``, header row, types detected), Parquet,
JSON lines (``read_json``, newline-delimited), and SQLite and DuckDB databases (every table in them; ``.db`` is
told apart by its first bytes, and a ``.db`` that is neither, e.g. Windows' Thumbs.db, is not a table file).
SQLite files are read with Python's own sqlite3, not DuckDB's sqlite extension: that extension is downloaded on
first use, and a build must work offline. A table is named after its file (``Claims 2024.csv`` -> ``claims_2024``:
lower case, ``[a-z0-9_]``, not starting with a digit, ``_t`` after an SQL reserved word); a database's tables
keep their own names, normalized the same way. Two tables with one name are an error naming both sources.

Descriptions, shown to the SQL writer: a sidecar ``<file>.meta.toml`` beside the table file (``claims.csv`` ->
``claims.csv.meta.toml``)::

    description = "One row per insurance claim, 2023-2024"
    aliases = ["case", "dispute"]   # other words people use for its rows (the router links them to the table)
    [columns]
    amount = "claim amount in EUR"

For a SQLite or DuckDB file, one ``[tables.NAME]`` section per table, each with its ``description`` and
``[tables.NAME.columns]``. Without a sidecar, a DuckDB file's ``COMMENT ON`` texts and the ``-- comments`` of a
SQLite table's ``CREATE TABLE`` statement are used. The descriptions are also written into the database
(``COMMENT ON TABLE/COLUMN``), so it describes itself too.

The build opens the database with its own connection (reading files needs external access; the query side opens
it read-only with external access off) and closes it before returning: no ``.wal`` is left beside it.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
import tomllib
from pathlib import Path
from typing import Any

from rag.errors import InputError
from rag.index.layout import BM25_DIR, CHUNKS, MANIFEST, TABLES

TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".jsonl", ".ndjson", ".sqlite", ".sqlite3", ".db", ".duckdb")
DB_FILE = TABLES  # the database's name inside the index folder
SIDECAR = ".meta.toml"
EXAMPLE_CHARS = 40  # an example value longer than this is cut, with "..."
BATCH = 50_000  # rows of a SQLite table copied at a time
_DATABASES = (".sqlite", ".sqlite3", ".db", ".duckdb")
_SQLITE_MAGIC = b"SQLite format 3\x00"


def discover_tables(folder: Path) -> list[Path]:
    """The table files under ``folder`` (recursive, sorted; names starting with ``.`` left out, files and folders),
    or ``[folder]`` for a single table file. A ``.db`` file counts only when it is a SQLite or DuckDB database, and
    a Sieve index folder inside ``folder`` (``rag index . --index-dir idx``) is not searched: its chunks.jsonl and
    tables.duckdb are the index's, not tables."""
    folder = Path(folder).expanduser()
    if folder.is_file():
        return [folder] if folder.suffix.lower() in TABLE_SUFFIXES else []
    found = []
    for top, dirs, files in os.walk(folder):
        if top != str(folder) and {MANIFEST, CHUNKS, BM25_DIR} <= {*files, *dirs}:
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            path = Path(top, name)
            if name.startswith(".") or path.suffix.lower() not in TABLE_SUFFIXES:
                continue
            if path.suffix.lower() != ".db" or _database_kind(path) is not None:
                found.append(path)
    return sorted(found)


def table_name(stem: str) -> str:
    """``stem`` as a plain SQL identifier: lower case, runs of other characters as ``_``, ``t_`` before a digit."""
    name = re.sub(r"[^a-z0-9_]+", "_", stem.lower()).strip("_")
    name = re.sub(r"_+", "_", name) or "t"
    if name[0].isdigit():
        name = f"t_{name}"
    return f"{name}_t" if name in _reserved() else name


def build_database(sources: list[Path], dest: Path, *, show_progress: bool = False) -> dict[str, Any]:
    """Load every table file of ``sources`` into a new DuckDB database ``dest``; return its manifest record.

    Raises InputError naming the file (and DuckDB's or sqlite3's one-line reason) for a file that cannot be read,
    a sidecar that is not valid or names a column that does not exist, and two sources that make one table name.
    """
    import duckdb

    dest = Path(dest)
    if dest.exists():
        dest.unlink()
    con = duckdb.connect(str(dest), config={"autoinstall_known_extensions": False})
    try:
        owners: dict[str, str] = {}  # table name -> which source made it, for the collision message
        tables: list[dict[str, Any]] = []
        for i, path in enumerate(sources, 1):
            path = Path(path)
            if show_progress:
                print(f"tables: reading {path.name} ({i}/{len(sources)})", file=sys.stderr)
            meta = _sidecar(path)
            entries = _load(con, path, owners)
            _check_sections(meta, entries)
            for entry in entries:
                _describe(con, entry, meta, path)
            tables.extend(entries)
        for entry in tables:
            _summarize(con, entry)
        con.execute("CHECKPOINT")
        con.close()
        wal = dest.with_name(dest.name + ".wal")
        if wal.exists():  # none after a checkpoint and a close; were one left, fold it in rather than ship it
            with duckdb.connect(str(dest)) as again:
                again.execute("CHECKPOINT")
    except BaseException as exc:
        con.close()
        for left in (dest, dest.with_name(dest.name + ".wal")):
            left.unlink(missing_ok=True)
        if isinstance(exc, duckdb.Error):  # a failure outside any one file (the disk full while writing it)
            raise InputError(f"{dest}: cannot write the tables database ({_reason(exc)})") from None
        raise
    return {"file": DB_FILE, "sources": [str(p) for p in sources], "tables": tables}


def schema_summary(record: dict[str, Any], *, examples: int = 3) -> str:
    """The tables of ``record`` as the SQL writer reads them: per table ``TABLE name (N rows): description`` and
    one line per column, ``  name TYPE -- description; e.g. a, b, c``. Deterministic: the record's order."""
    blocks = []
    for table in record.get("tables") or []:
        rows = table.get("rows", 0)
        head = f"TABLE {_ident(table['name'])} ({rows:,} row{'' if rows == 1 else 's'})"
        lines = [f"{head}: {table['description']}" if table.get("description") else head]
        if table.get("aliases"):
            lines[0] += f" (also called: {', '.join(table['aliases'])})"
        for col in table.get("columns", []):
            notes = [col["description"].rstrip(". ")] if col.get("description") else []  # "...; e.g." reads on
            if col.get("aliases"):
                notes.append(f"also called: {', '.join(col['aliases'])}")
            shown = col.get("examples", [])[:examples]
            if shown:
                notes.append("e.g. " + ", ".join(shown))
            lines.append(f"  {_ident(col['name'])} {col['type']}" + (f" -- {'; '.join(notes)}" if notes else ""))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# ---------------------------------------------------------------------- reading each kind of file
def _database_kind(path: Path) -> str | None:
    """``sqlite`` or ``duckdb`` by the file's first bytes; None for anything else (or an unreadable file)."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return None
    if head.startswith(_SQLITE_MAGIC):
        return "sqlite"
    return "duckdb" if head[8:12] == b"DUCK" else None


def _load(con: Any, path: Path, owners: dict[str, str]) -> list[dict[str, Any]]:
    """Copy the table(s) of one file into ``con``; entries with ``name``, ``source`` and the source's comments."""
    import duckdb

    suffix = path.suffix.lower()
    if not path.is_file():
        raise InputError(f"{path}: no such table file; give a {', '.join(TABLE_SUFFIXES)} file or a folder of them")
    if suffix in _DATABASES:
        kind = _database_kind(path)
        if kind is None:
            raise InputError(f"{path}: not a SQLite or DuckDB database (its first bytes are neither's); "
                             "remove it from the tables, or give the database file itself")
        try:
            return _copy_sqlite(con, path, owners) if kind == "sqlite" else _copy_duckdb(con, path, owners)
        except duckdb.Error as exc:  # a value or type DuckDB cannot take
            raise InputError(f"{path}: cannot copy its tables into the index's database ({_reason(exc)}); fix the "
                             "table, or leave the file out (--no-tables, or move it)") from None
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file (not even a header row); remove it, or write the table into it")
    name = _claim(table_name(path.name[: -len(suffix)]), str(path), owners)
    reader = {".csv": "read_csv($1, header=true)", ".tsv": "read_csv($1, header=true, delim='\\t')",
              ".parquet": "read_parquet($1)"}.get(suffix, "read_json($1, format='newline_delimited')")
    try:
        con.execute(f"CREATE TABLE {_ident(name)} AS SELECT * FROM {reader}", [str(path)])
    except duckdb.Error as exc:
        raise InputError(f"{path}: cannot read it as {suffix[1:].upper()} ({_reason(exc)}); fix the file, or move it "
                         "out of the folder (or index with --no-tables)") from None
    return [{"name": name, "source": str(path), "_inner": None, "_comment": None, "_columns": {}}]


def _copy_duckdb(con: Any, path: Path, owners: dict[str, str]) -> list[dict[str, Any]]:
    import duckdb

    try:
        con.execute(f"ATTACH '{_literal(str(path))}' AS sieve_src (READ_ONLY)")
    except duckdb.Error as exc:
        raise InputError(f"{path}: cannot open this DuckDB database ({_reason(exc)})") from None
    try:
        found = con.execute("SELECT schema_name, table_name, comment FROM duckdb_tables() WHERE database_name = "
                            "'sieve_src' ORDER BY schema_name, table_name").fetchall()
        entries = []
        for schema, inner, comment in found:
            name = _claim(table_name(inner), f"{path} (table {inner})", owners)
            con.execute(f"CREATE TABLE {_ident(name)} AS SELECT * FROM sieve_src.{_ident(schema)}.{_ident(inner)}")
            cols = dict(con.execute("SELECT column_name, comment FROM duckdb_columns() WHERE database_name = "
                                    "'sieve_src' AND schema_name = ? AND table_name = ?", [schema, inner]).fetchall())
            entries.append({"name": name, "source": str(path), "_inner": inner, "_comment": comment,
                            "_columns": {k: v for k, v in cols.items() if v}})
    finally:
        con.execute("DETACH sieve_src")
    return entries


def _copy_sqlite(con: Any, path: Path, owners: dict[str, str]) -> list[dict[str, Any]]:
    """Every ordinary table of a SQLite file, read with sqlite3 (read-only) and inserted in batches. A column's
    type follows the values it holds: integers BIGINT, numbers DOUBLE, text VARCHAR (DATE or TIMESTAMP when it is
    declared so and every value parses), bytes BLOB, a mix VARCHAR."""
    try:
        src = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"{path}: cannot open this SQLite database ({exc})") from None
    try:
        found = src.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                            "AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name").fetchall()
        entries = []
        for inner, sql in found:
            name = _claim(table_name(inner), f"{path} (table {inner})", owners)
            entries.append({"name": name, "source": str(path), "_inner": inner, **_sqlite_comments(sql)})
            _copy_sqlite_table(con, src, inner, name)
    except sqlite3.Error as exc:
        raise InputError(f"{path}: cannot read this SQLite database ({exc})") from None
    finally:
        src.close()
    return entries


def _copy_sqlite_table(con: Any, src: sqlite3.Connection, inner: str, name: str) -> None:
    import pandas as pd

    q = _ident(inner)
    info = src.execute(f"PRAGMA table_info({q})").fetchall()  # (cid, name, type, notnull, default, pk)
    types = []
    for _, col, declared in (row[:3] for row in info):
        kinds = {k for (k,) in src.execute(f"SELECT DISTINCT typeof({_ident(col)}) FROM {q}")} - {"null"}
        types.append(_sqlite_type(kinds, (declared or "").upper()))
    con.execute(f"CREATE TABLE {_ident(name)} ({', '.join(f'{_ident(c[1])} {t}' for c, t in zip(info, types))})")
    dtypes = {"BIGINT": "Int64", "DOUBLE": "Float64"}
    cursor = src.execute(f"SELECT {', '.join(_ident(c[1]) for c in info)} FROM {q}")
    while rows := cursor.fetchmany(BATCH):
        columns = {}
        for i, (values, kind) in enumerate(zip(zip(*rows), types)):
            if kind == "VARCHAR":
                values = [None if v is None else v if isinstance(v, str) else str(v) for v in values]
            columns[f"c{i}"] = (pd.array(values, dtype=dtypes[kind]) if kind in dtypes
                                else pd.Series(values, dtype=object))
        con.register("sieve_batch", pd.DataFrame(columns))
        con.execute(f"INSERT INTO {_ident(name)} SELECT * FROM sieve_batch")
        con.unregister("sieve_batch")
    for (_, col, declared), kind in zip((row[:3] for row in info), types):
        declared = (declared or "").upper()
        if kind != "VARCHAR" or not re.search("DATE|TIME", declared):
            continue
        wanted = "DATE" if "DATE" in declared and "TIME" not in declared else "TIMESTAMP"
        bad = con.execute(f"SELECT count(*) FROM {_ident(name)} WHERE {_ident(col)} IS NOT NULL AND "
                          f"TRY_CAST({_ident(col)} AS {wanted}) IS NULL").fetchone()[0]
        if not bad:
            con.execute(f"ALTER TABLE {_ident(name)} ALTER {_ident(col)} TYPE {wanted}")


def _sqlite_type(kinds: set[str], declared: str) -> str:
    if kinds == {"integer"}:
        return "BIGINT"
    if kinds and kinds <= {"integer", "real"}:
        return "DOUBLE"
    if kinds == {"blob"}:
        return "BLOB"
    if kinds:
        return "VARCHAR"
    # no values: SQLite's type affinity of the declared type
    if "INT" in declared:
        return "BIGINT"
    if any(word in declared for word in ("REAL", "FLOA", "DOUB", "NUM", "DEC")):
        return "DOUBLE"
    return "BLOB" if "BLOB" in declared else "VARCHAR"


def _sqlite_comments(sql: str | None) -> dict[str, Any]:
    """The ``-- comments`` of a SQLite ``CREATE TABLE`` statement: the one just after ``(`` describes the table,
    one after a column's definition that column (read with sqlglot; none when it cannot parse the statement)."""
    import sqlglot
    from sqlglot import exp

    out: dict[str, Any] = {"_comment": None, "_columns": {}}
    if not sql:
        return out
    first = re.match(r"[^(]*\(\s*(?:--([^\n]*)|/\*(.*?)\*/)", sql, re.S)
    if first:
        out["_comment"] = (first.group(1) or first.group(2) or "").strip() or None
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.SqlglotError:
        return out
    for col in tree.find_all(exp.ColumnDef):
        text = " ".join(c.strip() for c in (col.comments or []) + (col.this.comments or []) if c.strip())
        if text and text != out["_comment"]:
            out["_columns"][col.name] = text
    return out


# ---------------------------------------------------------------------- descriptions and the record
def _sidecar(path: Path) -> dict[str, Any] | None:
    side = path.with_name(path.name + SIDECAR)
    if not side.is_file():
        return None
    try:
        meta = tomllib.loads(side.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{side}: not a valid TOML file ({exc}); see `rag index --help` for its keys") from None
    return {"_file": side, **meta}


def _check_sections(meta: dict[str, Any] | None, entries: list[dict[str, Any]]) -> None:
    """A database's sidecar may only describe tables that the database holds."""
    if meta is None or entries and entries[0]["_inner"] is None or not isinstance(meta.get("tables"), dict):
        return
    known = {e["_inner"] for e in entries} | {e["name"] for e in entries}
    for name in meta["tables"]:
        if name not in known:
            raise InputError(f"{meta['_file']}: [tables.{name}]: the database holds no table {name!r}; its tables "
                             f"are: {', '.join(sorted(e['_inner'] for e in entries)) or 'none'}")


def _describe(con: Any, entry: dict[str, Any], meta: dict[str, Any] | None, path: Path) -> None:
    """Set ``entry``'s descriptions (sidecar first, then the source's comments) and write them as COMMENTs."""
    inner = entry.pop("_inner")
    table_desc, col_desc = entry.pop("_comment"), dict(entry.pop("_columns"))
    col_aliases: dict[str, list[str]] = {}
    if meta is not None:
        side = meta["_file"]
        part: Any = meta
        if inner is not None:  # a database file: its [tables.NAME] section
            sections = meta.get("tables", {})
            extra = sorted(set(meta) - {"_file", "tables"})
            if extra or not isinstance(sections, dict):
                raise InputError(f"{side}: a database's sidecar holds [tables.NAME] sections only (found "
                                 f"{', '.join(extra) or 'tables = ...'}); e.g. [tables.{inner}] description = \"...\"")
            part = sections.get(inner, sections.get(entry["name"], {}))
        extra = sorted(set(part) - {"_file", "description", "aliases", "columns"})
        if extra or not isinstance(part.get("description", ""), str) or not isinstance(part.get("columns", {}), dict):
            raise InputError(f"{side}: expected description = \"...\", aliases = [\"...\"] and a [columns] table of "
                             f"name = \"...\" (found {', '.join(extra) or 'a value of the wrong type'})")
        aliases = part.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
            raise InputError(f"{side}: aliases must be a list of words people use for the table's rows, e.g. "
                             f"aliases = [\"haulier\", \"haulage firm\"] (found {aliases!r:.60})")
        entry["aliases"] = [" ".join(a.split()) for a in aliases]
        table_desc = part.get("description") or table_desc
        names = [r[0] for r in con.execute(f"SELECT * FROM {_ident(entry['name'])} LIMIT 0").description]
        for col, text in part.get("columns", {}).items():
            if col not in names:
                raise InputError(f"{side}: column {col!r} is not in table {entry['name']} ({path.name}); its columns "
                                 f"are: {', '.join(names)}")
            if isinstance(text, dict):  # {description = "...", aliases = ["..."]}: the words staff use for it too
                text, col_aliases[col] = _column_entry(side, col, text)
            if not isinstance(text, str):
                raise InputError(f"{side}: column {col!r}: the description must be a string, e.g. {col} = \"...\", "
                                 f"or {col} = {{description = \"...\", aliases = [\"...\"]}}")
            col_desc[col] = text
    entry["description"] = table_desc.strip() if table_desc else None
    entry["_described"] = {k: v.strip() for k, v in col_desc.items() if v and v.strip()}
    entry["_aliases"] = col_aliases
    if entry["description"]:
        con.execute(f"COMMENT ON TABLE {_ident(entry['name'])} IS '{_literal(entry['description'])}'")
    for col, text in entry["_described"].items():
        con.execute(f"COMMENT ON COLUMN {_ident(entry['name'])}.{_ident(col)} IS '{_literal(text)}'")


def _column_entry(side: str, col: str, entry: dict[str, Any]) -> tuple[str, list[str]]:
    """A column given as ``{description = "...", aliases = ["..."]}``: its description and its aliases, checked."""
    extra = sorted(set(entry) - {"description", "aliases"})
    aliases = entry.get("aliases", [])
    if extra or not isinstance(entry.get("description", ""), str) or not isinstance(aliases, list) or not all(
            isinstance(a, str) and a.strip() for a in aliases):
        raise InputError(f"{side}: column {col!r}: expected {col} = {{description = \"...\", aliases = [\"...\"]}} "
                         f"(found {', '.join(extra) or 'a value of the wrong type'})")
    return entry.get("description", ""), [" ".join(a.split()) for a in aliases]


def _summarize(con: Any, entry: dict[str, Any]) -> None:
    """Rows, and per column the type, description and up to three distinct example values (first in row order)."""
    q = _ident(entry["name"])
    described, aliased = entry.pop("_described"), entry.pop("_aliases", {})
    entry["rows"] = int(con.execute(f"SELECT count(*) FROM {q}").fetchone()[0])
    columns = []
    for col, kind in con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = "
                                 "current_database() AND schema_name = 'main' AND table_name = ? ORDER BY "
                                 "column_index", [entry["name"]]).fetchall():
        values = con.execute(f"SELECT CAST({_ident(col)} AS VARCHAR) FROM {q} WHERE {_ident(col)} IS NOT NULL "
                             "ORDER BY rowid LIMIT 200").fetchall()
        examples: list[str] = []
        for (value,) in values:
            short = value if len(value) <= EXAMPLE_CHARS else value[: EXAMPLE_CHARS - 3] + "..."
            short = " ".join(short.split())
            if short not in examples:
                examples.append(short)
            if len(examples) == 3:
                break
        columns.append({"name": col, "type": kind, "description": described.get(col), "examples": examples,
                        **({"aliases": aliased[col]} if aliased.get(col) else {})})
    entry["columns"] = columns
    entry.update({k: entry.pop(k) for k in ("rows", "description", "aliases", "columns") if k in entry})  # in order


# ---------------------------------------------------------------------- small helpers
def _claim(name: str, source: str, owners: dict[str, str]) -> str:
    if name in owners:
        raise InputError(f"tables: {owners[name]} and {source} both become table {name!r}; rename one of them "
                         "(a table is named after its file, or its name inside a database)")
    owners[name] = source
    return name


def _reason(exc: Exception) -> str:
    """DuckDB's message, first line, without its ``Invalid Input Error:`` style prefix."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return re.sub(r"^[A-Za-z ]+Error: ", "", line).strip()


def _literal(text: str) -> str:
    return text.replace("'", "''")


def _ident(name: str) -> str:
    """``name`` as DuckDB reads it: bare when a plain lower-case identifier, else in double quotes."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name not in _reserved():
        return name
    return '"' + name.replace('"', '""') + '"'


_RESERVED: set[str] = set()


def _reserved() -> set[str]:
    if not _RESERVED:
        import duckdb

        with duckdb.connect() as con:
            _RESERVED.update(r[0] for r in con.execute("SELECT keyword_name FROM duckdb_keywords() WHERE "
                                                       "keyword_category = 'reserved'").fetchall())
    return _RESERVED
