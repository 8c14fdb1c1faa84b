"""rag.agent.sqlvote: which drafted statement's result is used."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from types import SimpleNamespace

import pytest

from rag.agent.sqlvote import agreed, result_key


def ran(*rows):
    return SimpleNamespace(rows=list(rows))


def test_the_same_rows_in_another_order_with_columns_swapped_are_one_result():
    assert result_key([("Ironbridge", 3), ("Alpine", 5)]) == result_key([(5, "alpine"), (3, "Ironbridge ")])
    assert result_key([(0.1 + 0.2,)]) == result_key([(0.3,)]) == result_key([(Decimal("0.30"),)])
    assert result_key([(dt.date(2024, 3, 1),)]) == result_key([("2024-03-01",)])
    assert result_key([(1,)]) != result_key([(1,), (1,)])  # a row twice is another result
    assert result_key([(True,)]) != result_key([(1,)])


@pytest.mark.parametrize("results, expected", [
    ([ran((1,)), ran((2,)), ran((2,))], (1, 2)),  # two agree: the first of them
    ([ran((1,)), ran((2,)), None], (0, 1)),  # a tie: the earliest draft, the greedy one
    ([None, ran((2,)), ran((3,)), ran((3,))], (2, 2)),
    ([ran(), ran((1,)), ran()], (0, 2)),  # no rows is a result too
    ([None, None], (-1, 0)),
    ([], (-1, 0)),
])
def test_the_largest_group_wins_and_a_tie_goes_to_the_earliest_draft(results, expected):
    assert agreed(results) == expected
