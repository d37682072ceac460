"""An AbstractProcessor's `try_process0..4` (or `try_process_item`) that forgets `return True`
(issue 25, item 8): None is not "call me again". LocalEngine and SparkEngine fail the job naming
the vertex, the processor and the try-method; TestSupport's failure says the same."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
from runtime_processors import ScriptSource, ship_to_executors

from jetspark.core import (
    DAG,
    AbstractProcessor,
    JobConfig,
    JobFailedError,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.test_support import TestSupport
from jetspark.edges import between, from_
from jetspark.processors import write_list_p

pytestmark = pytest.mark.timeout(60)


class ForgetsOnOrdinal0(AbstractProcessor):
    """Emits each item of ordinal 0 and falls off the end of `try_process0`."""

    def try_process0(self, item: Any) -> Any:
        self.try_emit(item)


class ForgetsOnOrdinal1(AbstractProcessor):
    """Takes ordinal 0 properly, forgets `return True` on ordinal 1."""

    def try_process0(self, item: Any) -> bool:
        return self.try_emit(item)

    def try_process1(self, item: Any) -> Any:
        self.try_emit(item)


class ForgetsInTheCatchAll(AbstractProcessor):
    """Overrides only `try_process_item`, and returns None from it."""

    def try_process_item(self, ordinal: int, item: Any) -> Any:
        self.try_emit(item)


class ReturnsTheItem(AbstractProcessor):
    """Returns a truthy non-bool, which is not True either."""

    def try_process0(self, item: Any) -> Any:
        return item if self.try_emit(item) else False


def dag_with(processor: type[AbstractProcessor], ordinals: int = 1) -> DAG:
    dag = DAG("forgetful")
    x = dag.new_vertex("x", processor, 1)
    for ordinal in range(ordinals):
        items = [ordinal * 10 + n for n in range(1, 4)]
        source = dag.new_vertex(f"source{ordinal}", lambda items=items: ScriptSource({0: items}), 1)
        dag.edge(from_(source).to(x, ordinal))
    sink = dag.new_vertex("sink", write_list_p("out"), 1)
    dag.edge(between(x, sink))
    return dag


def failure_of(dag: DAG, engine: Any, config: JobConfig | None = None) -> JobFailedError:
    with pytest.raises(JobFailedError) as caught:
        engine.new_job(dag, config).join(timeout=50)
    return caught.value


@pytest.mark.parametrize(
    ("processor", "ordinals", "callback"),
    [
        (ForgetsOnOrdinal0, 1, "try_process0"),
        (ForgetsOnOrdinal1, 2, "try_process1"),
        (ForgetsInTheCatchAll, 1, "try_process_item"),
    ],
)
def test_local_engine_fails_the_job_naming_the_try_method(
    processor: type[AbstractProcessor], ordinals: int, callback: str
) -> None:
    error = failure_of(dag_with(processor, ordinals), LocalEngine())

    assert str(error) == (
        f"vertex 'x', processor #0 failed in {callback}: CallbackResultError: "
        f"{callback}() must return True or False, got None (a forgotten `return True`?)"
    )
    assert (error.vertex_name, error.processor_index, error.callback) == ("x", 0, callback)


def test_a_truthy_non_bool_is_not_true() -> None:
    error = failure_of(dag_with(ReturnsTheItem), LocalEngine(members=2))

    assert re.fullmatch(
        r"vertex 'x', processor #[01] failed in try_process0: CallbackResultError: "
        r"try_process0\(\) must return True or False, got 1",
        str(error),
    )


def test_with_a_guarantee_the_snapshotting_tasklet_names_it_too() -> None:
    config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
    error = failure_of(dag_with(ForgetsOnOrdinal0), LocalEngine(), config)

    assert error.callback == "try_process0"
    assert "try_process0() must return True or False, got None" in str(error)


@pytest.mark.spark
def test_spark_engine_fails_the_job_naming_the_try_method(spark_engine: Any) -> None:
    ship_to_executors(sys.modules[__name__])
    error = failure_of(dag_with(ForgetsOnOrdinal1, ordinals=2), spark_engine)

    assert re.match(r"vertex 'x', processor #[01] failed in try_process1: ", str(error))
    assert "try_process1() must return True or False, got None (a forgotten" in str(error)
    assert (error.vertex_name, error.callback) == ("x", "try_process1")


def test_test_support_says_which_callback_returned_none() -> None:
    with pytest.raises(AssertionError) as caught:
        (
            TestSupport.verify_processor(ForgetsOnOrdinal0)
            .disable_logging()
            .input([1, 2])
            .expect_output([1, 2])
        )
    message = str(caught.value)

    assert message.startswith(
        "vertex 'test', processor #0: try_process0() must return True or False, got None "
        "(a forgotten `return True`?) in process(ordinal 0) on input item #0 (ordinal 0: 1) "
        "in mode [inbox of one item, snapshots off]"
    )
    assert "made no progress" not in message
    assert "JobFailedError naming try_process0" in message


class CompletesWithNone(ScriptSource):
    """A source whose `complete()` emits its items and returns None."""

    def complete(self) -> Any:
        self.emission.emit(self.outbox)


def test_test_support_checks_the_processors_own_bool_callbacks_too() -> None:
    with pytest.raises(AssertionError) as caught:
        (
            TestSupport.verify_processor(lambda: CompletesWithNone({0: ["a"]}))
            .disable_logging()
            .expect_output(["a"])
        )

    assert str(caught.value).startswith(
        "vertex 'test', processor #0: complete() must return True or False, got None "
        "(a forgotten `return True`?) in complete() before any input"
    )
