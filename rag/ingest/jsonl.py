"""Read a JSONL file line by line with errors that name the file, the line and the fix; write JSON that every
parser reads (:func:`dump_json`: no ``NaN`` or ``Infinity`` tokens)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag.errors import InputError


def split_lines(text: str) -> list[str]:
    """JSON Lines split at ``\n`` only (a ``\r`` before it dropped): ``str.splitlines`` would also split at U+0085,
    U+2028 and U+2029, which ``json.dumps(ensure_ascii=False)`` leaves raw inside strings."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def json_lines(path: str | Path, *, missing: str, expect: str = "one JSON object per line") -> Iterator[tuple[int, str, dict[str, Any]]]:
    """Yield ``(line number, "file:line", record)`` for each non-blank line; ``missing`` says the file is absent and what it should be."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise InputError(f"{file}: {missing}")
    try:
        lines = split_lines(file.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{file}: not valid UTF-8 (byte {exc.start}); save it as UTF-8") from None
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{file}:{lineno}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno}); {expect}") from None
        yield lineno, where, rec


def dump_json(data: object, **kwargs) -> str:
    """JSON that every parser reads: NaN and +-Infinity (a chunk's extra fields, a metric of nothing) become null;
    ``allow_nan=False`` guards against any that slips through. ``kwargs`` go to :func:`json.dumps`."""
    def finite(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [finite(v) for v in value]
        return value

    return json.dumps(finite(data), allow_nan=False, **kwargs)


def append_json_line(path: str | Path, record: object) -> None:
    """Append ``record`` to ``path`` as one JSON line, fsynced; a failed write (a full disk) is cut back, so no torn
    line stays to break the file's next reader."""
    write_bytes(Path(path), (dump_json(record, ensure_ascii=False) + "\n").encode("utf-8"), append=True)


def write_bytes(path: Path, data: bytes, *, append: bool) -> None:
    """Write all of ``data`` to ``path`` with ``os.write`` and fsync it; on any OSError undo the write before
    raising (an appended file is cut back to its old size, a new one removed), so no torn line or half file stays."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    start = os.fstat(fd).st_size if append else 0
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError:
        os.ftruncate(fd, start)  # frees what was written: works on a full disk
        if not append:
            os.unlink(path)
        raise
    finally:
        os.close(fd)
