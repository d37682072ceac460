"""Watermarks across micro-batches: a processor with two inputs, one of which goes quiet once
its events reached 30,000, coalesces its watermark to 30,000 when the other input gets there,
on LocalEngine as in micro-batches (where each batch builds the processors again: without the
queues' last watermarks carried from batch to batch, the quiet input held it back for good)."""

from __future__ import annotations

import time
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from microbatch_jobs import guaranteed

from jetspark.core import (
    DAG,
    AbstractProcessor,
    JobCancelledError,
    LocalEngine,
)
from jetspark.core.watermark import Watermark
from jetspark.edges import between, from_
from jetspark.processors import insert_watermarks_p, stream_journal_p, write_list_p
from jetspark.processors.watermark_policies import limiting_lag

FAST = [(t, "fast") for t in range(0, 30_001, 100)]
"""Events of the input that reaches 30,000 over many batches (50 events per batch)."""
SLOW = [(10_000, "slow"), (20_000, "slow"), (30_000, "slow")]
"""Events of the input that reaches 30,000 in the first batch, then stays quiet."""


class TwoInputs(AbstractProcessor):
    """Emits ("fast", time) for each event of ordinal 0 and ("wm", time) for each coalesced
    watermark it receives."""

    def try_process0(self, event: Any) -> bool:
        return self.try_emit(("fast", event[0]))

    def try_process1(self, event: Any) -> bool:
        return True

    def try_process_watermark(self, watermark: Watermark) -> bool:
        return self.try_emit(("wm", watermark.timestamp))


def _time(event: tuple[int, str]) -> int:
    return event[0]


def two_inputs_dag() -> DAG:
    dag = DAG("two-inputs")
    fast = dag.new_vertex("fast", stream_journal_p("fast", partition_count=1))
    slow = dag.new_vertex("slow", stream_journal_p("slow", partition_count=1))
    fast_wm = dag.new_vertex("fast-wm", insert_watermarks_p(_time, limiting_lag(0)))
    slow_wm = dag.new_vertex("slow-wm", insert_watermarks_p(_time, limiting_lag(0)))
    both = dag.new_vertex("both", TwoInputs)
    sink = dag.new_vertex("sink", write_list_p("seen"))
    dag.edge(between(fast, fast_wm)).edge(between(slow, slow_wm))
    dag.edge(between(fast_wm, both)).edge(from_(slow_wm).to(both, 1))
    dag.edge(between(both, sink))
    return dag


@pytest.fixture(params=["local", pytest.param("micro_batch", marks=pytest.mark.spark)])
def engine(request: pytest.FixtureRequest) -> Any:
    if request.param == "local":
        return LocalEngine(1, snapshot_clock=jobs.TickClock())
    from jetspark.core.spark import SparkEngine

    context = request.getfixturevalue("spark_engine").context
    return SparkEngine(context, members=1, batch_items=50)


def test_a_quiet_input_does_not_hold_the_coalesced_watermark_back(engine: Any) -> None:
    engine.get_list("fast").extend(FAST)
    engine.get_list("slow").extend(SLOW)
    job = engine.new_job(two_inputs_dag(), guaranteed())
    seen = engine.get_list("seen")
    deadline = time.monotonic() + 300
    while sum(1 for kind, _ in seen if kind == "fast") < len(FAST):  # every event processed
        assert not job.status.is_terminal and time.monotonic() < deadline, job
        time.sleep(0.05)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(120)
    watermarks = [value for kind, value in seen if kind == "wm"]
    assert max(watermarks) == 30_000
    assert watermarks == sorted(set(watermarks))  # rising, never the same one twice
