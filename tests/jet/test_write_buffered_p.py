"""Port of Jet 0.7 `com.hazelcast.jet.impl.connector.WriteBufferedPTest`.

Deliberate differences: `create_fn` takes the processor's Context (Jet: the global processor
index). Jet's failed-job test sleeps 5 s "to wait for the job to initialize"; the port waits
for the buffer's creation instead, then cancels, so no machine speed can make it flaky.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from jetspark.core import DAG, AbstractProcessor, JobCancelledError, LocalEngine
from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext
from jetspark.core.watermark import Watermark
from jetspark.edges import between
from jetspark.processors import write_buffered_p

pytestmark = pytest.mark.timeout(120)


class EventLog:
    """The events of a logging buffered writer (Jet's static `events` list)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.created = threading.Event()

    def writer(self) -> Any:
        def create(context: Any) -> str:
            self.events.append("new")
            self.created.set()
            return "foo"

        return write_buffered_p(
            create,
            lambda buffer, item: self.events.append(f"add:{item}"),
            lambda buffer: self.events.append("flush"),
            lambda buffer: self.events.append("dispose"),
        )


def test_write_buffered_smoke_test() -> None:
    """`WriteBufferedPTest.writeBuffered_smokeTest`."""
    log = EventLog()
    processor = log.writer()()
    outbox = TestOutbox(1)
    processor.init(outbox, TestProcessorContext())
    inbox = TestInbox().add_all([1, 2])
    processor.process(0, inbox)
    inbox.add_all([3, 4])
    processor.process(0, inbox)
    processor.try_process_watermark(Watermark(0))  # a watermark is not written
    processor.process(0, inbox)  # an empty flush
    processor.complete()
    processor.close()
    assert log.events == [
        "new",
        "add:1",
        "add:2",
        "flush",
        "add:3",
        "add:4",
        "flush",
        "flush",
        "dispose",
    ]
    assert len(inbox) == 0
    assert list(outbox.queue(0)) == []


class StuckForeverSourceP(AbstractProcessor):
    """A source that never completes and emits nothing."""

    def complete(self) -> bool:
        return False


def test_when_write_buffered_job_failed_then_buffer_disposed() -> None:
    """`WriteBufferedPTest.when_writeBufferedJobFailed_then_bufferDisposed` (a cancelled job)."""
    log = EventLog()
    dag = DAG()
    source = dag.new_vertex("source", StuckForeverSourceP)
    sink = dag.new_vertex("sink", log.writer(), local_parallelism=1)
    dag.edge(between(source, sink))
    job = LocalEngine().new_job(dag)
    assert log.created.wait(60), "the sink was never initialized"
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(timeout=60)
    assert "dispose" in log.events, f'no "dispose", only: {log.events}'
