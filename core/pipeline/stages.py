"""Pipeline stages (Jet's BatchStage, StreamStage, their keyed and windowed forms): each method
adds a transform to the pipeline and returns the stage of its output (manual §4.3-4.14)."""

from __future__ import annotations

import abc
import logging
import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from jetspark.core.context import vertex_logger
from jetspark.core.errors import DagValidationError
from jetspark.core.pipeline.connectors import Sink
from jetspark.core.pipeline.fusion import Step
from jetspark.core.pipeline.items import ItemsByTag, Tag, TimestampedItem, items_by_tag
from jetspark.core.pipeline.joins import JoinClause
from jetspark.core.pipeline.transforms import (
    AggregateTransform,
    AsyncServiceTransform,
    ContextTransform,
    CustomTransform,
    DistinctTransform,
    GroupTransform,
    HashJoinTransform,
    MergeTransform,
    PartitionedKey,
    RebalanceTransform,
    RollingAggregateTransform,
    SinkTransform,
    StatefulTransform,
    StatelessTransform,
    TimestampTransform,
    Transform,
    WindowTransform,
    timestamped_entry,
    timestamped_item,
)
from jetspark.core.pipeline.windows import WindowDefinition, WindowKind
from jetspark.partitioning import Partitioner
from jetspark.processors.aggregate import AggregateOperation, co_aggregate, pick_any
from jetspark.processors.event_time import DEFAULT_IDLE_TIMEOUT_MS
from jetspark.processors.functions import entry, whole_item
from jetspark.processors.service import MAX_CONCURRENT_ASYNC_BATCHES, ServiceFactory
from jetspark.processors.transforms import ContextFactory
from jetspark.processors.watermark_policies import wall_clock_ms

if TYPE_CHECKING:
    from jetspark.core.pipeline.pipeline import Pipeline

_S = TypeVar("_S", bound="ComputeStage")
_T = TypeVar("_T")
_Stage = TypeVar("_Stage", bound="Stage")
"""A stage's own kind, which its setters return."""
"""The kind of stage an operation returns: a batch stage's give batch stages, and so on."""


class _NamesTheKindsThatHaveIt:
    """A method this kind of stage lacks is refused naming the kinds that have it (for users
    without a type checker; a type checker sees no `__getattr__` and flags the call itself)."""

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name.startswith("_"):
                raise AttributeError(name)
            kind = type(self).__name__
            having = [k.__name__ for k in _STAGE_KINDS if hasattr(k, name)]
            if not having:
                raise AttributeError(f"{kind!r} object has no attribute {name!r}")
            verb = "has" if len(having) == 1 else "have"
            hint = _WHERE_FROM.get((kind, name), "")
            raise AttributeError(f"a {kind} has no {name}(); {', '.join(having)} {verb} it{hint}")


class Stage(_NamesTheKindsThatHaveIt):
    """What every stage has: its pipeline, name and local parallelism."""

    def __init__(self, pipeline: Pipeline, transform: Transform) -> None:
        self.pipeline = pipeline
        self.transform = transform

    @property
    def name(self) -> str:
        """The stage's name: the vertex it plans to (or the prefix of its vertices)."""
        return self.transform.name

    def set_name(self: _Stage, name: str) -> _Stage:
        """Names the stage: its vertices, snapshot state, metrics and errors carry the name."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"set_name takes a non-empty str, got {name!r}")
        self.transform.name = name
        return self

    def set_local_parallelism(self: _Stage, n: int) -> _Stage:
        """How many processors each member runs for this stage (-1: the engine's default)."""
        if not isinstance(n, int) or isinstance(n, bool) or (n < 1 and n != -1):
            raise ValueError(
                f"stage '{self.name}': local parallelism must be >= 1 or -1, got {n!r}"
            )
        self.transform.local_parallelism = n
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class SinkStage(Stage):
    """The end of a branch: a stage drained to a sink; nothing attaches to it."""


class ComputeStage(Stage, abc.ABC):
    """The operations batch and stream stages share."""

    bounded = True

    def _then(self: _S, transform: Transform) -> _S:
        self.pipeline.register(transform)
        return type(self)(self.pipeline, transform)

    def _stateless(self: _S, kind: str, fn: Callable[[Any], Any], name: str) -> _S:
        _check_callable(fn, kind, self.name)
        return self._then(StatelessTransform(self.transform, Step(kind, fn), name))

    def map(self: _S, map_fn: Callable[[Any], Any]) -> _S:
        """Emits `map_fn(item)` for each item; a None result drops the item."""
        return self._stateless("map", map_fn, "map")

    def filter(self: _S, filter_fn: Callable[[Any], Any]) -> _S:
        """Keeps the items for which `filter_fn(item)` is true."""
        return self._stateless("filter", filter_fn, "filter")

    def flat_map(self: _S, flat_map_fn: Callable[[Any], Iterable[Any] | None]) -> _S:
        """Emits every item of the iterable or traverser `flat_map_fn(item)` returns."""
        return self._stateless("flat_map", flat_map_fn, "flat-map")

    def peek(
        self: _S,
        *functions: Callable[[Any], Any],
        to_string_fn: Callable[[Any], str] | None = None,
        should_log_fn: Callable[[Any], bool] | None = None,
    ) -> _S:
        """Logs each item (`to_string_fn(item)`, else `str`) at INFO as it passes; with
        `should_log_fn`, only the items it accepts. Jet's forms: `peek()`,
        `peek(to_string_fn)`, `peek(should_log_fn, to_string_fn)`; or by keyword."""
        if len(functions) > 2 or (functions and (to_string_fn or should_log_fn)):
            raise TypeError(
                f"stage '{self.name}': peek takes peek(), peek(to_string_fn), "
                "peek(should_log_fn, to_string_fn), or the functions by keyword"
            )
        if len(functions) == 2:
            should_log_fn, to_string_fn = functions
        elif functions:
            to_string_fn = functions[0]
        to_string = str if to_string_fn is None else to_string_fn
        _check_callable(to_string, "peek", self.name)
        if should_log_fn is not None:
            _check_callable(should_log_fn, "peek", self.name)
        peek = _Peek(self.name, to_string, should_log_fn)
        return self._then(StatelessTransform(self.transform, Step("peek", peek), "peek"))

    def merge(self: _S, other: ComputeStage) -> _S:
        """Every item of this stage and of `other` (a stage of the same kind)."""
        self._check_stage_argument(other, "merge")
        if type(other) is not type(self):
            raise DagValidationError(
                f"stage '{self.name}': merge() takes a {type(self).__name__}, got "
                f"{type(other).__name__} '{other.name}'"
            )
        if other.transform.timestamped != self.transform.timestamped:
            raise DagValidationError(
                f"stage '{self.name}': merge() needs both stages timestamped or neither "
                f"('{other.name}' is {'' if other.transform.timestamped else 'not '}timestamped)"
            )
        transform = MergeTransform((self.transform, other.transform), self.transform.timestamped)
        return self._then(transform)

    def distinct(self: _S) -> _S:
        """Each distinct item once (the first seen)."""
        return self.grouping_key(whole_item).distinct()

    def rebalance(
        self: _S, key_fn: Callable[[Any], Any] | None = None, partitioner: Partitioner | None = None
    ) -> _S:
        """This stage's items spread over the processors of every member (Jet 4.2): in turns,
        or by `key_fn(item)` (with `partitioner`, as in grouping_key), for the stage after it;
        the items pass through a vertex `rebalance`."""
        key = None if key_fn is None else _grouping(key_fn, partitioner, self.name)
        if key is None and partitioner is not None:
            raise TypeError(f"stage '{self.name}': rebalance's partitioner needs a key_fn")
        return self._then(RebalanceTransform(self.transform, key))

    def map_stateful(
        self: _S, create_fn: Callable[[], Any], map_fn: Callable[[Any, Any], Any]
    ) -> _S:
        """`map_fn(state, item)` for each item (None: nothing), one `state = create_fn()` for
        the whole stage, updated in place, saved in snapshots (so picklable); runs on one
        processor (Jet 4's `mapStateful`)."""
        return self._stateful("map", "map_stateful", create_fn, map_fn)

    def filter_stateful(
        self: _S, create_fn: Callable[[], Any], filter_fn: Callable[[Any, Any], bool]
    ) -> _S:
        """The items for which `filter_fn(state, item)` is true; state as in map_stateful."""
        return self._stateful("filter", "filter_stateful", create_fn, filter_fn)

    def flat_map_stateful(
        self: _S, create_fn: Callable[[], Any], flat_map_fn: Callable[[Any, Any], Any]
    ) -> _S:
        """Every item of the iterable `flat_map_fn(state, item)` (None: nothing); state as in
        map_stateful."""
        return self._stateful("flat_map", "flat_map_stateful", create_fn, flat_map_fn)

    def _stateful(
        self: _S, kind: str, name: str, create_fn: Callable[[], Any], fn: Callable[..., Any]
    ) -> _S:
        _check_callable(create_fn, name, self.name)
        _check_callable(fn, name, self.name)
        return self._then(StatefulTransform(self.transform, kind, create_fn, fn, None))

    @abc.abstractmethod
    def grouping_key(
        self: _S, key_fn: Callable[[Any], Any], partitioner: Partitioner | None = None
    ) -> StageWithKey[_S]:
        """This stage grouped by `key_fn(item)`, for keyed operations (each kind of stage
        groups into its own kind). `partitioner` routes the keys between members (default:
        murmur3 of the key's msgpack bytes, for the standard library's immutable types): give
        one for keys of other types."""

    def map_using_context(
        self: _S, context_factory: ContextFactory, map_fn: Callable[[Any, Any], Any]
    ) -> _S:
        """`map_fn(ctx, item)` per item, `ctx` made once per processor by `context_factory`."""
        return self._using_context(context_factory, "map", map_fn, "map-using-context")

    def filter_using_context(
        self: _S, context_factory: ContextFactory, filter_fn: Callable[[Any, Any], Any]
    ) -> _S:
        """Keeps the items for which `filter_fn(ctx, item)` is true."""
        return self._using_context(context_factory, "filter", filter_fn, "filter-using-context")

    def flat_map_using_context(
        self: _S, context_factory: ContextFactory, flat_map_fn: Callable[[Any, Any], Any]
    ) -> _S:
        """Emits the items of `flat_map_fn(ctx, item)`."""
        return self._using_context(
            context_factory, "flat_map", flat_map_fn, "flat-map-using-context"
        )

    def map_using_service(
        self: _S, service_factory: ServiceFactory, map_fn: Callable[[Any, Any], Any]
    ) -> _S:
        """`map_fn(service, item)` per item (None: nothing), the service made per processor by
        `service_factory` (Jet 4's `mapUsingService`)."""
        return self._using_context(service_factory, "map", map_fn, "map-using-service")

    def filter_using_service(
        self: _S, service_factory: ServiceFactory, filter_fn: Callable[[Any, Any], Any]
    ) -> _S:
        """Keeps the items for which `filter_fn(service, item)` is true."""
        return self._using_context(service_factory, "filter", filter_fn, "filter-using-service")

    def flat_map_using_service(
        self: _S, service_factory: ServiceFactory, flat_map_fn: Callable[[Any, Any], Any]
    ) -> _S:
        """Emits the items of `flat_map_fn(service, item)`."""
        return self._using_context(
            service_factory, "flat_map", flat_map_fn, "flat-map-using-service"
        )

    def map_using_service_async(
        self: _S,
        service_factory: ServiceFactory,
        map_async_fn: Callable[[Any, Any], Any],
        max_concurrent_ops: int = 4,
        preserve_order: bool = True,
    ) -> _S:
        """The result of the awaitable or `concurrent.futures.Future` that
        `map_async_fn(service, item)` returns (None, or a None result: nothing), at most
        `max_concurrent_ops` operations in flight per processor, in input order unless
        `preserve_order=False`; exactly-once across snapshots (Jet 4's
        `mapUsingServiceAsync`)."""
        return self._async(service_factory, "map", map_async_fn, max_concurrent_ops, preserve_order)

    def flat_map_using_service_async(
        self: _S,
        service_factory: ServiceFactory,
        flat_map_async_fn: Callable[[Any, Any], Any],
        max_concurrent_ops: int = 4,
        preserve_order: bool = True,
    ) -> _S:
        """Every item of the iterable the operation `flat_map_async_fn(service, item)`
        completes with; otherwise as map_using_service_async."""
        return self._async(
            service_factory, "flat_map", flat_map_async_fn, max_concurrent_ops, preserve_order
        )

    def map_using_service_async_batched(
        self: _S,
        service_factory: ServiceFactory,
        max_batch_size: int,
        map_async_batched_fn: Callable[[Any, list[Any]], Any],
    ) -> _S:
        """`map_async_batched_fn(service, items)` on up to `max_batch_size` items at a time,
        completing with one result per item (None: nothing for it), in order (Jet 4's
        `mapUsingServiceAsyncBatched`)."""
        return self._async_batched(service_factory, max_batch_size, map_async_batched_fn)

    def _async_batched(
        self: _S,
        factory: ServiceFactory,
        max_batch_size: int,
        fn: Callable[..., Any],
        key_fn: Callable[[Any], Any] | None = None,
    ) -> _S:
        """The batched async stage: in order, Jet's MAX_CONCURRENT_ASYNC_BATCHES in flight."""
        batches = MAX_CONCURRENT_ASYNC_BATCHES
        return self._async(factory, "batched", fn, batches, True, max_batch_size, key_fn)

    def _async(
        self: _S,
        factory: ServiceFactory,
        kind: str,
        fn: Callable[..., Any],
        max_concurrent_ops: int,
        preserve_order: bool,
        max_batch_size: int = 0,
        key_fn: Callable[[Any], Any] | None = None,
    ) -> _S:
        names = {"map": "map", "flat_map": "flat-map", "batched": "map"}
        name = f"{names[kind]}-using-service-async" + ("-batched" if kind == "batched" else "")
        if not isinstance(factory, (ContextFactory, ServiceFactory)):
            raise TypeError(
                f"stage '{self.name}': {name} takes a ServiceFactory, got {type(factory).__name__}"
            )
        _check_callable(fn, name, self.name)
        return self._then(
            AsyncServiceTransform(
                self.transform,
                name,
                factory,
                kind,
                fn,
                key_fn,
                max_concurrent_ops,
                preserve_order,
                max_batch_size,
            )
        )

    def _using_context(
        self: _S,
        factory: ContextFactory | ServiceFactory,
        kind: str,
        fn: Callable[..., Any],
        name: str,
        key_fn: Callable[[Any], Any] | None = None,
    ) -> _S:
        if not isinstance(factory, (ContextFactory, ServiceFactory)):
            raise TypeError(
                f"stage '{self.name}': {name} takes a ServiceFactory "
                "(ServiceFactories.non_shared_service(fn), ...) or a ContextFactory, got "
                f"{type(factory).__name__}"
            )
        _check_callable(fn, name, self.name)
        transform = ContextTransform(self.transform, name, factory, kind, fn, key_fn)
        return self._then(transform)

    def hash_join(
        self: _S,
        stage1: BatchStage,
        join_clause1: JoinClause,
        map_to_output_fn: Callable[[Any, Any], Any],
    ) -> _S:
        """Enriches each item with the item of `stage1` matched by `join_clause1`:
        `map_to_output_fn(item, matched)` (None where nothing matched)."""
        _check_callable(map_to_output_fn, "hash_join", self.name)
        return self._hash_join([(stage1, join_clause1)], _Join1(map_to_output_fn))

    def hash_join2(
        self: _S,
        stage1: BatchStage,
        join_clause1: JoinClause,
        stage2: BatchStage,
        join_clause2: JoinClause,
        map_to_output_fn: Callable[[Any, Any, Any], Any],
    ) -> _S:
        """Enriches each item with one item of `stage1` and one of `stage2`:
        `map_to_output_fn(item, matched1, matched2)`."""
        _check_callable(map_to_output_fn, "hash_join2", self.name)
        pairs = [(stage1, join_clause1), (stage2, join_clause2)]
        return self._hash_join(pairs, _Join2(map_to_output_fn))

    def hash_join_builder(self) -> HashJoinBuilder:
        """A builder for a hash join with any number of enriching stages."""
        return HashJoinBuilder(self)

    def _hash_join(
        self: _S,
        pairs: list[tuple[BatchStage, JoinClause]],
        output_fn: Callable[[Any, list[Any]], Any],
    ) -> _S:
        for stage, clause in pairs:
            self._check_stage_argument(stage, "hash_join")
            if not isinstance(stage, BatchStage):
                raise DagValidationError(
                    f"stage '{self.name}': a hash join enriches from batch stages only; "
                    f"'{stage.name}' is a {type(stage).__name__}"
                )
            if not isinstance(clause, JoinClause):
                raise TypeError(
                    f"stage '{self.name}': a hash join takes a JoinClause "
                    f"(JoinClause.join_map_entries(key_fn)), got {type(clause).__name__}"
                )
        upstream = [self.transform, *(stage.transform for stage, _ in pairs)]
        clauses = [clause for _, clause in pairs]
        return self._then(HashJoinTransform(upstream, clauses, output_fn))

    def add_timestamps(
        self,
        timestamp_fn: Callable[[Any], int],
        allowed_lag: int,
        idle_timeout: int = DEFAULT_IDLE_TIMEOUT_MS,
    ) -> StreamStage:
        """Gives each item the event timestamp `timestamp_fn(item)` and inserts watermarks that
        let items lag up to `allowed_lag` behind the highest timestamp; windows need it. A
        processor (or, in a partitioned source such as Kafka's, a partition) without items for
        `idle_timeout` ms is marked idle and stops holding the watermark back (0: never; Jet's
        default, 60 s). Timestamps are int milliseconds (Jet's long): a float one is floored,
        anything else fails the job naming the stage and the item. On a batch stage (as in Jet
        0.7) the result is a stream stage that ends with its source, its last windows emitted
        then. A stage whose items have timestamps already is refused (as in Jet)."""
        if self.transform.timestamped:
            raise DagValidationError(
                f"stage '{self.name}' already has timestamps assigned to it, by stage "
                f"'{_timestamped_by(self.transform).name}'; a stage takes add_timestamps "
                "(with_timestamps, with_ingestion_timestamps) once: drop one of them"
            )
        _check_callable(timestamp_fn, "add_timestamps", self.name)
        for setting, value in (("allowed_lag", allowed_lag), ("idle_timeout", idle_timeout)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(
                    f"stage '{self.name}': {setting} must be an int >= 0 (milliseconds), "
                    f"got {value!r}"
                )
        millis = _Millis(timestamp_fn, self.name)
        timestamped = TimestampTransform(self.transform, millis, allowed_lag, idle_timeout)
        self.pipeline.register(timestamped)
        return StreamStage(self.pipeline, timestamped)

    def with_timestamps(
        self,
        timestamp_fn: Callable[[Any], int],
        allowed_lag: int,
        idle_timeout: int = DEFAULT_IDLE_TIMEOUT_MS,
    ) -> StreamStage:
        """Jet 4's name of `add_timestamps`: the same stage."""
        return self.add_timestamps(timestamp_fn, allowed_lag, idle_timeout)

    def with_ingestion_timestamps(self) -> StreamStage:
        """Jet 4's `withIngestionTimestamps()`: each item's timestamp is the wall clock (epoch
        ms) when the stage sees it, with no lag. Not replayable: a restored job stamps the
        items it reads again with the new time."""
        return self.add_timestamps(_ingestion_time, 0)

    def without_timestamps(self: _S) -> _S:
        """Jet 4's `withoutTimestamps()`: this stage, whose items have no event time (windows
        then need `add_timestamps`)."""
        if self.transform.timestamped:
            raise DagValidationError(
                f"stage '{self.name}': its items already have timestamps; without_timestamps() "
                "applies to a stage that has none (drop the add_timestamps instead)"
            )
        return self

    def apply(self: _S, transform_fn: Callable[[_S], _T]) -> _T:
        """`transform_fn(self)`: a reusable piece of pipeline applied in the call chain (Jet 4's
        `apply`), such as a test kit's assertion."""
        _check_callable(transform_fn, "apply", self.name)
        return transform_fn(self)

    def custom_transform(self: _S, name: str, processor_supplier: Any) -> _S:
        """A vertex running any Core API processor on this stage's items (as the user sees
        them: a timestamped stream's processor gets the items, not the events)."""
        return self._then(CustomTransform(self._payloads(), name, processor_supplier))

    def write_to(self, sink: Sink) -> SinkStage:
        """Jet 4's name of `drain_to`: the same sink stage."""
        return self.drain_to(sink)

    def drain_to(self, sink: Sink) -> SinkStage:
        """Sends every item to `sink`; a sink object drains one stage only."""
        if not isinstance(sink, Sink):
            raise TypeError(
                f"stage '{self.name}': drain_to takes a Sink (Sinks.list(name), ...), got "
                f"{type(sink).__name__}"
            )
        self.pipeline.claim_sink(sink, self.name)
        transform = SinkTransform([self._payloads()], sink)
        self.pipeline.register(transform)
        return SinkStage(self.pipeline, transform)

    def _payloads(self) -> Transform:
        """This stage's transform, followed by an unwrapping step when its items are events."""
        if not self.transform.timestamped:
            return self.transform
        unwrap = StatelessTransform(self.transform, Step("unwrap", whole_item), "unwrap")
        unwrap.local_parallelism = self.transform.local_parallelism
        self.pipeline.register(unwrap)
        return unwrap

    def _check_stage_argument(self, other: Any, operation: str) -> None:
        """Refuses an argument of `operation` that is not an ungrouped stage (whether it is of
        this pipeline, `Pipeline.register` checks)."""
        if isinstance(other, Stage):
            return
        if isinstance(other, StageWithKey):
            fix = (
                f"to group both, call grouping_key on this stage too: "
                f"stage.grouping_key(fn).{operation}(other.grouping_key(fn), ...)"
                if operation.startswith("aggregate")
                else "pass the stage itself (its items are matched by the JoinClause's keys)"
                if operation.startswith("hash_join")
                else "pass the stage itself, without grouping_key(...)"
            )
            raise DagValidationError(
                f"stage '{self.name}': {operation} takes an ungrouped stage, got stage "
                f"'{other.stage.name}' grouped by a key; {fix}"
            )
        raise DagValidationError(
            f"stage '{self.name}': {operation} takes a stage, got "
            f"{type(other).__name__} {other!r:.80}"
        )

    def _batch_only(self, operation: str) -> None:
        if not self.bounded:
            raise DagValidationError(
                f"stage '{self.name}': {operation} needs a bounded (batch) stage; on a stream "
                "stage use window(WindowDefinition...) first"
            )


class _CoAggregating:
    """`aggregate_builder()`: a co-aggregation of this stage and others."""

    @overload
    def aggregate_builder(self) -> AggregateBuilder1: ...

    @overload
    def aggregate_builder(self, aggr_op0: AggregateOperation) -> AggregateBuilder: ...

    def aggregate_builder(
        self, aggr_op0: AggregateOperation | None = None
    ) -> AggregateBuilder | AggregateBuilder1:
        """With `aggr_op0`, a builder whose inputs each bring their own operation
        (`add(stage, op)`); without, one whose inputs share one operation of as many inputs
        (`add(stage)`, then `build(aggr_op)`)."""
        if aggr_op0 is None:
            return AggregateBuilder1(self)
        return AggregateBuilder(self, aggr_op0)


class BatchStage(ComputeStage, _CoAggregating):
    """A stage of a bounded stream: `Pipeline.draw_from(bounded source)` and what follows."""

    def grouping_key(
        self, key_fn: Callable[[Any], Any], partitioner: Partitioner | None = None
    ) -> BatchStageWithKey:
        """This stage grouped by `key_fn(item)`, for keyed operations; `partitioner` as in
        ComputeStage.grouping_key."""
        return BatchStageWithKey(self, _grouping(key_fn, partitioner, self.name))

    def rolling_aggregate(
        self, aggr_op: AggregateOperation, map_to_output_fn: Callable[[Any], Any] | None = None
    ) -> Any:
        """For each item, the aggregate of every item so far (`map_to_output_fn(result)`)."""
        output = _result_only if map_to_output_fn is None else _Output(map_to_output_fn, drop=0)
        return self.grouping_key(_constant_key).rolling_aggregate(aggr_op, output)

    def aggregate(
        self, aggr_op: AggregateOperation, map_to_output_fn: Callable[[Any], Any] | None = None
    ) -> BatchStage:
        """One result over all items: `map_to_output_fn(result)` if given."""
        _check_op(aggr_op, self.name)
        return self._co_aggregate([self], _finished(aggr_op, map_to_output_fn))

    def aggregate2(self, *args: Any) -> BatchStage:
        """`aggregate2(stage1, op2[, fn(result)])` with an operation of two inputs, or
        `aggregate2(op0, stage1, op1[, fn(result0, result1)])` (default: the tuple)."""
        return self._co_aggregate_args(args, 2)

    def aggregate3(self, *args: Any) -> BatchStage:
        """`aggregate3(stage1, stage2, op3[, fn])` or `aggregate3(op0, stage1, op1, stage2,
        op2[, fn(result0, result1, result2)])`."""
        return self._co_aggregate_args(args, 3)

    def _co_aggregate_args(self, args: tuple[Any, ...], inputs: int) -> BatchStage:
        co = _co_arguments(self, args, inputs)
        output = None if co.output is None else _Output(co.output, co.spread)
        return self._co_aggregate(co.stages, _finished(co.aggr_op, output))

    def _co_aggregate(self, stages: list[Any], aggr_op: AggregateOperation) -> BatchStage:
        for stage in stages:
            stage._batch_only("aggregate")
        transform = AggregateTransform([s.transform for s in stages], aggr_op)
        self.pipeline.register(transform)
        return BatchStage(self.pipeline, transform)


class StreamStage(ComputeStage):
    """A stage of an unbounded stream: `Pipeline.draw_from(unbounded source)` and what follows."""

    bounded = False

    def grouping_key(
        self, key_fn: Callable[[Any], Any], partitioner: Partitioner | None = None
    ) -> StreamStageWithKey:
        """This stage grouped by `key_fn(item)`, for keyed operations and windows;
        `partitioner` as in ComputeStage.grouping_key."""
        return StreamStageWithKey(self, _grouping(key_fn, partitioner, self.name))

    def window(self, window_definition: WindowDefinition) -> StageWithWindow:
        """This stage cut into windows, for `aggregate`; needs `add_timestamps` first."""
        _check_window(self, window_definition)
        return StageWithWindow(self, window_definition)

    def rolling_aggregate(
        self, aggr_op: AggregateOperation, map_to_output_fn: Callable[[Any], Any] | None = None
    ) -> StreamStage:
        """For each item, the aggregate of every item so far (`map_to_output_fn(result)`)."""
        output = _result_only if map_to_output_fn is None else _Output(map_to_output_fn, drop=0)
        return self.grouping_key(_constant_key).rolling_aggregate(aggr_op, output)

    def aggregate(self, *args: Any, **kwargs: Any) -> Any:
        """Refused: an unbounded stream has no end to aggregate at; use a window."""
        raise DagValidationError(
            f"stage '{self.name}': aggregate over an unbounded stream needs a window: "
            "add_timestamps(...).window(WindowDefinition.tumbling(...)).aggregate(op), or "
            "rolling_aggregate(op) for a running result"
        )


class StageWithKey(_NamesTheKindsThatHaveIt, Generic[_S]):
    """A stage grouped by a key: keyed aggregation, distinct, rolling aggregates, lookups."""

    def __init__(self, stage: _S, key_fn: Callable[[Any], Any]) -> None:
        self.stage = stage
        self.key_fn = key_fn

    def distinct(self) -> _S:
        """The first item of each distinct key, on a batch stage (a stream's distinct items are
        per window: `window(...).distinct()`, as in Jet 0.7, so that no key is kept for ever)."""
        self.stage._batch_only("distinct")
        return self.stage._then(DistinctTransform(self.stage.transform, self.key_fn))

    def rolling_aggregate(
        self,
        aggr_op: AggregateOperation,
        map_to_output_fn: Callable[[Any, Any], Any] = entry,
    ) -> _S:
        """For each item, `map_to_output_fn(key, aggregate of the key's items so far)`."""
        _check_op(aggr_op, self.stage.name)
        transform = RollingAggregateTransform(
            self.stage.transform, self.key_fn, aggr_op, map_to_output_fn
        )
        return self.stage._then(transform)

    def map_stateful(
        self,
        create_fn: Callable[[], Any],
        map_fn: Callable[[Any, Any, Any], Any],
        ttl: int = 0,
        on_evict_fn: Callable[[Any, Any, int], Any] | None = None,
    ) -> _S:
        """`map_fn(state, key, item)` for each item (None: nothing), a `state = create_fn()`
        per key, updated in place and saved in snapshots (so picklable), restored by key after
        a rescale (Jet 4's keyed `mapStateful`). On a timestamped stream, `ttl` (ms of event
        time) evicts a key's state once the watermark passes its latest item + ttl, emitting
        `on_evict_fn(state, key, watermark)` (None: nothing); later items of the key start a
        new state, and items behind the watermark are dropped as late."""
        return self._stateful("map", "map_stateful", create_fn, map_fn, ttl, on_evict_fn)

    def filter_stateful(
        self,
        create_fn: Callable[[], Any],
        filter_fn: Callable[[Any, Any], bool],
        ttl: int = 0,
    ) -> _S:
        """The items for which `filter_fn(state, item)` is true (Jet's keyed filter gets no
        key), a state per key as in map_stateful; `ttl` evicts without output."""
        return self._stateful("filter", "filter_stateful", create_fn, filter_fn, ttl, None)

    def flat_map_stateful(
        self,
        create_fn: Callable[[], Any],
        flat_map_fn: Callable[[Any, Any, Any], Any],
        ttl: int = 0,
        on_evict_fn: Callable[[Any, Any, int], Any] | None = None,
    ) -> _S:
        """Every item of the iterable `flat_map_fn(state, key, item)` (None: nothing), and of
        `on_evict_fn(state, key, watermark)`; otherwise as map_stateful."""
        return self._stateful(
            "flat_map", "flat_map_stateful", create_fn, flat_map_fn, ttl, on_evict_fn
        )

    def _stateful(
        self,
        kind: str,
        name: str,
        create_fn: Callable[[], Any],
        fn: Callable[..., Any],
        ttl: int,
        on_evict_fn: Callable[[Any, Any, int], Any] | None,
    ) -> _S:
        stage = self.stage
        _check_callable(create_fn, name, stage.name)
        _check_callable(fn, name, stage.name)
        if on_evict_fn is not None:
            _check_callable(on_evict_fn, name, stage.name)
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
            raise ValueError(f"stage '{stage.name}': {name}'s ttl must be an int >= 0 (ms)")
        if ttl and not stage.transform.timestamped:
            raise DagValidationError(
                f"stage '{stage.name}': {name} with a ttl needs timestamps (add_timestamps "
                "before grouping_key): the ttl is measured in event time"
            )
        if on_evict_fn is not None and not ttl:
            raise ValueError(f"stage '{stage.name}': {name}'s on_evict_fn needs a ttl > 0")
        transform = StatefulTransform(
            stage.transform, kind, create_fn, fn, self.key_fn, ttl, on_evict_fn
        )
        return stage._then(transform)

    def custom_transform(self, name: str, processor_supplier: Any) -> _S:
        """A vertex of any Core API processor, its input partitioned by this stage's key, so
        the items of one key always reach the same processor."""
        stage = self.stage
        upstream = stage._payloads()
        key = self.key_fn
        return stage._then(CustomTransform(upstream, name, processor_supplier, key))

    def map_using_context(
        self, context_factory: ContextFactory, map_fn: Callable[[Any, Any, Any], Any]
    ) -> _S:
        """`map_fn(ctx, key, item)`; items of one key always meet the same context object."""
        return self.stage._using_context(
            context_factory, "map", map_fn, "map-using-context", self.key_fn
        )

    def filter_using_context(
        self, context_factory: ContextFactory, filter_fn: Callable[[Any, Any, Any], Any]
    ) -> _S:
        """Keeps the items for which `filter_fn(ctx, key, item)` is true."""
        return self.stage._using_context(
            context_factory, "filter", filter_fn, "filter-using-context", self.key_fn
        )

    def flat_map_using_context(
        self, context_factory: ContextFactory, flat_map_fn: Callable[[Any, Any, Any], Any]
    ) -> _S:
        """Emits the items of `flat_map_fn(ctx, key, item)`."""
        return self.stage._using_context(
            context_factory, "flat_map", flat_map_fn, "flat-map-using-context", self.key_fn
        )

    def map_using_service(
        self, service_factory: ServiceFactory, map_fn: Callable[[Any, Any, Any], Any]
    ) -> _S:
        """`map_fn(service, key, item)`; the items of one key always meet the same service."""
        return self.stage._using_context(
            service_factory, "map", map_fn, "map-using-service", self.key_fn
        )

    def filter_using_service(
        self, service_factory: ServiceFactory, filter_fn: Callable[[Any, Any, Any], Any]
    ) -> _S:
        """Keeps the items for which `filter_fn(service, key, item)` is true."""
        return self.stage._using_context(
            service_factory, "filter", filter_fn, "filter-using-service", self.key_fn
        )

    def flat_map_using_service(
        self, service_factory: ServiceFactory, flat_map_fn: Callable[[Any, Any, Any], Any]
    ) -> _S:
        """Emits the items of `flat_map_fn(service, key, item)`."""
        return self.stage._using_context(
            service_factory, "flat_map", flat_map_fn, "flat-map-using-service", self.key_fn
        )

    def map_using_service_async(
        self,
        service_factory: ServiceFactory,
        map_async_fn: Callable[[Any, Any, Any], Any],
        max_concurrent_ops: int = 4,
        preserve_order: bool = True,
    ) -> _S:
        """`map_async_fn(service, key, item)`'s operation per item, the input partitioned by
        the key; otherwise as the ungrouped map_using_service_async."""
        return self.stage._async(
            service_factory,
            "map",
            map_async_fn,
            max_concurrent_ops,
            preserve_order,
            key_fn=self.key_fn,
        )

    def map_using_service_async_batched(
        self,
        service_factory: ServiceFactory,
        max_batch_size: int,
        map_async_batched_fn: Callable[[Any, list[Any], list[Any]], Any],
    ) -> _S:
        """`map_async_batched_fn(service, keys, items)` on up to `max_batch_size` items at a
        time (`keys[n]` the key of `items[n]`), the input partitioned by the key, completing
        with one result per item (None: nothing for it), in order (Jet 4's keyed
        `mapUsingServiceAsyncBatched`; its form without keys is this one ignoring `keys`)."""
        return self.stage._async_batched(
            service_factory, max_batch_size, map_async_batched_fn, self.key_fn
        )


class BatchStageWithKey(StageWithKey["BatchStage"], _CoAggregating):
    """A batch stage grouped by a key."""

    stage: BatchStage

    def aggregate(
        self,
        aggr_op: AggregateOperation,
        map_to_output_fn: Callable[[Any, Any], Any] = entry,
    ) -> BatchStage:
        """One `map_to_output_fn(key, result)` per key (default: the tuple `(key, result)`)."""
        _check_op(aggr_op, self.stage.name)
        return self._group([self], aggr_op, map_to_output_fn)

    def aggregate2(self, *args: Any) -> BatchStage:
        """`aggregate2(stage1_with_key, op2[, map_to_output_fn])` or `aggregate2(op0,
        stage1_with_key, op1[, map_to_output_fn(key, result0, result1)])`."""
        return self._group_args(args, 2)

    def aggregate3(self, *args: Any) -> BatchStage:
        """`aggregate3(stage1, stage2, op3[, fn])` or `aggregate3(op0, stage1, op1, stage2,
        op2[, fn(key, r0, r1, r2)])`, the stages grouped by key."""
        return self._group_args(args, 3)

    def _group_args(self, args: tuple[Any, ...], inputs: int) -> BatchStage:
        co = _keyed_co_arguments(self, args, inputs)
        output = entry if co.output is None else _Output(co.output, co.spread)
        return self._group(co.stages, co.aggr_op, output)

    def _group(
        self,
        stages: list[Any],
        aggr_op: AggregateOperation,
        map_to_output_fn: Callable[[Any, Any], Any],
    ) -> BatchStage:
        for keyed in stages:
            keyed.stage._batch_only("aggregate")
        transform = GroupTransform(
            [k.stage.transform for k in stages],
            [k.key_fn for k in stages],
            aggr_op,
            map_to_output_fn,
        )
        self.stage.pipeline.register(transform)
        return BatchStage(self.stage.pipeline, transform)


class StreamStageWithKey(StageWithKey["StreamStage"]):
    """A stream stage grouped by a key."""

    stage: StreamStage

    def window(self, window_definition: WindowDefinition) -> StageWithKeyAndWindow:
        """This keyed stage cut into windows, for a per-key `aggregate`."""
        _check_window(self.stage, window_definition)
        return StageWithKeyAndWindow(self, window_definition)

    def aggregate(self, *args: Any, **kwargs: Any) -> Any:
        """Refused: an unbounded stream has no end to aggregate at; use a window."""
        return self.stage.aggregate()


class _Windowed(_NamesTheKindsThatHaveIt, _CoAggregating):
    """What both windowed stages share: `aggregate2`, `aggregate3` and the builder, planned
    into one WindowTransform over the stages' inputs."""

    stage: StreamStage
    window_definition: WindowDefinition
    grouped: bool

    def aggregate2(self, *args: Any) -> StreamStage:
        """Per window (and key): `aggregate2(stage1, op2[, fn(start, end[, key], result)])`
        or `aggregate2(op0, stage1, op1[, fn(start, end[, key], result0, result1)])`; the
        stages keyed like this one."""
        return self._window_args(args, 2)

    def aggregate3(self, *args: Any) -> StreamStage:
        """Per window (and key): `aggregate3(stage1, stage2, op3[, fn])` or `aggregate3(op0,
        stage1, op1, stage2, op2[, fn(start, end[, key], r0, r1, r2)])`."""
        return self._window_args(args, 3)

    def _window_args(self, args: tuple[Any, ...], inputs: int) -> StreamStage:
        if self.grouped:
            co = _keyed_co_arguments(self._first, args, inputs)
        else:
            co = _co_arguments(self.stage, args, inputs)
        drop = None if self.grouped else 2  # an ungrouped output function takes no key
        output = None if co.output is None else _Output(co.output, co.spread, drop=drop)
        return self._window(co.stages, co.aggr_op, output)

    @property
    def _first(self) -> Any:
        """The first input as `aggregateN` pairs it with the others: a stage, or keyed."""
        return self.stage

    def _window(
        self,
        inputs: list[Any],
        aggr_op: AggregateOperation,
        map_to_output_fn: Callable[[int, int, Any, Any], Any] | None,
    ) -> StreamStage:
        """The windowed aggregation of `inputs` (stages, or keyed stages when grouped):
        `map_to_output_fn(start, end, key, result)`, or a TimestampedEntry (grouped) or a
        TimestampedItem per window."""
        stages = [k.stage for k in inputs] if self.grouped else inputs
        for stage in stages:
            _check_window(stage, self.window_definition)
        _check_window_operation(aggr_op, self.window_definition, self.stage.name)
        default = timestamped_entry if self.grouped else timestamped_item
        transform = WindowTransform(
            [s.transform for s in stages],
            self.window_definition,
            [k.key_fn for k in inputs] if self.grouped else None,
            aggr_op,
            default if map_to_output_fn is None else map_to_output_fn,
        )
        self.stage.pipeline.register(transform)
        return StreamStage(self.stage.pipeline, transform)


class StageWithWindow(_Windowed):
    """A stream stage with a window: aggregates emit one `TimestampedItem` per window."""

    grouped = False

    def __init__(self, stage: StreamStage, window: WindowDefinition) -> None:
        self.stage = stage
        self.window_definition = window

    def aggregate(
        self,
        aggr_op: AggregateOperation,
        map_to_output_fn: Callable[[int, int, Any], Any] | None = None,
    ) -> StreamStage:
        """One result per window: `TimestampedItem(window end, result)`, or
        `map_to_output_fn(start, end, result)`."""
        _check_op(aggr_op, self.stage.name)
        output = None if map_to_output_fn is None else _Output(map_to_output_fn, drop=2)
        return self._window([self.stage], aggr_op, output)

    def grouping_key(
        self, key_fn: Callable[[Any], Any], partitioner: Partitioner | None = None
    ) -> StageWithKeyAndWindow:
        """This windowed stage grouped by `key_fn(item)`: the same as grouping first."""
        keyed = StreamStageWithKey(self.stage, _grouping(key_fn, partitioner, self.stage.name))
        return StageWithKeyAndWindow(keyed, self.window_definition)

    def distinct(
        self, map_to_output_fn: Callable[[int, int, Any], Any] | None = None
    ) -> StreamStage:
        """Each distinct item once per window: `TimestampedItem(window end, item)`, or
        `map_to_output_fn(start, end, item)`."""
        return self.grouping_key(whole_item).distinct(map_to_output_fn)


class StageWithKeyAndWindow(_Windowed):
    """A keyed stream stage with a window: aggregates emit one `TimestampedEntry` per window
    and key."""

    grouped = True

    def __init__(self, keyed: StreamStageWithKey, window: WindowDefinition) -> None:
        self.keyed = keyed
        self.stage = keyed.stage
        self.window_definition = window

    @property
    def _first(self) -> Any:
        return self.keyed

    def aggregate(
        self,
        aggr_op: AggregateOperation,
        map_to_output_fn: Callable[[int, int, Any, Any], Any] | None = None,
    ) -> StreamStage:
        """Per window and key, `TimestampedEntry(window end, key, result)` or
        `map_to_output_fn(start, end, key, result)`."""
        _check_op(aggr_op, self.stage.name)
        return self._window([self.keyed], aggr_op, map_to_output_fn)

    def distinct(
        self, map_to_output_fn: Callable[[int, int, Any], Any] | None = None
    ) -> StreamStage:
        """The first item of each key per window: `TimestampedItem(window end, item)`, or
        `map_to_output_fn(start, end, item)`."""
        fn = _distinct_item if map_to_output_fn is None else map_to_output_fn
        return self.aggregate(pick_any(), _Output(fn, drop=2))


class HashJoinBuilder:
    """Collects the enriching stages of a hash join (`add`), each under a tag; `build(fn)`
    emits `fn(item, items_by_tag)`."""

    def __init__(self, stage: ComputeStage) -> None:
        self._stage = stage
        self._pairs: list[tuple[BatchStage, JoinClause]] = []

    def add(self, stage: BatchStage, join_clause: JoinClause) -> Tag:
        """Adds an enriching stage; its matched item is found under the returned tag."""
        self._pairs.append((stage, join_clause))
        return Tag(len(self._pairs))

    def build(self, map_to_output_fn: Callable[[Any, ItemsByTag], Any]) -> Any:
        """The joined stage: `map_to_output_fn(item, items_by_tag)` per item."""
        if not self._pairs:
            raise DagValidationError(
                f"stage '{self._stage.name}': the hash-join builder has no stage; add() some"
            )
        _check_callable(map_to_output_fn, "hash_join_builder.build", self._stage.name)
        return self._stage._hash_join(self._pairs, _JoinByTag(map_to_output_fn))


class _CoAggregationBuilder:
    """The inputs of a co-aggregation, the first being the stage the builder came from; each
    input's items reach the operation on the inbound ordinal of its tag."""

    def __init__(self, first: Any) -> None:
        self._first = first
        self._stages: list[Any] = [first]

    def tag0(self) -> Tag:
        """The tag of the first input (the stage this builder came from)."""
        return Tag(0)

    def _add(self, stage: Any) -> Tag:
        self._stages.append(stage)
        return Tag(len(self._stages) - 1)

    def _aggregate(
        self, aggr_op: AggregateOperation, map_to_output_fn: Callable[..., Any] | None
    ) -> Any:
        """The stage aggregating every input with `aggr_op` of as many inputs, its results
        shaped as the first stage's kind of aggregate shapes them."""
        first, rest = self._first, self._stages[1:]
        if isinstance(first, BatchStageWithKey):
            to_output = entry if map_to_output_fn is None else map_to_output_fn
            return first._group([first, *rest], aggr_op, to_output)
        if isinstance(first, StageWithKeyAndWindow):
            return first._window([first.keyed, *rest], aggr_op, map_to_output_fn)
        output = None if map_to_output_fn is None else _Output(map_to_output_fn, drop=2)
        if isinstance(first, StageWithWindow):
            return first._window([first.stage, *rest], aggr_op, output)
        output = None if map_to_output_fn is None else _Output(map_to_output_fn)
        return first._co_aggregate([first, *rest], _finished(aggr_op, output))


class AggregateBuilder(_CoAggregationBuilder):
    """Collects the inputs of a co-aggregation (`add`), each with its operation and tag;
    `build(fn)` emits `fn(items_by_tag)` (ungrouped), `fn(key, items_by_tag)` (grouped),
    `fn(start, end, items_by_tag)` (windowed) or `fn(start, end, key, items_by_tag)`."""

    def __init__(self, first: Any, aggr_op0: AggregateOperation) -> None:
        super().__init__(first)
        self._operations = [aggr_op0]

    def add(self, stage: Any, aggr_op: AggregateOperation) -> Tag:
        """Adds an input (a stage, keyed if the first one is) with its operation."""
        self._operations.append(aggr_op)
        return self._add(stage)

    def build(self, map_to_output_fn: Callable[..., Any] | None = None) -> Any:
        """The aggregated stage; without `map_to_output_fn`, results are ItemsByTag (grouped:
        `(key, ItemsByTag)`, windowed: in a TimestampedEntry or TimestampedItem)."""
        for op in self._operations:
            _check_op(op, _name_of(self._first))
        return self._aggregate(co_aggregate(self._operations, items_by_tag), map_to_output_fn)


class AggregateBuilder1(_CoAggregationBuilder):
    """Collects the inputs of a co-aggregation (`add`), each under a tag; `build(aggr_op, fn)`
    aggregates them all with one operation of as many inputs (built with
    `and_accumulate(tag, fn)` or `co_aggregate_operation_builder()`), its results shaped as
    `AggregateBuilder`'s are."""

    def add(self, stage: Any) -> Tag:
        """Adds an input (a stage, keyed if the first one is); its items reach the operation's
        accumulate function of the returned tag."""
        return self._add(stage)

    def build(
        self, aggr_op: AggregateOperation, map_to_output_fn: Callable[..., Any] | None = None
    ) -> Any:
        """The aggregated stage: one result of `aggr_op` per key and/or window, or one in all."""
        name = _name_of(self._first)
        _check_op(aggr_op, name)
        inputs = len(self._stages)
        if aggr_op.accumulate_fns.per_ordinal and aggr_op.arity != inputs:
            raise ValueError(
                f"stage '{name}': the aggregate builder has {inputs} inputs, but its operation "
                f"accumulates {aggr_op.arity}: give one accumulate function per tag"
            )
        return self._aggregate(aggr_op, map_to_output_fn)


def _name_of(stage: Any) -> str:
    return getattr(stage, "name", None) or stage.stage.name


_STAGE_KINDS = (
    BatchStage,
    StreamStage,
    BatchStageWithKey,
    StreamStageWithKey,
    StageWithWindow,
    StageWithKeyAndWindow,
    SinkStage,
)
_WHERE_FROM = {
    ("BatchStage", "window"): " (add_timestamps(...) gives a StreamStage)",
    ("BatchStageWithKey", "window"): " (add_timestamps(...) before grouping_key gives one)",
    **{
        (keyed, method): f" ({method} before grouping_key(...))"
        for keyed in ("BatchStageWithKey", "StreamStageWithKey")
        for method in ("map", "filter", "flat_map", "peek")
    },
}
"""(kind, method) -> how to reach a kind that has the method, where one step does it."""


@dataclass(frozen=True)
class _Millis:
    """A stage's `timestamp_fn` giving int milliseconds: ints (numpy's too) as they are, a
    finite float floored, anything else refused naming the stage and the item."""

    timestamp_fn: Callable[[Any], Any]
    stage: str

    def __call__(self, item: Any) -> int:
        timestamp = self.timestamp_fn(item)
        if type(timestamp) is int:
            return timestamp
        if isinstance(timestamp, numbers.Integral) and not isinstance(timestamp, bool):
            return int(timestamp)
        if isinstance(timestamp, float) and math.isfinite(timestamp):
            return math.floor(timestamp)
        raise TypeError(
            f"stage '{self.stage}': timestamp_fn gave {type(timestamp).__name__} "
            f"{timestamp!r} for the item {item!r}; a timestamp is int milliseconds (a float "
            "is floored)"
        )


def _grouping(
    key_fn: Callable[[Any], Any], partitioner: Partitioner | None, stage: str
) -> Callable[[Any], Any]:
    """A stage's grouping key function, carrying its partitioner when one is given."""
    _check_callable(key_fn, "grouping_key", stage)
    if partitioner is None:
        return key_fn
    if not callable(getattr(partitioner, "partition", None)):
        raise TypeError(
            f"stage '{stage}': grouping_key's partitioner must have partition(key, "
            f"partition_count) -> int (a Partitioner), got {type(partitioner).__name__}"
        )
    return PartitionedKey(key_fn, partitioner)


def _timestamped_by(transform: Transform) -> Transform:
    """The stage that gave `transform`'s items their timestamps: an add_timestamps, a window or
    a timestamped source."""
    while not isinstance(transform, (TimestampTransform, WindowTransform)):
        timestamped = [t for t in transform.upstream if t.timestamped]
        if not timestamped:
            return transform
        transform = timestamped[0]
    return transform


def _ingestion_time(item: Any) -> int:
    """The wall clock in epoch milliseconds: `with_ingestion_timestamps`' timestamp."""
    return wall_clock_ms()


def _check_callable(fn: Any, operation: str, stage: str) -> None:
    if not callable(fn):
        raise TypeError(f"stage '{stage}': {operation} takes a function, got {type(fn).__name__}")


def _check_op(aggr_op: Any, stage: str) -> None:
    if not isinstance(aggr_op, AggregateOperation):
        raise TypeError(
            f"stage '{stage}': aggregate takes an AggregateOperation (counting(), to_list(), "
            f"...), got {type(aggr_op).__name__}"
        )


def _check_window(stage: Any, window: WindowDefinition) -> None:
    if not isinstance(window, WindowDefinition):
        raise TypeError(
            f"stage '{stage.name}': window takes a WindowDefinition (WindowDefinition."
            f"tumbling(size), ...), got {type(window).__name__}"
        )
    if not isinstance(stage, StreamStage):
        raise DagValidationError(
            f"stage '{stage.name}': window() applies to stream stages; a batch stage "
            "aggregates without one"
        )
    if not stage.transform.timestamped:
        raise DagValidationError(
            f"stage '{stage.name}': a window needs event timestamps: call "
            "add_timestamps(timestamp_fn, allowed_lag) before window(...)"
        )


def _check_window_operation(
    aggr_op: AggregateOperation, window: WindowDefinition, stage: str
) -> None:
    """A sliding or session window merges partial results: its operation must combine."""
    if aggr_op.combine_fn is None and not (
        window.kind is not WindowKind.SESSION and window.window_size == window.slide_by
    ):
        raise DagValidationError(
            f"stage '{stage}': a {window.describe()} combines partial results, so its "
            "AggregateOperation needs a combine function (and_combine(fn)); a tumbling window "
            "does without one"
        )


def _finished(
    aggr_op: AggregateOperation, map_to_output_fn: Callable[[Any], Any] | None
) -> AggregateOperation:
    if map_to_output_fn is None:
        return aggr_op
    from dataclasses import replace

    return replace(
        aggr_op,
        export_fn=_Then(aggr_op.export_fn, map_to_output_fn),
        finish_fn=_Then(aggr_op.finish_fn, map_to_output_fn),
    )


@dataclass(frozen=True)
class _CoArguments:
    """What `aggregateN(...)` was given, in either of Jet's forms: the stages (the first
    included), one operation over all inputs, the user's output function, and whether that
    function takes the results one argument per input (`spread`)."""

    stages: list[Any]
    aggr_op: AggregateOperation
    output: Callable[..., Any] | None
    spread: bool


def _parse_co_arguments(
    first: Any, args: tuple[Any, ...], inputs: int, stage: ComputeStage
) -> _CoArguments:
    """`(op0, stage1, op1[, stage2, op2][, fn])` or `(stage1[, stage2], op[, fn])`."""
    if args and isinstance(args[0], AggregateOperation):
        width = 2 * inputs - 1
        if len(args) not in (width, width + 1):
            raise TypeError(_usage(stage, inputs))
        ops, others = list(args[0:width:2]), list(args[1:width:2])
        output = args[width] if len(args) == width + 1 else None
        for op in ops:
            _check_op(op, stage.name)
        return _CoArguments([first, *others], co_aggregate(ops), output, spread=True)
    if len(args) not in (inputs, inputs + 1):
        raise TypeError(_usage(stage, inputs))
    others, aggr_op = list(args[: inputs - 1]), args[inputs - 1]
    _check_op(aggr_op, stage.name)
    output = args[inputs] if len(args) == inputs + 1 else None
    return _CoArguments([first, *others], aggr_op, output, spread=False)


def _co_arguments(first: ComputeStage, args: tuple[Any, ...], inputs: int) -> _CoArguments:
    """The arguments of an ungrouped `aggregateN`; every other input a stage."""
    co = _parse_co_arguments(first, args, inputs, first)
    for stage in co.stages[1:]:
        first._check_stage_argument(stage, f"aggregate{inputs}")
    return co


def _keyed_co_arguments(first: StageWithKey, args: tuple[Any, ...], inputs: int) -> _CoArguments:
    """The arguments of a grouped `aggregateN`; every other input a grouped stage."""
    co = _parse_co_arguments(first, args, inputs, first.stage)
    for keyed in co.stages[1:]:
        if not isinstance(keyed, StageWithKey):
            raise DagValidationError(
                f"stage '{first.stage.name}': a grouped aggregate{inputs} takes stages grouped "
                f"by a key (stage.grouping_key(fn)), got {keyed!r}"
            )
        first.stage._check_stage_argument(keyed.stage, f"aggregate{inputs}")
    return co


def _usage(stage: Any, inputs: int) -> str:
    stages = ", ".join(f"stage{i}" for i in range(1, inputs))
    pairs = ", ".join(f"stage{i}, op{i}" for i in range(1, inputs))
    return (
        f"stage '{stage.name}': aggregate{inputs} takes ({stages}, op[, map_to_output_fn]) "
        f"with an operation of {inputs} inputs, or (op0, {pairs}[, map_to_output_fn]) with "
        "one operation per input"
    )


def _constant_key(item: Any) -> int:
    return 0


def _result_only(key: Any, result: Any) -> Any:
    return result


def _distinct_item(start: int, end: int, item: Any) -> TimestampedItem:
    return TimestampedItem(end, item)


@dataclass(frozen=True)
class _Then:
    first: Callable[[Any], Any]
    then: Callable[[Any], Any]

    def __call__(self, value: Any) -> Any:
        return self.then(self.first(value))


@dataclass(frozen=True)
class _Output:
    """A user's output function, called with the leading arguments it takes (`drop`: the
    position of one it does not, such as the constant key of an ungrouped window) and the
    result, spread into one argument per input when `spread`."""

    fn: Callable[..., Any]
    spread: bool = False
    drop: int | None = None

    def __call__(self, *args: Any) -> Any:
        *head, result = args
        if self.drop is not None:
            del head[self.drop]
        return self.fn(*head, *result) if self.spread else self.fn(*head, result)


@dataclass(frozen=True)
class _Join1:
    fn: Callable[[Any, Any], Any]

    def __call__(self, item: Any, looked_up: list[Any]) -> Any:
        return self.fn(item, looked_up[0])


@dataclass(frozen=True)
class _Join2:
    fn: Callable[[Any, Any, Any], Any]

    def __call__(self, item: Any, looked_up: list[Any]) -> Any:
        return self.fn(item, looked_up[0], looked_up[1])


@dataclass(frozen=True)
class _JoinByTag:
    fn: Callable[[Any, ItemsByTag], Any]

    def __call__(self, item: Any, looked_up: list[Any]) -> Any:
        by_tag = ItemsByTag({Tag(i): value for i, value in enumerate(looked_up, start=1)})
        return self.fn(item, by_tag)


@dataclass(frozen=True)
class _Peek:
    """Logs each item as it passes (the stage's logger, INFO) and returns it."""

    stage: str
    to_string: Callable[[Any], str]
    should_log: Callable[[Any], bool] | None = None

    def __call__(self, item: Any) -> Any:
        logger = vertex_logger(self.stage)
        if logger.isEnabledFor(logging.INFO) and (self.should_log is None or self.should_log(item)):
            logger.info("Output forwarded: %s", self.to_string(item))
        return item
