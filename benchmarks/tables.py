"""What every benchmark script does with its Markdown: print it (stdout) and, with ``--out``, write it."""

from __future__ import annotations

from pathlib import Path


def emit(lines: list[str], out: Path | None) -> None:
    """Print ``lines`` as one Markdown text and write it to ``out`` (folders made) when given."""
    text = "\n".join(lines).rstrip("\n") + "\n"
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
