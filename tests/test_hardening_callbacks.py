"""Callbacks that must return a bool (issue 17, item 7): the forgotten `return True` fails the
job naming the vertex, the processor and the callback, on both engines, instead of hanging."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
from runtime_processors import ScriptSource, ship_to_executors

from jetspark.core import (
    DAG,
    Context,
    Inbox,
    JobConfig,
    JobFailedError,
    JobStatus,
    LocalEngine,
    Outbox,
    ProcessingGuarantee,
    Processor,
    Watermark,
)
from jetspark.edges import between

pytestmark = pytest.mark.timeout(60)


class Forgetful(Processor):
    """Returns `result` from `callback` and True from every other bool callback."""

    def __init__(self, callback: str, result: Any) -> None:
        self.callback = callback
        self.result = result

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox

    def process(self, ordinal: int, inbox: Inbox) -> None:
        inbox.drain(lambda item: None)

    def _answer(self, callback: str) -> Any:
        return self.result if callback == self.callback else True

    def try_process(self) -> Any:
        return self._answer("try_process")

    def complete(self) -> Any:
        return self._answer("complete")

    def complete_edge(self, ordinal: int) -> Any:
        return self._answer("complete_edge")

    def try_process_watermark(self, watermark: Watermark) -> Any:
        return self._answer("try_process_watermark")

    def save_to_snapshot(self) -> Any:
        return self._answer("save_to_snapshot")


def dag_with(callback: str, result: Any) -> DAG:
    dag = DAG()
    source = dag.new_vertex("source", lambda: ScriptSource({0: [1, Watermark(5), 2]}), 1)
    x = dag.new_vertex("x", lambda: Forgetful(callback, result), 1)
    dag.edge(between(source, x))
    return dag


CALLBACKS = ["complete", "complete_edge", "try_process", "try_process_watermark"]


@pytest.mark.parametrize("callback", CALLBACKS)
def test_a_callback_returning_none_fails_the_job_naming_it(callback: str) -> None:
    with pytest.raises(JobFailedError) as caught:
        LocalEngine().new_job(dag_with(callback, None)).join(timeout=30)
    message = str(caught.value)
    assert message.startswith("vertex 'x', processor #0 failed in ")
    assert f"{callback}() must return True or False, got None" in message
    assert caught.value.callback == callback


def test_save_to_snapshot_returning_a_non_bool_fails_the_job() -> None:
    config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
    with pytest.raises(JobFailedError, match=r"save_to_snapshot\(\) must .*, got 'yes'"):
        LocalEngine().new_job(dag_with("save_to_snapshot", "yes"), config).join(timeout=30)


def test_a_truthy_non_bool_is_refused_too() -> None:
    with pytest.raises(JobFailedError, match=r"complete\(\) must return True or False, got 1"):
        LocalEngine(members=2).new_job(dag_with("complete", 1)).join(timeout=30)


def test_returning_bools_runs_to_the_end() -> None:
    job = LocalEngine(members=2).new_job(dag_with("complete", True))
    job.join(timeout=30)
    assert job.status is JobStatus.COMPLETED


@pytest.mark.spark
def test_spark_complete_returning_none_fails_the_job_naming_it(spark_engine: Any) -> None:
    ship_to_executors(sys.modules[__name__])
    with pytest.raises(JobFailedError) as caught:
        spark_engine.new_job(dag_with("complete", None)).join(timeout=50)
    message = str(caught.value)  # the first of the two members' tasks to fail reports
    assert re.match(r"vertex 'x', processor #[01] failed in complete: ", message)
    assert "complete() must return True or False, got None" in message
