"""rag.stats.intervals against values computed by hand (each expected number is worked out in the comment beside it)."""

from __future__ import annotations

import pytest

from rag.stats.intervals import (
    bootstrap,
    compare_paired,
    mcnemar,
    mean_interval,
    percentile,
    sign_flip_p,
    verdict,
    wilson,
)


def test_wilson_known_values():
    # z = 1.96, n = 10: z^2/n = 0.38415. k = 0: center = half = (1.92/10)/1.38415 = 0.13877 -> [0, 0.27753]
    lo, hi = wilson(0, 10)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.27753, abs=1e-5)
    # k = n = 10 mirrors it: [1 - 0.27753, 1]
    lo, hi = wilson(10, 10)
    assert (lo, hi) == pytest.approx((0.72247, 1.0), abs=1e-5)
    # k = 5: center 0.5, half = 1.96 * sqrt(0.025 + 0.0096036) / 1.38415 = 0.26341 -> [0.23659, 0.76341]
    assert wilson(5, 10) == pytest.approx((0.23659, 0.76341), abs=1e-5)
    # one item: 1/1 -> [z^2 / (1 + z^2), 1] = [0.20655, 1]
    assert wilson(1, 1) == pytest.approx((0.20655, 1.0), abs=1e-5)
    assert wilson(0, 0) is None
    with pytest.raises(ValueError, match="k must be in"):
        wilson(3, 2)


def test_mcnemar_on_a_hand_made_table():
    # a right / b wrong on 1 item, a wrong / b right on 6, both right on 3, both wrong on 2:
    # p = 2 * P(X <= 1), X ~ Bin(7, 1/2) = 2 * (1 + 7) / 128 = 0.125
    a = [1] * 1 + [0] * 6 + [1] * 3 + [0] * 2
    b = [0] * 1 + [1] * 6 + [1] * 3 + [0] * 2
    assert mcnemar(a, b) == (1, 6, pytest.approx(0.125))
    # 0 vs 6 discordant: 2 / 2^6 = 0.03125; equal discordant counts: p = 1 (capped)
    assert mcnemar([0] * 6, [1] * 6)[2] == pytest.approx(0.03125)
    assert mcnemar([1, 0, 1, 0], [0, 1, 0, 1])[2] == 1.0
    assert mcnemar([1, 1], [1, 1]) == (0, 0, 1.0)  # no discordant pair: nothing to test


def test_sign_flip_p_is_exact_for_small_n():
    assert sign_flip_p([0.4, 0.4, 0.4]) == pytest.approx(2 / 8)  # only all + and all - are as extreme
    assert sign_flip_p([0.5] * 6) == pytest.approx(2 / 64)
    assert sign_flip_p([1.0, -1.0]) == 1.0  # mean 0: every pattern is as extreme
    assert sign_flip_p([0.0, 0.0]) == 1.0  # no difference at all
    # [3, 1]: sign patterns give means 2, 1, -1, -2; |mean| >= 2 for two of the four -> p = 0.5
    assert sign_flip_p([3.0, 1.0]) == 0.5


def test_bootstrap_interval_and_its_seed():
    assert mean_interval([2.0, 2.0, 2.0]) == (2.0, 2.0)  # no spread, no width
    xs = [0.0, 1.0] * 20
    lo, hi = mean_interval(xs)
    assert lo < 0.5 < hi and hi - lo < 0.4  # mean 0.5, se 0.079: about +/- 0.155
    assert mean_interval(xs) == (lo, hi)  # seeded: the same report prints the same interval
    spread = [i / 7 for i in range(40)]
    assert mean_interval(spread) == mean_interval(spread) != mean_interval(spread, seed=1)
    both = bootstrap(xs, lambda s: {"mean": sum(s) / len(s), "none": None})
    assert both["mean"] == (lo, hi) and both["none"] is None
    assert bootstrap([], len) is None
    assert percentile([1, 2, 3, 4], 50) == 2.5


def test_compare_paired_picks_the_test_and_says_it_plainly():
    same = compare_paired([1, 0, 1], [1, 0, 1], "baseline", "full")
    assert same.test == "McNemar (exact)" and same.p == 1.0
    assert same.verdict == "no detectable difference at n=3 (p=1)"
    # 6 of 6 flipped to right: McNemar p = 0.03125 < 0.05, called
    better = compare_paired([0] * 6, [1] * 6, "baseline", "full")
    assert (better.only_a, better.only_b, better.diff) == (0, 6, 1.0)
    assert better.verdict == "full higher than baseline (p=0.031, n=6)"
    # continuous scores: sign-flip p; three equal gains have a zero-width bootstrap interval but p = 0.25
    small = compare_paired([0.2, 0.2, 0.2], [0.6, 0.6, 0.6], "uncompiled", "compiled")
    assert small.test.startswith("paired bootstrap") and small.lo == small.hi == pytest.approx(0.4)
    assert small.p == pytest.approx(0.25) and small.verdict.startswith("no detectable difference at n=3")
    worse = compare_paired([0.9] * 7, [0.4] * 7)
    assert worse.verdict == "B lower than A (p=0.016, n=7)"  # 2 / 2^7
    assert compare_paired([], []).verdict == "no paired items to compare"
    with pytest.raises(ValueError, match="equal length"):
        compare_paired([1], [1, 0])
    assert verdict(0.1, 0.2, 12) == "no detectable difference at n=12 (p=0.2)"


def _record(i: int, *, route: str, gold_route: str, exec_ok: bool | None, facts_ok: bool | None) -> dict:
    data = {"routed": True, "route": route, "route_gold": gold_route, "exec_correct": exec_ok,
            "key_facts_ok": facts_ok, "caught": None}
    return {"id": f"q{i}", "status": "ok", "should_refuse": False,
            "scores": {"refused": False, "overlap_correct": True, "data": data}}


def test_paired_comparison_counts_the_data_route_item_by_item():
    """Two runs over tables: routing, SQL rows and key facts are compared per item (McNemar); an item without a
    gold result does not count for the SQL row, and a run without tables has no data rows at all."""
    from rag.stats.paired import compare_records

    a = [_record(i, route="data", gold_route="data", exec_ok=False, facts_ok=False) for i in range(8)]
    a.append(_record(8, route="docs", gold_route="data", exec_ok=None, facts_ok=True))
    b = [_record(i, route="data", gold_route="data", exec_ok=True, facts_ok=i < 7) for i in range(8)]
    b.append(_record(8, route="data", gold_route="data", exec_ok=None, facts_ok=True))
    rows = {r["metric"]: r for r in compare_records(a, b, "before", "after")}
    sql = rows["sql_execution_accuracy"]
    assert (sql["n"], sql["only_a"], sql["only_b"]) == (8, 0, 8)
    assert sql["p"] == pytest.approx(2 / 2 ** 8)
    assert (rows["routing_accuracy"]["n"], rows["routing_accuracy"]["only_b"]) == (9, 1)
    assert rows["key_fact_accuracy"]["only_b"] == 7
    assert "unanswerable_caught" not in rows  # no unanswerable item
    plain = [{**r, "scores": {"refused": False, "overlap_correct": True}} for r in a]
    assert not {"routing_accuracy", "sql_execution_accuracy"} & {r["metric"] for r in compare_records(plain, plain)}
