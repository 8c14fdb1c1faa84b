"""What every benchmark script does with its Markdown: print it (stdout) and, with ``--out``, write it."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shown_path(path: str | Path) -> str:
    """A path as a reader can rerun it: inside the project relative to it, under $SIEVE_HOME as $SIEVE_HOME/..."""
    text = str(path)
    home = os.environ.get("SIEVE_HOME")
    if home and text.startswith(home.rstrip("/") + "/"):
        return "$SIEVE_HOME" + text[len(home.rstrip("/")):]
    root = str(ROOT) + "/"
    return text[len(root):] if text.startswith(root) else text


def emit(lines: list[str], out: Path | None) -> None:
    """Print ``lines`` as one Markdown text and write it to ``out`` (folders made) when given."""
    text = "\n".join(lines).rstrip("\n") + "\n"
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")


def share(k: int, n: int) -> str:
    """``k of n, k/n [95% Wilson interval]``; "n/a" when n is 0."""
    from rag.stats.intervals import wilson

    lo, hi = wilson(k, n) or (0.0, 0.0)
    return f"{k} of {n}, {k / n:.1%} [{lo:.1%}, {hi:.1%}]" if n else "n/a"


def paired_cell(values: list[float], share: bool, base: list[float] | None = None, counts: bool = False) -> str:
    """``mean [95% interval]`` of ``values`` (nan: no value for that item; Wilson for a 0/1 ``share``, else the
    bootstrap), then, against ``base`` on the same items, ``(difference, p)`` of the paired test, with how many
    items did better and worse when ``counts``."""
    from rag.stats.intervals import compare_paired, mean_interval, wilson

    kept = [v for v in values if v == v]
    mean = sum(kept) / len(kept)
    lo_hi = wilson(int(sum(kept)), len(kept)) if share else mean_interval(kept)
    text = f"{mean:.3f} [{lo_hi[0]:.2f}, {lo_hi[1]:.2f}]" if lo_hi else f"{mean:.3f}"
    if base is not None:
        pairs = [(a, b) for a, b in zip(base, values) if a == a and b == b]
        cmp = compare_paired([a for a, _ in pairs], [b for _, b in pairs])
        moved = (f"; {sum(b > a for a, b in pairs)} better, {sum(b < a for a, b in pairs)} worse; " if counts
                 else ", ")
        text += f" ({cmp.diff:+.3f}{moved}p={cmp.p:.2f})"
    return text
