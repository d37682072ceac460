"""The latency rows' bookkeeping: a round that gives no figure is left out, and says why."""

from __future__ import annotations

import math

from bench.latency_rows import FellBehind, Latency, _checked, _row


def fell_behind() -> list[Latency]:
    raise FellBehind("not delivered")


def wrong() -> list[Latency]:
    raise AssertionError("2 events never arrived")


def test_a_system_that_fell_behind_or_was_wrong_gives_no_figure_and_the_row_says_why():
    good = [Latency(1.0, 2.0, 100, 0.5, 1.0)]
    pairs = [(good, _checked(fell_behind)), (good, _checked(wrong)), (good, good)]
    row = _row("15h", "events", 100_000, 0, pairs, "SSS", None)
    assert row.subject.values == (2.0,) and row.baseline.values == (2.0,)
    assert row.note.endswith("; 2 of 3 rounds left out: SSS (fell behind), SSS (wrong output)")
    assert row.extra["left_out"] == {
        "SSS": ["fell behind: not delivered", "wrong output: 2 events never arrived"]
    }


def test_a_row_without_a_figure_says_so():
    pairs = [([Latency(1.0, 2.0, 100, 0.5, 1.0)], _checked(fell_behind))]
    row = _row("15h", "events", 100_000, 0, pairs, "SSS", None)
    assert math.isnan(row.subject.median)
    assert row.note == "no figure; 1 of 1 rounds left out: SSS (fell behind)"
