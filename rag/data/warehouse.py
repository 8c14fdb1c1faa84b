"""The read-only query engine over an index's DuckDB database, for SQL a model wrote.

:class:`Warehouse` opens the database read-only with external access, extension loading and Python replacement
scans off and the configuration locked, so no statement can switch them back. :meth:`Warehouse.run` passes every
statement through the SQL guard (rag.data.sqlguard) first, then runs it on its own cursor under a time limit and
fetches a bounded number of rows. DuckDB's errors come back as :class:`rag.errors.SQLFailed` with one line.
"""

from __future__ import annotations

import datetime as dt
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from rag.data.sqlguard import check_sql
from rag.errors import DataError, SQLFailed

REASON_CHARS = 200  # a DuckDB error's first line is cut to this many characters
CELL_CHARS = 40  # as_text cuts a longer cell, with "..."


@dataclass
class QueryResult:
    """One statement's answer: the SQL that ran, column names, at most ``max_rows`` rows and whether more existed."""

    sql: str
    columns: list[str]
    rows: list[tuple] = field(default_factory=list)
    truncated: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: dates and times as ISO text, decimals as floats, bytes as hex, NaN and infinity as None."""
        return {"sql": self.sql, "columns": list(self.columns), "rows": [[_plain(v) for v in row] for row in self.rows],
                "truncated": self.truncated, "seconds": round(self.seconds, 4)}

    def as_text(self, max_rows: int = 20) -> str:
        """A compact plain-text table for a prompt: a header, ``|``-separated rows, and a line on what was left out."""
        shown = self.rows[:max_rows]
        lines = [" | ".join(self.columns)]
        lines += [" | ".join(_cell(v) for v in row) for row in shown]
        if not self.rows:
            lines.append("(no rows)")
        left = len(self.rows) - len(shown)
        if left:
            lines.append(f"({left} more row{'' if left == 1 else 's'} not shown)")
        if self.truncated:
            lines.append(f"(the result has more than {len(self.rows)} rows; the rest were not fetched)")
        return "\n".join(lines)


class Warehouse:
    """A DuckDB database file opened read-only for guarded queries. Use as a context manager or call :meth:`close`."""

    def __init__(self, path: str | Path, *, threads: int = 2, memory_limit: str = "1GB") -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise DataError(f"no table database at {self.path}; rebuild the index with rag index PATH")
        config = {
            "enable_external_access": False,
            "autoload_known_extensions": False,
            "autoinstall_known_extensions": False,
            "allow_community_extensions": False,
            "python_enable_replacements": False,
            "temp_directory": "",  # no spilling to disk beside the index: a query past memory_limit fails instead
            "threads": threads,
            "memory_limit": memory_limit,
            "lock_configuration": True,
        }
        try:
            self._con: duckdb.DuckDBPyConnection | None = duckdb.connect(str(self.path), read_only=True, config=config)
        except duckdb.Error as e:
            raise DataError(f"cannot open the table database {self.path} ({_reason(e)}); "
                            "rebuild the index with rag index PATH") from None
        self._tables = self._list_tables()

    @property
    def tables(self) -> list[str]:
        """The names of the database's tables and views, sorted."""
        return list(self._tables)

    def run(self, sql: str, *, time_limit_s: float = 5.0, max_rows: int = 200) -> QueryResult:
        """Check ``sql`` with the guard, run it, and return at most ``max_rows`` rows. Raises SQLRejected when the
        guard refuses it, SQLFailed when DuckDB fails or the time limit passes."""
        statement = check_sql(sql, self._tables, limit=max_rows + 1)  # one row more tells whether there were more
        cursor = self._connection().cursor()
        fired = threading.Event()

        def interrupt() -> None:
            fired.set()
            cursor.interrupt()

        timer = threading.Timer(time_limit_s, interrupt)
        started = time.perf_counter()
        timer.start()
        try:
            result = cursor.execute(statement)
            columns = [d[0] for d in result.description or []]
            rows = result.fetchmany(max_rows + 1)
        except duckdb.Error as e:
            if fired.is_set():
                raise SQLFailed(f"the query ran past the {time_limit_s:g} s time limit") from None
            raise SQLFailed(_reason(e)) from None
        finally:
            timer.cancel()
            cursor.close()
        return QueryResult(sql=statement, columns=columns, rows=[tuple(r) for r in rows[:max_rows]],
                           truncated=len(rows) > max_rows, seconds=time.perf_counter() - started)

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise DataError(f"the table database {self.path} is closed; open a new Warehouse")
        return self._con

    def _list_tables(self) -> tuple[str, ...]:
        """Internal and unguarded: the one place the warehouse writes its own SQL."""
        found = self._connection().execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
            "UNION SELECT view_name FROM duckdb_views() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND NOT internal ORDER BY 1").fetchall()
        return tuple(name for (name,) in found)


def _reason(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    line = " ".join(lines[0].split()) if lines else type(error).__name__
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):  # 12 significant digits: a SUM's 710844.0000000006 reads 710844.0
        return float(f"{value:.12g}") if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else None
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_plain(v) for v in value]
    return str(value)


def _cell(value: Any) -> str:
    text = "NULL" if value is None else str(_plain(value))
    text = " ".join(text.split())
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 3] + "..."
