"""A new user's first-hour mistakes are refused when the pipeline is built, each error naming
the stages involved (issue #45): a stage of another pipeline given to any operation that
takes stages, and a second `add_timestamps` on a stage that already has timestamps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jetspark.core import DagValidationError
from jetspark.core.pipeline import (
    JoinClause,
    Pipeline,
    Sinks,
    SourceBuilder,
    Sources,
    StreamStage,
    WindowDefinition,
)
from jetspark.processors.aggregate import counting


def _key(item: Any) -> Any:
    return item


def _pair(item: Any, other: Any) -> Any:
    return (item, other)


def _build_with(builder: Any, *args: Any, build_args: tuple[Any, ...] = ()) -> Any:
    builder.add(*args)
    return builder.build(*build_args)


def _stream(pipeline: Pipeline, name: str) -> StreamStage:
    return pipeline.draw_from(Sources.stream_journal(name)).set_name(name)


def _timestamped(pipeline: Pipeline, name: str) -> StreamStage:
    return _stream(pipeline, name).add_timestamps(_key, 0).set_name(f"{name}-timestamps")


TUMBLING = WindowDefinition.tumbling(10)
JOIN = JoinClause.join_map_entries(_key)

# each operation that takes another stage, given `this` (of one pipeline) and `other` (of
# another), both batch stages drawn from Sources.list
BATCH_OPERATIONS: dict[str, Callable[[Any, Any, Pipeline], Any]] = {
    "pipeline.drain_to": lambda this, other, p2: p2.drain_to(Sinks.list("out"), this),
    "pipeline.drain_to of two": lambda this, other, p2: p2.drain_to(Sinks.list("out"), other, this),
    "pipeline.write_to": lambda this, other, p2: p2.write_to(Sinks.list("out"), this),
    "merge": lambda this, other, p2: this.merge(other),
    "hash_join": lambda this, other, p2: this.hash_join(other, JOIN, _pair),
    "hash_join2": lambda this, other, p2: this.hash_join2(this, JOIN, other, JOIN, _pair),
    "hash_join_builder": lambda this, other, p2: _build_with(
        this.hash_join_builder(), other, JOIN, build_args=(_pair,)
    ),
    "aggregate2": lambda this, other, p2: this.aggregate2(counting(), other, counting()),
    "aggregate3": lambda this, other, p2: this.aggregate3(
        counting(), this, counting(), other, counting()
    ),
    "aggregate_builder": lambda this, other, p2: _build_with(
        this.aggregate_builder(counting()), other, counting()
    ),
    "grouped aggregate2 (co-grouping)": lambda this, other, p2: this.grouping_key(_key).aggregate2(
        counting(), other.grouping_key(_key), counting()
    ),
    "grouped aggregate_builder": lambda this, other, p2: _build_with(
        this.grouping_key(_key).aggregate_builder(counting()),
        other.grouping_key(_key),
        counting(),
    ),
}

# the same for windowed co-aggregation, given timestamped stream stages
WINDOW_OPERATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "windowed aggregate2": lambda this, other: this.window(TUMBLING).aggregate2(
        counting(), other, counting()
    ),
    "windowed aggregate_builder": lambda this, other: _build_with(
        this.window(TUMBLING).aggregate_builder(counting()), other, counting()
    ),
    "grouped windowed aggregate2": lambda this, other: (
        this.grouping_key(_key)
        .window(TUMBLING)
        .aggregate2(counting(), other.grouping_key(_key), counting())
    ),
}


@pytest.mark.parametrize("operation", BATCH_OPERATIONS, ids=list(BATCH_OPERATIONS))
def test_a_stage_of_another_pipeline_is_refused_naming_both(operation: str) -> None:
    p1, p2 = Pipeline.create(), Pipeline.create()
    this = p1.draw_from(Sources.list("in1")).set_name("first-stage")
    other = p2.draw_from(Sources.list("in2")).set_name("second-stage")
    with pytest.raises(DagValidationError, match="different pipelines") as refused:
        BATCH_OPERATIONS[operation](this, other, p2)
    message = str(refused.value)
    assert "first-stage" in message
    # a sink of `p2` given only a stage of `p1` is named in its place
    other_name = (
        "listSink(out)"
        if operation in ("pipeline.drain_to", "pipeline.write_to")
        else "second-stage"
    )
    assert f"'{other_name}'" in message


@pytest.mark.parametrize("operation", WINDOW_OPERATIONS, ids=list(WINDOW_OPERATIONS))
def test_a_windowed_stage_of_another_pipeline_is_refused_naming_both(operation: str) -> None:
    this = _timestamped(Pipeline.create(), "first")
    other = _timestamped(Pipeline.create(), "second")
    with pytest.raises(DagValidationError, match="different pipelines") as refused:
        WINDOW_OPERATIONS[operation](this, other)
    assert "'first-timestamps'" in str(refused.value)
    assert "'second-timestamps'" in str(refused.value)


def test_a_refused_drain_leaves_the_sink_free_and_the_pipeline_unchanged() -> None:
    p1, p2 = Pipeline.create(), Pipeline.create()
    stage = p1.draw_from(Sources.list("in"))
    sink = Sinks.list("out")
    with pytest.raises(DagValidationError, match="different pipelines"):
        p2.drain_to(sink, stage)
    stage.drain_to(sink)  # the sink was not claimed by the refused call
    assert [v.name for v in p1.to_dag().vertices()] == ["listSource(in)", "listSink(out)"]


def test_stages_of_one_pipeline_still_combine() -> None:
    pipeline = Pipeline.create()
    left = pipeline.draw_from(Sources.list("left"))
    right = pipeline.draw_from(Sources.list("right"))
    left.merge(right).drain_to(Sinks.list("merged"))
    left.hash_join(right, JOIN, _pair).drain_to(Sinks.list("joined"))
    pipeline.drain_to(Sinks.list("both"), left, right)
    pipeline.to_dag()


SECOND_TIMESTAMPS: dict[str, Callable[[StreamStage], Any]] = {
    "add_timestamps": lambda stage: stage.add_timestamps(_key, 0),
    "with_timestamps": lambda stage: stage.with_timestamps(_key, 0),
    "with_ingestion_timestamps": lambda stage: stage.with_ingestion_timestamps(),
}


@pytest.mark.parametrize("second", SECOND_TIMESTAMPS, ids=list(SECOND_TIMESTAMPS))
def test_a_second_add_timestamps_is_refused_naming_the_first(second: str) -> None:
    stage = (
        _stream(Pipeline.create(), "events")
        .with_ingestion_timestamps()
        .set_name("stamped")
        .map(_key)
        .set_name("after-stamping")
    )
    with pytest.raises(DagValidationError, match="already has timestamps") as refused:
        SECOND_TIMESTAMPS[second](stage)
    assert "'after-stamping'" in str(refused.value)
    assert "'stamped'" in str(refused.value)


def test_add_timestamps_on_a_timestamped_source_is_refused_naming_the_source() -> None:
    source = (
        SourceBuilder.timestamped_stream("clock", lambda context: None)
        .fill_buffer_fn(lambda state, buffer: None)
        .build()
    )
    stage = Pipeline.create().draw_from(source).filter(_key).set_name("kept")
    with pytest.raises(DagValidationError, match="already has timestamps") as refused:
        stage.add_timestamps(_key, 0)
    assert "'kept'" in str(refused.value)
    assert "'clock'" in str(refused.value)


def test_add_timestamps_on_window_results_is_refused_naming_the_window() -> None:
    windowed = _timestamped(Pipeline.create(), "events").window(TUMBLING).aggregate(counting())
    windowed.set_name("counts")
    with pytest.raises(DagValidationError, match="already has timestamps") as refused:
        windowed.map(_key).add_timestamps(_key, 0)
    assert "'counts'" in str(refused.value)


def test_a_stage_without_timestamps_still_takes_them() -> None:
    pipeline = Pipeline.create()
    stamped = _stream(pipeline, "events").map(_key).add_timestamps(_key, 5)
    stamped.window(TUMBLING).aggregate(counting()).drain_to(Sinks.list("counts"))
    batch = pipeline.draw_from(Sources.list("rows")).add_timestamps(_key, 0)
    batch.drain_to(Sinks.list("rows-out"))
    pipeline.to_dag()
