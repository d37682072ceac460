"""LocalEngine failure paths: errors name vertex, processor and callback; nothing ever hangs."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from runtime_processors import Endless, Failing, ListSink, ScriptSource

from jetspark.core import (
    DAG,
    Context,
    DagValidationError,
    Inbox,
    JobCancelledError,
    JobConfig,
    JobFailedError,
    JobStatus,
    LocalEngine,
    Outbox,
    Processor,
    ProcessorContractError,
    ProcessorMetaSupplier,
    ProcessorSupplier,
    Watermark,
)
from jetspark.edges import between
from jetspark.partitioning import UnpartitionableKeyError

pytestmark = pytest.mark.timeout(60)


def pipeline(source: Callable[[], Processor], sink: Callable[[], Processor], lp: int = 2) -> DAG:
    dag = DAG()
    a = dag.new_vertex("source", source, lp)
    b = dag.new_vertex("sink", sink, lp)
    dag.edge(between(a, b))
    return dag


def failed(job: Any) -> JobFailedError:
    with pytest.raises(JobFailedError) as caught:
        job.join(timeout=30)
    assert job.status is JobStatus.FAILED
    return caught.value


@pytest.mark.parametrize("cooperative", [True, False])
@pytest.mark.parametrize("callback", ["init", "process", "complete"])
def test_a_failing_callback_fails_the_job_naming_vertex_processor_and_callback(
    callback: str, cooperative: bool
) -> None:
    closed: list[int] = []
    on_sink = callback != "complete"
    failing = lambda: Failing(callback, closed, cooperative)  # noqa: E731
    source = (lambda: ScriptSource({0: [1, 2, 3]})) if on_sink else failing
    sink = failing if on_sink else (lambda: ListSink("out"))
    job = LocalEngine(members=2).new_job(pipeline(source, sink))
    error = failed(job)
    assert error.vertex_name == ("sink" if on_sink else "source")
    assert error.callback == callback
    assert error.processor_index in range(4)
    assert f"processor #{error.processor_index}" in str(error) and callback in str(error)
    assert isinstance(error.__cause__, ValueError)
    frames = traceback.extract_tb(error.__cause__.__traceback__)
    assert frames[-1].name == "_maybe_fail"  # the original traceback is kept
    # every processor whose init() ran was closed; a failing init() stops the others' inits
    assert len(closed) == (1 if callback == "init" else 4)


def test_a_failing_close_fails_an_otherwise_successful_job() -> None:
    closed: list[int] = []
    job = LocalEngine().new_job(
        pipeline(lambda: ScriptSource({0: [1]}), lambda: Failing("close", closed), lp=1)
    )
    error = failed(job)
    assert (error.vertex_name, error.processor_index, error.callback) == ("sink", 0, "close")


class FailingMeta(ProcessorMetaSupplier):
    def init(self, context: Any) -> None:
        raise KeyError("no such table")

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], Any]:
        raise AssertionError("not reached")


def test_a_failing_meta_supplier_fails_the_job() -> None:
    dag = DAG()
    dag.new_vertex("lookup", FailingMeta())
    error = failed(LocalEngine().new_job(dag))
    assert (error.vertex_name, error.processor_index) == ("lookup", None)
    assert error.callback == "ProcessorMetaSupplier.init"


class OneTooFew(ProcessorSupplier):
    def get(self, count: int) -> list[Processor]:
        return [ScriptSource({}) for _ in range(count - 1)]


def test_a_supplier_returning_the_wrong_count_fails_the_job() -> None:
    dag = DAG()
    dag.new_vertex("v", OneTooFew(), 2)
    error = failed(LocalEngine().new_job(dag))
    assert error.callback == "ProcessorSupplier.get" and "2 Processor instances" in str(error)


def test_invalid_dags_fail_at_submit_time() -> None:
    dag = DAG()
    a = dag.new_vertex("a", lambda: ScriptSource({}))
    b = dag.new_vertex("b", lambda: ListSink("x"))
    dag.edge(between(a, b).distributed().isolated())
    with pytest.raises(DagValidationError, match="isolated"):
        LocalEngine().new_job(dag)


class Rewinding(Processor):
    """Emits watermark 10 and then 5: a contract violation."""

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox

    def complete(self) -> bool:
        self.outbox.offer(Watermark(10))
        self.outbox.offer(Watermark(5))
        return True


def test_a_non_increasing_watermark_fails_the_job_naming_the_processor() -> None:
    error = failed(LocalEngine().new_job(pipeline(Rewinding, lambda: ListSink("x"), lp=1)))
    assert (error.vertex_name, error.processor_index, error.callback) == ("source", 0, "complete")
    assert isinstance(error.__cause__, ProcessorContractError)
    assert "vertex 'source' processor #0" in str(error.__cause__)


def test_an_unpartitionable_key_names_the_edge() -> None:
    dag = DAG()
    a = dag.new_vertex("source", lambda: ScriptSource({0: [{"a": 1}]}), 1)
    b = dag.new_vertex("sink", lambda: ListSink("x"), 1)
    dag.edge(between(a, b).distributed().partitioned(lambda item: item))
    error = failed(LocalEngine().new_job(dag))
    assert error.callback == "routing to edge source:0 -> sink:0"
    assert isinstance(error.__cause__, UnpartitionableKeyError)


def test_an_item_that_cannot_cross_members_fails_the_job() -> None:
    lock = threading.Lock()
    dag = DAG()
    a = dag.new_vertex("source", lambda: ScriptSource({0: [lock, lock]}), 1)
    b = dag.new_vertex("sink", lambda: ListSink("x"), 1)
    dag.edge(between(a, b).distributed())
    error = failed(LocalEngine(members=2).new_job(dag))
    assert error.vertex_name == "source" and "routing" in error.callback  # type: ignore[operator]
    assert isinstance(error.__cause__, TypeError)


@pytest.mark.parametrize("cooperative", [True, False])
def test_cancel_stops_an_endless_job_and_closes_every_processor(cooperative: bool) -> None:
    closed: list[int] = []
    job = LocalEngine(members=2).new_job(
        pipeline(lambda: Endless(cooperative=cooperative), lambda: Failing("never", closed))
    )
    while _received(job) < 100:  # metrics during the run (the module's timeout bounds the wait)
        time.sleep(0.01)
    assert job.status is JobStatus.RUNNING
    with pytest.raises(TimeoutError):
        job.join(timeout=0.01)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(timeout=30)
    assert job.status is JobStatus.CANCELLED
    assert sorted(closed) == [0, 1, 2, 3]


def _received(job: Any) -> int:
    """Items the sink received so far (0 until the job's runtime exists)."""
    edges = job.metrics.edges
    return edges[0].received_count if edges else 0


class Stuck(Processor):
    """A non-cooperative sink whose process() sets `entered`, then blocks until `release` is set."""

    def __init__(self, release: threading.Event, entered: threading.Event) -> None:
        self.release = release
        self.entered = entered

    def is_cooperative(self) -> bool:
        return False

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self.entered.set()
        self.release.wait()
        inbox.drain(lambda item: None)


def test_a_stuck_non_cooperative_processor_does_not_hang_cancel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release, entered = threading.Event(), threading.Event()
    engine = LocalEngine(stop_timeout=0.2)
    job = engine.new_job(pipeline(Endless, lambda: Stuck(release, entered), lp=1))
    assert entered.wait(30)
    with caplog.at_level(logging.WARNING, logger="jetspark.sink"):
        job.cancel()
        with pytest.raises(JobCancelledError):
            job.join(timeout=30)
    assert any(
        "sink#0" in r.getMessage() and "not closed" in r.getMessage() for r in caplog.records
    )
    release.set()


class Slow(Processor):
    def process(self, ordinal: int, inbox: Inbox) -> None:
        time.sleep(0.03)
        inbox.drain(lambda item: None)


def test_a_slow_cooperative_callback_is_reported_in_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = JobConfig(slow_callback_millis=10)
    with caplog.at_level(logging.WARNING, logger="jetspark.sink"):
        job = LocalEngine().new_job(pipeline(lambda: ScriptSource({0: [1]}), Slow, lp=1), config)
        job.join(timeout=30)
    messages = [r.getMessage() for r in caplog.records if r.name == "jetspark.sink"]
    assert any(m.startswith("sink#0: cooperative callback process took") for m in messages)
