"""Port of Jet 0.7 `com.hazelcast.jet.core.Processors_slidingWindowingIntegrationTest` on a
one-member LocalEngine, parametrized as Jet's on single/two-stage windowing and batch/stream.

Deliberate differences: results are mapped to `(end, key, value)` as Jet's
`TimestampedEntry::fromWindowResult` does. In the streaming case Jet's source sleeps forever and
the lull policy (`limitingLagAndLull(500, 1000)`) advances the watermark by the wall clock,
which Jet's test waits for with `assertTrueEventually`, then sleeps a second to see nothing
more arrive. Here the policy's clock is a ticking one, 10 ms further on every reading, so the
windows close after a number of the job's own steps whatever the machine's speed; the test
waits for the two windows (bounded by the test timeout), cancels the job and checks that
nothing else arrived.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import pytest

from jetspark.core import DAG, AbstractProcessor, JobCancelledError, LocalEngine
from jetspark.core.traversers import traverse_iterable
from jetspark.edges import between
from jetspark.processors import (
    accumulate_by_frame_p,
    aggregate_to_sliding_window_p,
    combine_to_sliding_window_p,
    entry_key,
    insert_watermarks_p,
    write_list_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.watermark_policies import emit_by_frame, limiting_lag_and_lull
from jetspark.processors.windowing import TimestampKind, sliding_window_policy

pytestmark = pytest.mark.timeout(120)


class MyEvent(NamedTuple):
    timestamp: int
    key: str
    value: int


def event_key(event: MyEvent) -> str:
    return event.key


def event_timestamp(event: MyEvent) -> int:
    return event.timestamp


def from_window_result(start: int, end: int, key: Any, value: Any) -> tuple[int, Any, Any]:
    return (end, key, value)


class TickingClock:
    """Milliseconds that advance by 10 on every reading."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += 10
        return self.now


class EmitListP(AbstractProcessor):
    """Emits a list, then completes (batch) or stays without completing (stream)."""

    def __init__(self, items: list[Any], complete: bool) -> None:
        self._items = traverse_iterable(items)
        self._complete = complete

    def complete(self) -> bool:
        return self.emit_from_traverser(self._items) and self._complete


@pytest.mark.parametrize(
    ("single_stage_processor", "is_batch"),
    [(True, True), (True, False), (False, True), (False, False)],
    ids=lambda value: str(value),
)
def test_smoke_test(single_stage_processor: bool, is_batch: bool) -> None:
    """`Processors_slidingWindowingIntegrationTest.smokeTest`."""
    source_events = [MyEvent(10, "a", 1)]
    expected = [(1000, "a", 1), (2000, "a", 1)]
    policy = sliding_window_policy(2000, 1000)
    engine = LocalEngine()
    dag = DAG()
    source = dag.new_vertex(
        "source", lambda: EmitListP(source_events, is_batch), local_parallelism=1
    )
    insert_pp = dag.new_vertex(
        "insertWmP",
        insert_watermarks_p(
            event_timestamp,
            limiting_lag_and_lull(500, 1000, TickingClock()),
            emit_by_frame(policy),
        ),
        local_parallelism=1,
    )
    sink = dag.new_vertex("sink", write_list_p("sink"))
    dag.edge(between(source, insert_pp).isolated())
    if single_stage_processor:
        sliding_win = dag.new_vertex(
            "slidingWin",
            aggregate_to_sliding_window_p(
                [event_key],
                [event_timestamp],
                TimestampKind.EVENT,
                policy,
                counting(),
                from_window_result,
            ),
        )
        dag.edge(between(insert_pp, sliding_win).partitioned(event_key).distributed())
        dag.edge(between(sliding_win, sink))
    else:
        accumulate_by_frame = dag.new_vertex(
            "accumulateByFrame",
            accumulate_by_frame_p(
                [event_key], [event_timestamp], TimestampKind.EVENT, policy, counting()
            ),
        )
        sliding_win = dag.new_vertex(
            "slidingWin", combine_to_sliding_window_p(policy, counting(), from_window_result)
        )
        dag.edge(between(insert_pp, accumulate_by_frame).partitioned(event_key))
        dag.edge(between(accumulate_by_frame, sliding_win).partitioned(entry_key).distributed())
        dag.edge(between(sliding_win, sink))
    job = engine.new_job(dag)
    sink_list = engine.get_list("sink")
    if is_batch:
        job.join(timeout=60)
    else:
        while len(sink_list) < len(expected):  # the module's timeout bounds the wait
            time.sleep(0.01)
        job.cancel()
        with pytest.raises(JobCancelledError):
            job.join(timeout=60)
    assert sink_list == expected
