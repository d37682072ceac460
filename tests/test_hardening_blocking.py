"""A cooperative processor that blocks (issue 17, item 8): on LocalEngine, `cancel()` ends the
job within `stop_timeout` anyway, closing every other processor and naming the stuck one and
its callback; the slow-callback warning comes while the callback still blocks."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest
from runtime_processors import Endless, ScriptSource

from jetspark.core import (
    DAG,
    Inbox,
    JobCancelledError,
    JobConfig,
    JobFailedError,
    JobStatus,
    LocalEngine,
    Processor,
)
from jetspark.edges import between

pytestmark = pytest.mark.timeout(30)


class Blocking(Processor):
    """A cooperative sink whose `process()` waits for `release`; records close() calls."""

    def __init__(self, release: threading.Event, entered: threading.Event, closed: list[str]):
        self.release = release
        self.entered = entered
        self.closed = closed

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self.entered.set()
        self.release.wait()
        inbox.drain(lambda item: None)

    def close(self) -> None:
        self.closed.append("sink")


class ClosingSource(Endless):
    def __init__(self, closed: list[str]) -> None:
        super().__init__()
        self.closed = closed

    def close(self) -> None:
        self.closed.append("source")


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_cancel_ends_a_job_stuck_in_a_cooperative_callback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release, entered, closed = threading.Event(), threading.Event(), []
    dag = DAG()
    source = dag.new_vertex("source", lambda: ClosingSource(closed), 1)
    sink = dag.new_vertex("sink", lambda: Blocking(release, entered, closed), 1)
    dag.edge(between(source, sink))
    job = LocalEngine(stop_timeout=0.2).new_job(dag)
    try:
        wait_for(entered.is_set, "the sink to block")
        with caplog.at_level(logging.WARNING, logger="jetspark.sink"):
            job.cancel()
            with pytest.raises(JobCancelledError):
                job.join(timeout=10)
        assert job.status is JobStatus.CANCELLED
        assert closed == ["source"]  # the stuck processor is not closed, the others are
        warnings = [r.getMessage() for r in caplog.records if r.name == "jetspark.sink"]
        assert any(
            m.startswith("sink#0: cooperative callback process still running 0.2 s after the job")
            for m in warnings
        ), warnings
    finally:
        release.set()


def test_a_blocking_callback_gets_the_slow_callback_warning_while_it_blocks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release, entered, closed = threading.Event(), threading.Event(), []
    dag = DAG()
    source = dag.new_vertex("source", lambda: ScriptSource({0: [1, 2]}), 1)
    sink = dag.new_vertex("sink", lambda: Blocking(release, entered, closed), 1)
    dag.edge(between(source, sink))

    def warned() -> bool:
        return any(
            r.getMessage().startswith("sink#0: cooperative callback process is still running")
            for r in caplog.records
        )

    with caplog.at_level(logging.WARNING, logger="jetspark.sink"):
        job = LocalEngine().new_job(dag, JobConfig(slow_callback_millis=20))
        try:
            wait_for(warned, "the warning while process() blocks")
            assert not job.status.is_terminal
        finally:
            release.set()
        job.join(timeout=10)
    assert job.status is JobStatus.COMPLETED
    assert closed == ["sink"]


class FailsOnceSinkBlocks(Processor):
    """A non-cooperative source that fails once `entered` is set (the sink blocks by then)."""

    def __init__(self, entered: threading.Event) -> None:
        self.entered = entered

    def is_cooperative(self) -> bool:
        return False

    def complete(self) -> bool:
        if not self.entered.wait(10):
            return False
        raise ValueError("boom while the sink blocks")


def test_a_failure_elsewhere_ends_a_job_whose_thread_a_callback_blocks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release, entered, closed = threading.Event(), threading.Event(), []
    dag = DAG()
    source = dag.new_vertex("source", lambda: ScriptSource({0: [1]}), 1)
    sink = dag.new_vertex("sink", lambda: Blocking(release, entered, closed), 1)
    dag.new_vertex("failing", lambda: FailsOnceSinkBlocks(entered), 1)
    dag.edge(between(source, sink))
    job = LocalEngine(stop_timeout=0.2).new_job(dag)
    try:
        with (
            caplog.at_level(logging.WARNING, logger="jetspark.sink"),
            pytest.raises(JobFailedError, match="vertex 'failing', processor #0 failed in"),
        ):
            job.join(timeout=10)
        assert closed == []
        assert any("after the job failed" in r.getMessage() for r in caplog.records)
    finally:
        release.set()
