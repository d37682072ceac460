"""Port of Jet 4.5 `com.hazelcast.jet.pipeline.test.AssertionsTest`.

Each test draws from `TestSources`, applies an assertion of `Assertions` with `stage.apply`, and
expects the job to complete, or to fail with the AssertionError (Jet's `expectMessage(
AssertionError.class.getName())`: here a JobFailedError whose `cause_type` is AssertionError).
All run on LocalEngine with two members, so an assertion's items cross members to reach its
one collecting processor; the tests taking `any_engine` run on SparkEngine too.

Deliberate differences:

- Jet's job ended by a passed `assertCollectedEventually` fails with AssertionCompletedException,
  which the test expects; here it completes (`join()` returns, status COMPLETED).
- `TestSources.item_stream`'s items come timestamped (a `SourceBuilder.timestamped_stream`), so
  the port drops Jet's `.withoutTimestamps()` after it, which jetspark refuses on a stage whose
  items have timestamps; the failing eventual assertions wait 1 s (Jet: 5).
- After an expected failure Jet's `*_not_terminal_should_fail` and after the expected exception
  its `assertCollectedEventually_not_terminal` check the downstream sink: JUnit never runs those
  lines (the exception ends the test), and what a sink received by the time a job failed or was
  ended by an assertion depends on timing, so the port checks the job's outcome only.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from jetspark.core.errors import JobFailedError
from jetspark.core.job import JobStatus
from jetspark.core.pipeline import Assertions, Pipeline, Sinks, Sources, TestSources
from jetspark.processors.aggregate import counting
from jetspark.processors.functions import whole_item

from .support import ITEM_COUNT, WAIT_SECONDS, execute

pytestmark = pytest.mark.timeout(180)

SINK = "sink"


def execute_and_peel(engine: Any, pipeline: Pipeline) -> JobFailedError:
    """Runs a job expected to fail with an AssertionError (Jet's `executeAndPeel` and
    `expectMessage(AssertionError.class.getName())`); returns its failure."""
    job = engine.new_job(pipeline)
    with pytest.raises(JobFailedError) as failed:
        job.join(WAIT_SECONDS)
    assert failed.value.cause_type == "AssertionError", failed.value
    assert job.status is JobStatus.FAILED
    return failed.value


def assert_completes(engine: Any, pipeline: Pipeline) -> None:
    assert execute(engine, pipeline).status is JobStatus.COMPLETED


def asserting(source: Any, assertion: Any, not_terminal: bool = False) -> Pipeline:
    """`p.readFrom(source).apply(assertion)`, then (Jet's `*_not_terminal` tests) the list
    sink, which the items reach through the assertion."""
    p = Pipeline.create()
    stage = p.read_from(source).apply(assertion)
    if not_terminal:
        stage.write_to(Sinks.list(SINK))
    return p


def test_assert_ordered(any_engine: Any) -> None:
    p = asserting(TestSources.items(1, 2, 3, 4), Assertions.assert_ordered([1, 2, 3, 4]))
    assert_completes(any_engine, p)


def test_assert_ordered_should_fail(any_engine: Any) -> None:
    p = asserting(TestSources.items(4, 3, 2, 1), Assertions.assert_ordered([1, 2, 3, 4]))
    execute_and_peel(any_engine, p)


def test_assert_ordered_not_terminal(engine: Any) -> None:
    assert engine.get_list(SINK) == []
    p = asserting(
        TestSources.items(1, 2, 3, 4), Assertions.assert_ordered([1, 2, 3, 4]), not_terminal=True
    )
    assert_completes(engine, p)
    assert engine.get_list(SINK) == [1, 2, 3, 4]


def test_assert_ordered_not_terminal_should_fail(engine: Any) -> None:
    p = asserting(
        TestSources.items(1, 2, 4, 3), Assertions.assert_ordered([1, 2, 3, 4]), not_terminal=True
    )
    execute_and_peel(engine, p)


def test_assert_any_order(engine: Any) -> None:
    p = asserting(TestSources.items(4, 3, 2, 1), Assertions.assert_any_order([1, 2, 3, 4]))
    assert_completes(engine, p)


def test_assert_any_order_distributed_source(any_engine: Any) -> None:
    source_map = any_engine.get_map("src")
    source_map.update({str(i): i for i in range(ITEM_COUNT)})
    expected = [(str(i), i) for i in range(ITEM_COUNT)]
    p = asserting(Sources.map("src"), Assertions.assert_any_order(expected))
    assert_completes(any_engine, p)


def test_assert_any_order_should_fail(engine: Any) -> None:
    p = asserting(TestSources.items(3, 2, 1), Assertions.assert_any_order([1, 2, 3, 4]))
    execute_and_peel(engine, p)


def test_assert_any_order_duplicate_entry(engine: Any) -> None:
    p = asserting(TestSources.items(1, 3, 2, 3), Assertions.assert_any_order([1, 2, 3, 3]))
    assert_completes(engine, p)


def test_assert_any_order_duplicate_entry_only_in_source_should_fail(engine: Any) -> None:
    p = asserting(TestSources.items(1, 3, 2, 3), Assertions.assert_any_order([1, 2, 3]))
    execute_and_peel(engine, p)


def test_assert_any_order_duplicate_entry_only_in_assert_should_fail(engine: Any) -> None:
    p = asserting(TestSources.items(1, 2, 3), Assertions.assert_any_order([1, 2, 3, 3]))
    execute_and_peel(engine, p)


def test_assert_any_order_not_terminal(engine: Any) -> None:
    p = asserting(
        TestSources.items(4, 3, 2, 1), Assertions.assert_any_order([1, 2, 3, 4]), not_terminal=True
    )
    assert_completes(engine, p)
    assert engine.get_list(SINK) == [4, 3, 2, 1]


def test_assert_any_order_not_terminal_should_fail(engine: Any) -> None:
    p = asserting(
        TestSources.items(3, 2, 1), Assertions.assert_any_order([1, 2, 3, 4]), not_terminal=True
    )
    execute_and_peel(engine, p)


def test_assert_contains(engine: Any) -> None:
    p = asserting(TestSources.items(4, 3, 2, 1), Assertions.assert_contains([1, 3]))
    assert_completes(engine, p)


def test_assert_contains_should_fail(engine: Any) -> None:
    p = asserting(TestSources.items(4, 1, 2, 3), Assertions.assert_contains([1, 3, 5]))
    execute_and_peel(engine, p)


def test_assert_contains_not_terminal(engine: Any) -> None:
    p = asserting(
        TestSources.items(4, 3, 2, 1), Assertions.assert_contains([1, 3]), not_terminal=True
    )
    assert_completes(engine, p)
    assert engine.get_list(SINK) == [4, 3, 2, 1]


def test_assert_contains_not_terminal_should_fail(engine: Any) -> None:
    p = asserting(
        TestSources.items(4, 1, 2, 3), Assertions.assert_contains([1, 3, 5]), not_terminal=True
    )
    execute_and_peel(engine, p)


def at_least_4(items: list[Any]) -> None:
    assert len(items) >= 4, "list size must be at least 4"


def test_assert_collected(engine: Any) -> None:
    p = asserting(TestSources.items(4, 3, 2, 1), Assertions.assert_collected(at_least_4))
    assert_completes(engine, p)


def test_assert_collected_should_fail(engine: Any) -> None:
    p = asserting(TestSources.items(1), Assertions.assert_collected(at_least_4))
    failure = execute_and_peel(engine, p)
    assert "list size must be at least 4" in str(failure)


def test_assert_collected_not_terminal(engine: Any) -> None:
    p = asserting(
        TestSources.items(4, 3, 2, 1), Assertions.assert_collected(at_least_4), not_terminal=True
    )
    assert_completes(engine, p)
    assert engine.get_list(SINK) == [4, 3, 2, 1]


def test_assert_collected_not_terminal_should_fail(engine: Any) -> None:
    p = asserting(TestSources.items(1), Assertions.assert_collected(at_least_4), not_terminal=True)
    execute_and_peel(engine, p)


def received_0(items: list[Any]) -> None:
    assert 0 in items, "did not receive item '0'"


def received_1(items: list[Any]) -> None:
    assert 1 in items, "did not receive item '1'"


def zeros() -> Any:
    """`TestSources.itemStream(1, (ts, seq) -> 0L)`."""
    return TestSources.item_stream(1, lambda timestamp, sequence: 0)


def test_assert_collected_eventually(engine: Any) -> None:
    p = asserting(zeros(), Assertions.assert_collected_eventually(WAIT_SECONDS, received_0))
    assert_completes(engine, p)


def test_assert_collected_eventually_should_fail(engine: Any) -> None:
    p = asserting(zeros(), Assertions.assert_collected_eventually(1, received_1))
    failure = execute_and_peel(engine, p)
    message = str(failure)
    assert "it did not hold within 1 s: did not receive item '1'" in message
    assert re.search(r"; collected \[0(, 0)*\]$", message)


def test_assert_collected_eventually_not_terminal(engine: Any) -> None:
    p = asserting(
        zeros(), Assertions.assert_collected_eventually(WAIT_SECONDS, received_0), not_terminal=True
    )
    assert_completes(engine, p)


def test_assert_collected_eventually_not_terminal_should_fail(engine: Any) -> None:
    p = asserting(zeros(), Assertions.assert_collected_eventually(1, received_1), not_terminal=True)
    execute_and_peel(engine, p)


def test_multiple_assertions_in_pipeline(any_engine: Any) -> None:
    line = "some text here and here and some here"
    p = Pipeline.create()
    (
        p.read_from(TestSources.items(line))
        .apply(Assertions.assert_ordered([line]))
        .flat_map(lambda text: re.split(r"\W+", text.lower()))
        .apply(
            Assertions.assert_any_order(
                ["some", "text", "here", "and", "here", "and", "some", "here"]
            )
        )
        .filter(lambda word: word != "and")
        .apply(Assertions.assert_contains(["some", "text"]))
        .apply(Assertions.assert_contains(["some", "here"]))
        .grouping_key(whole_item)
        .aggregate(counting())
        .write_to(Sinks.map(SINK))
    )
    assert_completes(any_engine, p)
    assert any_engine.get_map(SINK) == {"some": 2, "text": 1, "here": 3}
