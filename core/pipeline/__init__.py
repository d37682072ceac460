"""jetspark.core.pipeline: Jet's Pipeline API (manual chapter 4) with Python names.

Draw from `Sources`, transform with stages, drain to `Sinks`; the planner turns the pipeline
into a Core API DAG (`pipeline.to_dag()`), and every engine runs it: `engine.new_job(pipeline)`.
"""

from __future__ import annotations

from jetspark.core.errors import AssertionCompletedError
from jetspark.core.pipeline.co_aggregation import (
    AllOfAggregationBuilder,
    CoAggregateOperationBuilder,
    all_of_builder,
    co_aggregate_operation_builder,
)
from jetspark.core.pipeline.connectors import (
    BatchSource,
    Sink,
    SinkBuilder,
    Sinks,
    Source,
    SourceBuilder,
    Sources,
    StreamSource,
)
from jetspark.core.pipeline.items import (
    EarlyTimestampedEntry,
    EarlyTimestampedItem,
    ItemsByTag,
    Tag,
    TimestampedEntry,
    TimestampedItem,
)
from jetspark.core.pipeline.joins import JoinClause
from jetspark.core.pipeline.kafka import KafkaSinks, KafkaSources
from jetspark.core.pipeline.pipeline import Pipeline
from jetspark.core.pipeline.stages import (
    AggregateBuilder,
    AggregateBuilder1,
    BatchStage,
    BatchStageWithKey,
    HashJoinBuilder,
    SinkStage,
    StageWithKeyAndWindow,
    StageWithWindow,
    StreamStage,
    StreamStageWithKey,
)
from jetspark.core.pipeline.test_kit import Assertions, SimpleEvent, TestSources
from jetspark.core.pipeline.windows import WindowDefinition
from jetspark.processors.service import ServiceFactories, ServiceFactory
from jetspark.processors.source_builder import SourceBuffer
from jetspark.processors.transforms import ContextFactory

__all__ = [
    "AggregateBuilder",
    "AggregateBuilder1",
    "AllOfAggregationBuilder",
    "AssertionCompletedError",
    "Assertions",
    "BatchSource",
    "BatchStage",
    "BatchStageWithKey",
    "CoAggregateOperationBuilder",
    "ContextFactory",
    "EarlyTimestampedEntry",
    "EarlyTimestampedItem",
    "HashJoinBuilder",
    "ItemsByTag",
    "JoinClause",
    "KafkaSinks",
    "KafkaSources",
    "Pipeline",
    "ServiceFactories",
    "ServiceFactory",
    "SimpleEvent",
    "Sink",
    "SinkBuilder",
    "SinkStage",
    "Sinks",
    "Source",
    "SourceBuffer",
    "SourceBuilder",
    "Sources",
    "StageWithKeyAndWindow",
    "StageWithWindow",
    "StreamSource",
    "StreamStage",
    "StreamStageWithKey",
    "Tag",
    "TestSources",
    "TimestampedEntry",
    "TimestampedItem",
    "WindowDefinition",
    "all_of_builder",
    "co_aggregate_operation_builder",
]
