"""A per-day ledger of hosted-model calls in SQLite (``<sieve_home>/usage.sqlite``).

Every attempt is one row: model, tokens in/out, cost at list price, latency, outcome.
``rag usage`` prints the per-day, per-model totals. Rows are committed one by one, so the
ledger stays whole when a run stops (a spent quota, Ctrl-C).

A process may :func:`capture` its rows instead (a Ray eval worker, ``rag.distributed.eval``): each row is handed,
as the call ends, to a function that sends it to the process that owns the ledger (the driver), which writes it
with :meth:`Ledger.write_rows`, so every call is in the driver's ledger once, whichever machine made it.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from rag.paths import sieve_home

SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    ts REAL NOT NULL,
    day TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL,
    latency_s REAL
);
CREATE INDEX IF NOT EXISTS calls_day ON calls(day, model);
"""


@dataclass(frozen=True)
class DayUsage:
    day: str
    model: str
    calls: int
    failed: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


Row = tuple  # (ts, day, model, status, input_tokens, output_tokens, cost_usd, latency_s): one ``calls`` row

_send: Callable[[Row], None] | None = None  # set by capture(): this process hands its rows to another


def capture(send: Callable[[Row], None] | None) -> None:
    """From now on, every ``Ledger.record`` in this process calls ``send(row)`` instead of writing the row (None:
    write them again)."""
    global _send
    _send = send


def default_ledger_path() -> Path:
    return sieve_home() / "usage.sqlite"


class Ledger:
    """Append-only usage rows; safe to share between threads (one connection per operation)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_ledger_path()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30)
        conn.executescript(SCHEMA)
        return conn

    def record(self, *, model: str, status: str, input_tokens: int = 0, output_tokens: int = 0,
               cost_usd: float | None = None, latency_s: float | None = None) -> None:
        """Append one attempt (``status``: ok, rate_limited, server_error, timeout, quota_exhausted, cancelled, error)."""
        now = time.time()
        day = dt.datetime.fromtimestamp(now, dt.timezone.utc).date().isoformat()
        row = (now, day, model, status, int(input_tokens or 0), int(output_tokens or 0), cost_usd, latency_s)
        send = _send
        if send is not None:
            send(row)
            return
        self.write_rows([row])

    def write_rows(self, rows: list[Row]) -> None:
        """Append rows recorded elsewhere (by a capturing worker), as they were, in one transaction."""
        if not rows:
            return
        with closing(self._connect()) as conn, conn:
            conn.executemany("INSERT INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [tuple(r) for r in rows])

    def daily(self, days: int = 7) -> list[DayUsage]:
        """Totals per UTC day and model for the last ``days`` days, newest first."""
        if not self.path.is_file():
            return []
        since = (dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=days - 1)).isoformat()
        with closing(self._connect()) as conn:
            rows = conn.execute(
                "SELECT day, model, SUM(status = 'ok'), SUM(status != 'ok'), SUM(input_tokens), "
                "SUM(output_tokens), COALESCE(SUM(cost_usd), 0) FROM calls WHERE day >= ? "
                "GROUP BY day, model ORDER BY day DESC, model",
                (since,),
            ).fetchall()
        return [DayUsage(*row) for row in rows]
