"""Several drafted statements, and the result most of them agree on (``sql_samples``).

A small SQL writer's mistakes vary from draft to draft, while a right reading of the question tends to come back:
drawn a few times at a temperature above zero, the statements that return the same rows are likely the right ones
(execution-guided self-consistency). The data route drafts ``sql_samples`` statements on its first try, the first
greedy (the one it writes without this), the others sampled with seeds 1, 2, ...; each runs through the guard as
any statement does, and those that fail drop out. :func:`agreed` groups the ones that ran by their result (the
same rows in any order, the columns in any order, numbers to 6 significant digits) and picks the largest group,
a tie going to the group that holds the earliest draft, so the greedy statement wins whenever no other result
gathers more votes. Results: benchmarks/results/sql_samples.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DIGITS = 6  # significant digits a number is compared at: 0.1 + 0.2 and 0.3 are the same result


def result_key(rows: Sequence[Sequence[Any]]) -> tuple:
    """What two results share when they hold the same rows, in any order and with their columns in any order."""
    return tuple(sorted((tuple(sorted((_cell(v) for v in row), key=repr)) for row in rows), key=repr))


def agreed(results: Sequence[Any | None]) -> tuple[int, int]:
    """(the index of the draft to use, how many drafts returned its result) over the drafts' ``results`` in the
    order drafted (None: it did not run); (-1, 0) when none ran. Each result has ``rows``."""
    groups: dict[tuple, list[int]] = {}
    for i, result in enumerate(results):
        if result is not None:
            groups.setdefault(result_key(result.rows), []).append(i)
    if not groups:
        return -1, 0
    best = max(groups.values(), key=lambda members: (len(members), -members[0]))
    return best[0], len(best)


def _cell(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):  # not 1 and 0: a flag is not a count
        return str(value).casefold()
    if isinstance(value, (int, float)):
        return float(f"{value:.{DIGITS}g}")
    try:
        return float(f"{float(str(value)):.{DIGITS}g}")
    except ValueError:
        return str(value).strip().casefold()
