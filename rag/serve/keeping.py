"""``rag serve --keep-sql FILE``: a statement the page showed, kept as a labelled SQL example, as ``rag ask
--keep-sql`` keeps one.

The page sends the question, the statement that ran (and the one the writer wrote, so the LIMIT the guard added
is not kept), the route and the answer. Nothing it sends is trusted as a result: the statement runs again here
through the SQL guard, read-only, on the index's own tables, and the rows kept are the ones it returns now (none
when they were cut at the row cap). Then rag.data.labelled.keep_example appends it to FILE in split ``train``,
refusing a question the file holds already, in any split.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from rag.errors import InputError

MAX_SQL_CHARS = 20_000  # a statement longer than this is not one the SQL writer wrote
KEEP_TIMEOUT_S = 5.0  # the statement's time limit when it runs again
KEEP_ROWS = 200  # rows read back; more, and the example keeps the statement without its result


class KeptQueries:
    """Where the page's kept statements go (``path``) and the index whose tables they run on."""

    def __init__(self, path: Path, index: Callable[[], Any]) -> None:
        self.path = Path(path).expanduser()
        self.index = index  # rag.serve.programs.Programs.index: loaded on first use

    def info(self) -> dict[str, Any]:
        return {"file": str(self.path)}

    def keep(self, body: Any) -> dict[str, Any]:
        """Keep what ``body`` names (module docstring); its id, file and split. An InputError naming the field for a
        body the page would never send, a DataError when the statement no longer passes the guard or runs."""
        from rag.data import Warehouse
        from rag.data.labelled import KEPT_SPLIT, keep_example, kept_statement

        if not isinstance(body, dict):
            raise InputError("the body must be a JSON object with question, sql, written, route and answer")
        question, sql = _text(body, "question", 2000), _text(body, "sql", MAX_SQL_CHARS)
        written = _text(body, "written", MAX_SQL_CHARS, required=False)
        route = _text(body, "route", 10, required=False) or "data"
        answer = _text(body, "answer", 20_000, required=False)
        if route not in ("data", "both"):
            raise InputError(f"route: {route!r}; a kept statement answers a data or both question")
        index = self.index()
        if not getattr(index, "tables_path", None) or not Path(index.tables_path).is_file():
            raise InputError("this index has no tables, so there is no statement to keep (rag index --help: tables)")
        with Warehouse(index.tables_path) as warehouse:
            result = warehouse.run(sql, time_limit_s=KEEP_TIMEOUT_S, max_rows=KEEP_ROWS).to_dict()
        rows = None if result["truncated"] else result["rows"]
        item_id = keep_example(self.path, question, kept_statement(written or None, result["sql"]), rows, route,
                               answer=answer, via="rag serve --keep-sql")
        return {"id": item_id, "file": str(self.path), "split": KEPT_SPLIT, "rows_kept": rows is not None}


def _text(body: dict, name: str, limit: int, *, required: bool = True) -> str:
    """The field ``name`` of ``body``, stripped: a string of at most ``limit`` characters that is valid UTF-8
    (rag.serve.app.text_field: a lone surrogate would make the kept file one the golden loader refuses)."""
    from rag.serve.app import text_field

    value = body.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise InputError(f"{name}: required, a non-empty string")
    if len(value) > limit:
        raise InputError(f"{name}: {len(value)} characters, at most {limit}")
    return text_field(name, value).strip()


def check_keep(path: Path | None) -> None:
    """``rag serve --keep-sql FILE``: FILE's folder must exist and FILE must be a file, if it exists, before the
    server starts (an InputError naming the flag)."""
    if path is None:
        return
    file = Path(path).expanduser()
    if file.exists() and not file.is_file():
        raise InputError(f"--keep-sql {path} is not a file; name a JSONL file (created when missing)")
    if not file.parent.is_dir():
        raise InputError(f"--keep-sql {path}: the folder {file.parent} does not exist; create it first")
