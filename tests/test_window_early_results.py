"""Early window results (Jet 4's `setEarlyResultsPeriod`, issue #43): every period the windows
that hold data but are still open are emitted with their partial results, marked `is_early`;
the final result follows when the watermark closes the window. Processors are driven by hand
with an injected clock; the pipeline tests assert items only."""

from __future__ import annotations

import time
from typing import Any

import pytest

from jetspark.core import LocalEngine
from jetspark.core.pipeline import Pipeline, Sinks, Sources, WindowDefinition
from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext
from jetspark.core.watermark import Watermark
from jetspark.processors import aggregate_to_sliding_window_p
from jetspark.processors.aggregate import counting, summing
from jetspark.processors.session_window import aggregate_to_session_window_p
from jetspark.processors.windowing import KeyedWindowResult, TimestampKind, sliding_window_policy

PATIENCE_SECONDS = 120.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def _key(item: tuple[str, int]) -> str:
    return item[0]


def _time(item: tuple[str, int]) -> int:
    return item[1]


def _started(supplier: Any) -> tuple[Any, TestOutbox]:
    processor = supplier()
    outbox = TestOutbox(100)
    processor.init(outbox, TestProcessorContext())
    return processor, outbox


def _feed(processor: Any, *items: Any) -> None:
    inbox = TestInbox().add_all(items)
    processor.process(0, inbox)
    assert not inbox


def _drained(outbox: TestOutbox) -> list[Any]:
    out: list[Any] = []
    outbox.drain_queue(0, out)
    return out


@pytest.mark.parametrize("window", [(10, 10), (20, 10)], ids=["tumbling", "sliding"])
def test_open_windows_are_emitted_early_every_period_then_finally(window: tuple[int, int]) -> None:
    size, slide = window
    clock = Clock()
    supplier = aggregate_to_sliding_window_p(
        _key,
        _time,
        TimestampKind.EVENT,
        sliding_window_policy(size, slide),
        counting(),
        early_results_period=100,
        clock=clock,
    )
    processor, outbox = _started(supplier)
    _feed(processor, ("a", 1), ("a", 2), ("b", 5))
    clock.now += 99
    assert processor.try_process() is True
    assert _drained(outbox) == []  # not a whole period yet
    clock.now += 1
    assert processor.try_process() is True
    early = _drained(outbox)
    expected = {("a", 2), ("b", 1)}
    ends = range(slide, size + 1, slide)  # every window that holds frame 10
    assert {(r.key, r.value) for r in early} == expected
    assert sorted({r.end for r in early}) == list(ends)
    assert all(r.is_early and isinstance(r, KeyedWindowResult) for r in early)
    # the accumulators were exported, not finished: more items still count
    _feed(processor, ("a", 3))
    clock.now += 100
    processor.try_process()
    assert {(r.end, r.key, r.value) for r in _drained(outbox)} == {
        (end, key, count) for end in ends for key, count in (("a", 3), ("b", 1))
    }
    assert processor.try_process_watermark(Watermark(1_000))
    final = _drained(outbox)
    assert {(r.end, r.key, r.value) for r in final} == {
        (end, key, count) for end in ends for key, count in (("a", 3), ("b", 1))
    }
    assert not any(r.is_early for r in final)
    clock.now += 1_000
    processor.try_process()
    assert _drained(outbox) == []  # nothing open: no early results


def test_a_full_outbox_resumes_the_early_results_where_it_stopped() -> None:
    clock = Clock()
    supplier = aggregate_to_sliding_window_p(
        _key,
        _time,
        TimestampKind.EVENT,
        sliding_window_policy(10, 10),
        counting(),
        early_results_period=50,
        clock=clock,
    )
    processor = supplier()
    outbox = TestOutbox(1)
    processor.init(outbox, TestProcessorContext())
    _feed(processor, ("a", 1), ("b", 1), ("c", 1))
    clock.now += 50
    seen: list[Any] = []
    while processor.try_process() is not True:
        outbox.drain_queue(0, seen)
    outbox.drain_queue(0, seen)
    assert sorted((r.key, r.value) for r in seen) == [("a", 1), ("b", 1), ("c", 1)]


def test_open_sessions_are_emitted_early_and_closed_ones_finally() -> None:
    clock = Clock()
    supplier = aggregate_to_session_window_p(
        10, _time, _key, summing(lambda item: 1), early_results_period=100, clock=clock
    )
    processor, outbox = _started(supplier)
    _feed(processor, ("a", 1), ("a", 5), ("b", 40))
    clock.now += 100
    processor.try_process()
    early = sorted(_drained(outbox))
    assert [(r.start, r.end, r.key, r.value, r.is_early) for r in early] == [
        (1, 15, "a", 2, True),
        (40, 50, "b", 1, True),
    ]
    assert processor.try_process_watermark(Watermark(20))
    assert [(r.key, r.value, r.is_early) for r in _drained(outbox)] == [("a", 2, False)]


def test_a_negative_or_fractional_period_is_refused() -> None:
    for period in (-1, 0.5):
        with pytest.raises(ValueError, match="early_results_period must be an int >= 0"):
            WindowDefinition.tumbling(10).set_early_results_period(period)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="early_results_period must be an int >= 0"):
            aggregate_to_sliding_window_p(
                _key,
                _time,
                TimestampKind.EVENT,
                sliding_window_policy(10, 10),
                counting(),
                early_results_period=period,  # type: ignore[arg-type]
            )


def test_a_pipeline_window_with_early_results_gives_them_before_the_final_ones() -> None:
    """A stream whose windows never close (no later event): only early results can come, and
    they do, marked early, with the counts so far; the stage is planned in one vertex."""
    engine = LocalEngine()
    engine.get_list("events")[:] = [("a", 1), ("a", 2), ("b", 3)]
    p = Pipeline.create()
    windows = (
        p.draw_from(Sources.stream_journal("events"))
        .add_timestamps(_time, 0)
        .grouping_key(_key)
        .window(WindowDefinition.tumbling(1_000).set_early_results_period(20))
    )
    windows.aggregate(counting()).drain_to(Sinks.list("early"))
    assert [v.name for v in p.to_dag().vertices()].count("tumbling-window") == 1
    job = engine.new_job(p)
    deadline = time.monotonic() + PATIENCE_SECONDS
    results = engine.get_list("early")
    while not {("a", 2), ("b", 1)} <= {(r.key, r.value) for r in results}:
        assert time.monotonic() < deadline and not job.status.is_terminal, list(results)
        time.sleep(0.02)
    job.cancel()
    assert all(r.is_early and r.timestamp == 1_000 for r in results)
