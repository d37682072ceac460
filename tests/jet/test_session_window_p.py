"""Port of Jet 0.7 `com.hazelcast.jet.impl.processor.SessionWindowPTest`: a session timeout of
10, events `(key, timestamp)`, counting.

Deliberate differences: Jet's `WindowResult(start, end, key, value)` is jetspark's
`KeyedWindowResult`, the default output of `aggregate_to_session_window_p`. Jet's `@Repeat(10)`
shuffles run here as ten seeded shuffles, so a failure replays. Jet's `@After` check of the
processor's internal maps is not ported (jetspark tests from the outside), nor is its `main`
benchmark, which is not a test.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from jetspark.core.test_support import TestSupport
from jetspark.core.watermark import Watermark
from jetspark.processors import aggregate_to_session_window_p, entry_key, entry_value
from jetspark.processors.aggregate import counting
from jetspark.processors.windowing import KeyedWindowResult

SESSION_TIMEOUT = 10


def supplier() -> Any:
    return aggregate_to_session_window_p(SESSION_TIMEOUT, entry_value, entry_key, counting())


def events_with_key(key: str) -> list[tuple[str, int]]:
    return [
        # session 1: [1..22]
        (key, 1),
        (key, 6),
        (key, 12),
        # session 2: [30..50]
        (key, 30),
        (key, 35),
        (key, 40),
    ]


def expected_sessions(key: str) -> list[KeyedWindowResult]:
    return [KeyedWindowResult(1, 22, key, 3), KeyedWindowResult(30, 50, key, 3)]


def assert_correctness(events: list[Any]) -> None:
    expected: list[Any] = []
    for key, _ in events:
        for session in expected_sessions(key):
            if session not in expected:
                expected.append(session)
    TestSupport.verify_processor(supplier()).output_checker(TestSupport.SAME_ITEMS_ANY_ORDER).input(
        [*events, Watermark(100)]
    ).expect_output([*expected, Watermark(100)])


def test_when_ordered_events_with_one_key() -> None:
    """`SessionWindowPTest.when_orderedEventsWithOneKey`."""
    assert_correctness(events_with_key("a"))


@pytest.mark.parametrize("seed", range(10))
def test_when_disordered_events_with_one_key(seed: int) -> None:
    """`SessionWindowPTest.when_disorderedEventsWithOneKey` (`@Repeat(10)`)."""
    events = events_with_key("a")
    random.Random(seed).shuffle(events)
    assert_correctness(events)


def test_when_ordered_events_with_three_keys() -> None:
    """`SessionWindowPTest.when_orderedEventsWithThreeKeys`."""
    assert_correctness(events_with_key("a") + events_with_key("b") + events_with_key("c"))


@pytest.mark.parametrize("seed", range(10))
def test_when_disordered_events_with_three_keys(seed: int) -> None:
    """`SessionWindowPTest.when_disorderedEVentsWithThreeKeys` (`@Repeat(10)`)."""
    events = events_with_key("a") + events_with_key("b") + events_with_key("c")
    random.Random(seed).shuffle(events)
    assert_correctness(events)


def test_when_batch_processing_then_flush_everything() -> None:
    """`SessionWindowPTest.when_batchProcessing_then_flushEverything`: the watermark emits the
    first session; `complete()` emits the second."""
    TestSupport.verify_processor(supplier()).input(
        [*events_with_key("a"), Watermark(25)]
    ).expect_output(
        [KeyedWindowResult(1, 22, "a", 3), Watermark(25), KeyedWindowResult(30, 50, "a", 3)]
    )


def test_when_late_event_then_dropped() -> None:
    """`SessionWindowPTest.when_lateEvent_then_dropped`."""
    TestSupport.verify_processor(supplier()).input([Watermark(20), ("key", 19)]).expect_output(
        [Watermark(20)]
    )
