"""The pipeline test kit (core/pipeline/test_kit.py, Jet 4's TestSources and Assertions): each
assertion passing and failing, the failure naming the stage and showing expected against
collected; the test sources; a stream job ended by a passed `assert_collected_eventually`
completing on LocalEngine and on SparkEngine in MICRO_BATCH and CONTINUOUS, a failed one
failing; and the example of docs/test_support.md running as written.

The stream sources' rates only decide how long a test waits: every assertion is on items and
outcomes (a check that holds eventually, on any machine; timeouts only a hang reaches, except
where a test wants the timeout).
"""

from __future__ import annotations

import os
import pickle
import re
import time
from pathlib import Path
from typing import Any

import pytest
import test_streaming_conformance as conformance

from jetspark.core import JobConfig, LocalEngine, ProcessingGuarantee
from jetspark.core.errors import AssertionCompletedError, JobFailedError
from jetspark.core.job import Job, JobStatus, completes_job
from jetspark.core.pipeline import (
    Assertions,
    BatchStage,
    Pipeline,
    SimpleEvent,
    Sinks,
    Sources,
    StreamStage,
    TestSources,
    WindowDefinition,
)
from jetspark.processors.aggregate import to_list

WAIT = 120
"""Bounds every join: only a hang reaches it."""
EVENTUALLY = 60
"""The timeout of the checks that hold eventually: only a hang reaches it."""


@pytest.fixture
def engine() -> LocalEngine:
    """Two members: the assertion's items cross members to reach its one processor."""
    return LocalEngine(2)


def run(engine: Any, pipeline: Pipeline, config: JobConfig | None = None) -> Job:
    job = engine.new_job(pipeline, config)
    job.join(WAIT)
    return job


def failure_of(engine: Any, pipeline: Pipeline, config: JobConfig | None = None) -> JobFailedError:
    """The JobFailedError the job fails with."""
    job = engine.new_job(pipeline, config)
    with pytest.raises(JobFailedError) as failed:
        job.join(WAIT)
    assert job.status is JobStatus.FAILED
    return failed.value


def asserting(items: tuple[Any, ...], assertion: Any, name: str = "numbers") -> Pipeline:
    """A pipeline asserting on the stage `name` emitting `items`, which go on to list "out"."""
    p = Pipeline.create()
    stage = p.draw_from(TestSources.items(*items)).set_name(name)
    assert stage.apply(assertion) is stage
    stage.drain_to(Sinks.list("out"))
    return p


def contiguous_windows(windows: list[Any]) -> None:
    """The check of a windowed `item_stream` of sequence numbers: at least 20 of them arrived,
    each once, none missing (every window emitted holds the items of its span)."""
    sequences = sorted(s for window in windows for s in window.item)
    assert len(sequences) >= 20, f"{len(sequences)} items so far"
    assert sequences == list(range(len(sequences))), "an item is missing or repeated"


def windowed_stream(timeout: float = EVENTUALLY, check: Any = contiguous_windows) -> Pipeline:
    """`item_stream` of sequence numbers, 50 ms tumbling windows of them, asserted."""
    p = Pipeline.create()
    (
        p.draw_from(TestSources.item_stream(200, lambda timestamp, sequence: sequence))
        .window(WindowDefinition.tumbling(50))
        .aggregate(to_list())
        .apply(Assertions.assert_collected_eventually(timeout, check))
    )
    return p


def never(items: list[Any]) -> None:
    raise AssertionError("the check never holds")


# --- the assertions, passing and failing ---------------------------------------------------


@pytest.mark.parametrize(
    ("assertion", "items"),
    [
        (Assertions.assert_ordered([1, 2, 3, 4]), (1, 2, 3, 4)),
        (Assertions.assert_any_order([1, 2, 3, 3]), (3, 1, 3, 2)),
        (Assertions.assert_contains([1, 3]), (4, 3, 2, 1)),
        (Assertions.assert_collected(lambda items: len(items) == 4 or never(items)), (1, 2, 3, 4)),
    ],
    ids=["ordered", "any_order", "contains", "collected"],
)
def test_a_passed_assertion_completes_the_job_and_the_items_go_on(
    engine: LocalEngine, assertion: Any, items: tuple[int, ...]
) -> None:
    job = run(engine, asserting(items, assertion))
    assert job.status is JobStatus.COMPLETED
    assert engine.get_list("out") == list(items)


@pytest.mark.parametrize(
    ("assertion", "items", "expected_message"),
    [
        (
            Assertions.assert_ordered([1, 2, 3, 4]),
            (4, 3, 2, 1),
            "stage 'numbers': expected [1, 2, 3, 4] in this order; collected [4, 3, 2, 1]",
        ),
        (
            Assertions.assert_ordered([1, 2, 3, 4], "wrong order"),
            (1, 2, 4, 3),
            "stage 'numbers': wrong order: expected [1, 2, 3, 4] in this order; "
            "collected [1, 2, 4, 3]",
        ),
        (
            Assertions.assert_any_order([1, 2, 3, 4]),
            (3, 2, 1, 1),
            "stage 'numbers': expected [1, 2, 3, 4] in any order: missing [4], unexpected [1]; "
            "collected [3, 2, 1, 1]",
        ),
        (
            Assertions.assert_contains([1, 3, 5]),
            (4, 1, 2, 3),
            "stage 'numbers': expected to contain [1, 3, 5]: not collected [5]; "
            "collected [4, 1, 2, 3]",
        ),
        (
            Assertions.assert_collected(never),
            (1, 2),
            "stage 'numbers': the check never holds; collected [1, 2]",
        ),
    ],
    ids=["ordered", "ordered_with_message", "any_order", "contains", "collected"],
)
def test_a_failed_assertion_names_the_stage_and_shows_expected_and_collected(
    engine: LocalEngine, assertion: Any, items: tuple[int, ...], expected_message: str
) -> None:
    failure = failure_of(engine, asserting(items, assertion))
    assert str(failure).endswith(f"failed in complete: AssertionError: {expected_message}")
    assert failure.cause_type == "AssertionError"
    assert isinstance(failure.__cause__, AssertionError)
    assert failure.vertex_name is not None and failure.vertex_name.startswith("assert")


def test_assertions_on_an_empty_stage_see_no_items(engine: LocalEngine) -> None:
    seen: list[list[Any]] = []
    p = Pipeline.create()
    (
        p.draw_from(TestSources.items(1, 2))
        .filter(lambda item: False)
        .apply(Assertions.assert_collected(seen.append))
        .apply(Assertions.assert_ordered([]))
        .apply(Assertions.assert_ordered([1], "nothing passes"))
    )
    failure = failure_of(engine, p)
    assert "stage 'filter': nothing passes: expected [1] in this order; collected []" in str(
        failure
    )
    assert [] in seen  # called once, by the one collecting processor, before the failure


def test_an_assertion_collects_a_distributed_stage_on_one_processor() -> None:
    """Jet's `test_assertAnyOrder_distributedSource`: items read on every member reach one
    processor, which sees them all."""
    engine = LocalEngine(3, default_local_parallelism=2)
    engine.get_list("numbers").extend(range(300))
    p = Pipeline.create()
    p.draw_from(Sources.list("numbers")).apply(Assertions.assert_any_order(range(300)))
    assert run(engine, p).status is JobStatus.COMPLETED


def test_any_order_compares_unhashable_items_too(engine: LocalEngine) -> None:
    items = ([1], [2], [2])
    assert run(engine, asserting(items, Assertions.assert_any_order([[2], [1], [2]]))).status is (
        JobStatus.COMPLETED
    )
    failure = failure_of(engine, asserting(items, Assertions.assert_any_order([[2], [3], [2]])))
    assert "in any order: missing [[3]], unexpected [[1]]; collected [[1], [2], [2]]" in str(
        failure
    )


def test_the_message_shows_at_most_100_items(engine: LocalEngine) -> None:
    failure = failure_of(engine, asserting(tuple(range(150)), Assertions.assert_ordered([])))
    shown = repr(list(range(100)))[:-1]
    assert str(failure).endswith(f"; collected {shown}, ... (150 items)]")


def test_assertions_refuse_what_they_cannot_use() -> None:
    with pytest.raises(TypeError, match="assert_collected takes a function"):
        Assertions.assert_collected([1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout_seconds must be > 0"):
        Assertions.assert_collected_eventually(0, never)
    with pytest.raises(TypeError, match="assert_collected_eventually takes a function"):
        Assertions.assert_collected_eventually(1, None)  # type: ignore[arg-type]


# --- the test sources ----------------------------------------------------------------------


def test_items_is_a_batch_source_emitting_its_items_in_order(engine: LocalEngine) -> None:
    p = Pipeline.create()
    stage = p.draw_from(TestSources.items("a", ("b", 1), "c"))
    assert isinstance(stage, BatchStage)
    stage.drain_to(Sinks.list("out"))
    run(engine, p)
    assert engine.get_list("out") == ["a", ("b", 1), "c"]


def test_items_with_a_guarantee_emits_each_item_once(engine: LocalEngine) -> None:
    p = Pipeline.create()
    p.draw_from(TestSources.items(*range(100))).drain_to(Sinks.list("out"))
    config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
    job = run(engine, p, config)
    assert engine.get_list("out") == list(range(100))
    assert job.snapshot_store is not None


def test_items_refuses_none() -> None:
    with pytest.raises(ValueError, match="no None items"):
        TestSources.items(1, None)


def test_item_stream_emits_timestamped_simple_events_in_sequence(engine: LocalEngine) -> None:
    seen: list[SimpleEvent] = []

    def ten_events(events: list[SimpleEvent]) -> None:
        assert len(events) >= 10
        seen.extend(events)  # once: the check holds, the job ends

    p = Pipeline.create()
    stage = p.draw_from(TestSources.item_stream(500))
    assert isinstance(stage, StreamStage)
    stage.apply(Assertions.assert_collected_eventually(EVENTUALLY, ten_events))
    started = time.time() * 1000
    assert run(engine, p).status is JobStatus.COMPLETED
    assert [event.sequence for event in seen] == list(range(len(seen)))
    assert all(isinstance(event, SimpleEvent) for event in seen)
    stamps = [event.timestamp for event in seen]
    assert stamps == sorted(stamps)
    assert started - 1000 <= stamps[0] <= stamps[-1] <= time.time() * 1000


def test_item_stream_refuses_a_rate_that_is_not_positive() -> None:
    for rate in (0, -1, True, "10"):
        with pytest.raises(ValueError, match="items_per_second must be > 0"):
            TestSources.item_stream(rate)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="generator_fn takes a function"):
        TestSources.item_stream(10, 5)  # type: ignore[arg-type]


# --- ending a stream job ---------------------------------------------------------------------


def test_a_passed_eventual_assertion_completes_a_windowed_stream_job(engine: LocalEngine) -> None:
    job = run(engine, windowed_stream())
    assert job.status is JobStatus.COMPLETED


def test_with_a_guarantee_too(engine: LocalEngine) -> None:
    job = run(engine, windowed_stream(), conformance.guaranteed())
    assert job.status is JobStatus.COMPLETED


def test_a_failed_eventual_assertion_fails_the_job_after_its_timeout(engine: LocalEngine) -> None:
    started = time.monotonic()
    failure = failure_of(engine, windowed_stream(timeout=1, check=never))
    assert time.monotonic() - started >= 1
    message = str(failure)
    assert failure.cause_type == "AssertionError"
    assert (
        "failed in try_process: AssertionError: stage 'tumbling-window': it did not hold within "
        in (message)
    )
    assert re.search(r"1 s: the check never holds; collected \[TimestampedItem\(", message)


def test_another_exception_of_the_check_fails_the_job_at_once(engine: LocalEngine) -> None:
    def broken(items: list[Any]) -> None:
        raise KeyError("broken check")

    failure = failure_of(engine, windowed_stream(check=broken))
    assert failure.cause_type == "KeyError"
    assert "failed in process: KeyError: 'broken check'" in str(failure)


def test_a_stream_that_ends_checks_once_more_at_its_end(engine: LocalEngine) -> None:
    p = Pipeline.create()
    (
        p.draw_from(TestSources.items(1, 2, 3))
        .add_timestamps(lambda item: item, 0)
        .apply(Assertions.assert_collected_eventually(EVENTUALLY, lambda items: never(items)))
    )
    failure = failure_of(engine, p)
    assert "failed in complete: AssertionError: stage 'add-timestamps'" in str(failure)


# --- the completion mechanism ------------------------------------------------------------------


def test_only_an_assertion_completed_error_reported_by_a_job_completes_it() -> None:
    completed = JobFailedError.caused_by(
        AssertionCompletedError("done"), vertex_name="v", processor_index=0, callback="process"
    )
    assert completed.cause_type == "AssertionCompletedError"
    assert completes_job(completed)
    assert completes_job(pickle.loads(pickle.dumps(completed)))  # as it crosses processes
    assert completes_job(None)
    failed = JobFailedError.caused_by(
        AssertionError("no"), vertex_name="v", processor_index=0, callback="process"
    )
    assert not completes_job(failed)
    assert not completes_job(AssertionCompletedError("not reported by a job"))
    job = Job(1, "j")
    job.mark_ended(completed)
    job.join(0)
    assert job.status is JobStatus.COMPLETED


# --- SparkEngine ---------------------------------------------------------------------------


@pytest.fixture(
    params=[
        pytest.param("micro_batch", marks=pytest.mark.spark),
        pytest.param("continuous", marks=pytest.mark.spark),
    ]
)
def stream_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """SparkEngine(members=2) on the session's local[2] context, in one streaming mode
    (`conformance.guaranteed()` asks for it)."""
    return conformance.engine_for(request, monkeypatch)


def test_on_spark_a_passed_eventual_assertion_completes_the_stream_job(
    stream_engine: Any,
) -> None:
    job = run(stream_engine, windowed_stream(), conformance.guaranteed())
    assert job.status is JobStatus.COMPLETED
    assert job.execution_mode.value == conformance.MODE.value
    store = job.snapshot_store  # a temporary one: removed, as after any completion
    assert store is not None and not os.path.exists(store.directory)


def test_on_spark_a_failed_eventual_assertion_fails_the_stream_job(stream_engine: Any) -> None:
    failure = failure_of(
        stream_engine, windowed_stream(timeout=1, check=never), conformance.guaranteed()
    )
    assert failure.cause_type == "AssertionError"
    assert (
        "AssertionError: stage 'tumbling-window': it did not hold within 1 s: the check never"
        in (str(failure))
    )


@pytest.mark.spark
def test_on_spark_rdd_stages_assertions_pass_and_fail(spark_engine: Any) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    job = run(engine, asserting((1, 2, 3), Assertions.assert_ordered([1, 2, 3])))
    assert job.status is JobStatus.COMPLETED
    assert engine.get_list("out") == [1, 2, 3]
    failure = failure_of(engine, asserting((3, 2, 1), Assertions.assert_ordered([1, 2, 3])))
    assert failure.cause_type == "AssertionError"
    assert (
        "AssertionError: stage 'numbers': expected [1, 2, 3] in this order; collected [3, 2, 1]"
        in str(failure)
    )


# --- docs/test_support.md ----------------------------------------------------------------------


def test_the_example_of_the_docs_runs_as_written() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "test_support.md").read_text()
    section = text[text.index("## Testing pipelines") :]
    code = re.search(r"^```python\n(.*?)^```$", section, re.M | re.S)
    assert code is not None
    namespace: dict[str, Any] = {"__name__": "test_support_example"}
    exec(compile(code.group(1), "docs/test_support.md", "exec"), namespace)
    tests = [fn for name, fn in namespace.items() if name.startswith("test_")]
    assert len(tests) == 2
    for test in tests:
        test()
