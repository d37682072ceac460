"""The transforms behind pipeline stages, each adding its vertices and edges to the planned DAG
as Jet's planner does (the diagrams are Jet 0.7's): two-stage aggregation where the operation
can combine, windows accumulated by frame, hash joins over broadcast collectors.

A transform is `timestamped` when its items have event timestamps (after `add_timestamps` or
a timestamped source). Whether they travel as JetEvents is the planner's choice
(`planner.events(transform)`): the output of `add_timestamps` read by windows only stays plain
items, each window computing the timestamp itself, as a hand-built DAG would. Every transform
adapts the user's functions to the form of its inputs when it is planned.
"""

from __future__ import annotations

import abc
import concurrent.futures
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from jetspark.core.errors import DagValidationError
from jetspark.core.pipeline.connectors import Sink, Source
from jetspark.core.pipeline.fusion import Step, on_item, output_is_events
from jetspark.core.pipeline.items import TimestampedEntry, TimestampedItem
from jetspark.core.pipeline.windows import WindowDefinition, WindowKind
from jetspark.edges import Edge
from jetspark.partitioning import HASH_CODE, Partitioner
from jetspark.processors.aggregate import AggregateOperation
from jetspark.processors.aggregation import (
    accumulate_by_key_p,
    aggregate_by_key_p,
    combine_by_key_p,
)
from jetspark.processors.event_time import DEFAULT_IDLE_TIMEOUT_MS, EventTimePolicy
from jetspark.processors.events import JetEvent, event_timestamp
from jetspark.processors.functions import PerOrdinal, entry_key
from jetspark.processors.hash_join import hash_join_collect_p, hash_join_p
from jetspark.processors.insert_watermarks import insert_watermarks_p
from jetspark.processors.rolling import distinct_p, rolling_aggregate_p
from jetspark.processors.service import (
    ServiceFactory,
    flat_map_using_service_async_p,
    flat_map_using_service_p,
    map_using_service_async_batched_p,
    map_using_service_async_p,
    map_using_service_p,
)
from jetspark.processors.session_window import aggregate_to_session_window_p
from jetspark.processors.sliding_window import (
    accumulate_by_frame_p,
    aggregate_to_sliding_window_p,
    combine_to_sliding_window_p,
)
from jetspark.processors.stateful import (
    filter_stateful_p,
    flat_map_stateful_p,
    map_stateful_p,
)
from jetspark.processors.transforms import (
    ContextFactory,
    flat_map_using_context_p,
    map_p,
    map_using_context_p,
)
from jetspark.processors.windowing import TimestampKind, limiting_lag

if TYPE_CHECKING:
    from jetspark.core.dag import Vertex
    from jetspark.core.pipeline.planner import Planner


class Transform(abc.ABC):
    """One stage's computation: its inputs (`upstream`), a default name and parallelism, and
    how it is planned (`add_to_dag`)."""

    default_name = "transform"

    def __init__(self, upstream: Sequence[Transform], timestamped: bool = False) -> None:
        self.upstream = list(upstream)
        self.name = self.default_name
        self.local_parallelism = -1
        self.timestamped = timestamped

    @abc.abstractmethod
    def add_to_dag(self, planner: Planner) -> None:
        """Adds this transform's vertices and inbound edges; the planner records its output."""

    def emits_events(self, planner: Planner) -> bool:
        """Whether this transform's items leave it as JetEvents (by default: as its first
        input's; transforms whose output has no timestamps override it)."""
        return planner.events(self.upstream[0]) if self.upstream else False

    def restamps(self, planner: Planner) -> bool:
        """For a transform that computes its output from a timestamped item: whether the
        output goes on as a JetEvent (a stage reads it) or plain (only sinks read it)."""
        return planner.events(self.upstream[0]) and not all(
            is_unwrap(t) for t in planner.downstream(self)
        )

    def watermark_frame_size(self) -> int:
        """The frame size this transform emits windows at (0: none): the planner throttles
        watermarks to the greatest common divisor of all frame sizes, as Jet does."""
        return 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class SourceTransform(Transform):
    """A source vertex; a timestamped source's items are JetEvents, and a vertex inserting
    watermarks follows it on the same member."""

    def __init__(self, source: Source) -> None:
        super().__init__((), timestamped=source.timestamped)
        self.source = source
        self.name = source.name
        self.local_parallelism = source.local_parallelism

    def emits_events(self, planner: Planner) -> bool:
        return self.source.timestamped

    def event_time_in_source(self, planner: Planner) -> TimestampTransform | None:
        """The `add_timestamps` that goes into this source (Jet 4's rule: a source that keeps
        event time per partition, read by that stage alone), or None."""
        following = planner.downstream(self)
        if self.source.with_event_time is None or len(following) != 1:
            return None
        timestamps = following[0]
        return timestamps if isinstance(timestamps, TimestampTransform) else None

    def add_to_dag(self, planner: Planner) -> None:
        supplier = self.source.supplier
        timestamps = self.event_time_in_source(planner)
        if timestamps is not None:
            assert self.source.with_event_time is not None
            policy = EventTimePolicy(
                timestamps.timestamp_fn,
                limiting_lag(timestamps.lag),
                planner.emission_policy,
                timestamps.idle_timeout,
            )
            supplier = self.source.with_event_time(policy)
        name = planner.unique_name(self.name)  # a source drawn twice: two vertices
        vertex = planner.add_vertex(self, name, supplier, self.local_parallelism)
        for marker in ("replayable", "kind"):
            value = getattr(self.source.supplier, marker, None)
            if value is not None:
                setattr(vertex.meta_supplier, marker, value)
        if self.source.timestamped:
            watermarks = insert_watermarks_p(
                event_timestamp,
                limiting_lag(self.source.allowed_lag),
                planner.emission_policy,
                DEFAULT_IDLE_TIMEOUT_MS,
            )
            inserter = planner.add_vertex(
                self,
                planner.unique_name(f"{name}-watermarks"),
                watermarks,
                self.local_parallelism,
            )
            planner.dag.edge(Edge.between(vertex, inserter).isolated())


class StatelessTransform(Transform):
    """map, filter, flat_map, peek or unwrap: planned as one fused vertex with its chain."""

    def __init__(self, upstream: Transform, step: Step, name: str) -> None:
        super().__init__((upstream,), upstream.timestamped and step.kind != "unwrap")
        self.step = step
        self.default_name = name
        self.name = name

    def emits_events(self, planner: Planner) -> bool:
        return output_is_events([self.step], planner.events(self.upstream[0]))

    def add_to_dag(self, planner: Planner) -> None:
        planner.add_fused_chain(self)


class TimestampTransform(Transform):
    """`add_timestamps`: watermarks by `timestamp_fn` with `lag`. Read by windows only, the
    items stay plain; otherwise each is wrapped in a JetEvent first."""

    default_name = "add-timestamps"

    def __init__(
        self,
        upstream: Transform,
        timestamp_fn: Callable[[Any], int],
        lag: int,
        idle_timeout: int = DEFAULT_IDLE_TIMEOUT_MS,
    ) -> None:
        super().__init__((upstream,), timestamped=True)
        self.timestamp_fn = timestamp_fn
        self.lag = lag
        self.idle_timeout = idle_timeout

    def emits_events(self, planner: Planner) -> bool:
        """Plain items where every reader is a window (it reads the timestamp itself) or a
        sink's unwrapping (it wants the items): no event wrapped only to be unwrapped."""
        return planner.events(self.upstream[0]) or not all(
            isinstance(t, WindowTransform) or is_unwrap(t) for t in planner.downstream(self)
        )

    def add_to_dag(self, planner: Planner) -> None:
        name = planner.unique_name(self.name)
        parallelism = self.local_parallelism
        if parallelism == -1:  # one watermark processor per upstream processor
            parallelism = planner.vertex_of(self.upstream[0]).get_local_parallelism()
        timestamp = on_item(self.timestamp_fn, planner.events(self.upstream[0]))
        source = self.upstream[0]
        if isinstance(source, SourceTransform) and source.event_time_in_source(planner):
            self._add_after_source_with_event_time(planner, name, parallelism, timestamp)
            return
        if not planner.events(self):
            watermarks = insert_watermarks_p(
                timestamp, limiting_lag(self.lag), planner.emission_policy, self.idle_timeout
            )
            vertex = planner.add_vertex(self, name, watermarks, parallelism)
            planner.connect(self, vertex, lambda edge, _: edge.isolated())
            return
        watermarks = insert_watermarks_p(
            timestamp,
            limiting_lag(self.lag),
            planner.emission_policy,
            self.idle_timeout,
            as_events=True,
        )
        vertex = planner.add_vertex(self, name, watermarks, parallelism)
        planner.connect(self, vertex, lambda edge, _: edge.isolated())

    def _add_after_source_with_event_time(
        self, planner: Planner, name: str, parallelism: int, timestamp: Callable[[Any], int]
    ) -> None:
        """The source emits the watermarks: nothing to add for plain items, else a vertex
        wrapping each item in its event (the watermarks pass through it)."""
        if not planner.events(self):
            planner.alias(self, self.upstream[0])
            return
        vertex = planner.add_vertex(self, name, map_p(_Stamp(timestamp)), parallelism)
        planner.connect(self, vertex, lambda edge, _: edge.isolated())

    def window_timestamp_fn(self, planner: Planner) -> Callable[[Any], int]:
        """The timestamp of one of this transform's output items, for a window reading it."""
        return event_timestamp if planner.events(self) else self.timestamp_fn


@dataclass(frozen=True)
class _Stamp:
    """Wraps an item (or a JetEvent's item) with its timestamp `timestamp_fn(item)`."""

    timestamp_fn: Callable[[Any], int]

    def __call__(self, item: Any) -> JetEvent:
        payload = item.item if type(item) is JetEvent else item
        return JetEvent(self.timestamp_fn(item), payload)


class MergeTransform(Transform):
    """`merge`: every item of both inputs, through one vertex."""

    default_name = "merge"

    def add_to_dag(self, planner: Planner) -> None:
        vertex = planner.add_vertex(
            self, planner.unique_name(self.name), map_p(_identity), self.local_parallelism
        )
        planner.connect(self, vertex)


class RebalanceTransform(Transform):
    """`rebalance`: the items spread over every member's processors, round-robin or by key."""

    default_name = "rebalance"

    def __init__(self, upstream: Transform, key_fn: Callable[[Any], Any] | None) -> None:
        super().__init__((upstream,), upstream.timestamped)
        self.key_fn = key_fn

    def add_to_dag(self, planner: Planner) -> None:
        vertex = planner.add_vertex(
            self, planner.unique_name(self.name), map_p(_identity), self.local_parallelism
        )
        if self.key_fn is None:
            planner.connect(self, vertex, lambda edge, _: edge.distributed())
            return
        connect_by_key(planner, self, vertex, self.key_fn)


def _identity(item: Any) -> Any:
    return item


class DistinctTransform(Transform):
    """`distinct`: a local pre-filter, then a distributed one partitioned by the key."""

    default_name = "distinct"

    def __init__(self, upstream: Transform, key_fn: Callable[[Any], Any]) -> None:
        super().__init__((upstream,), upstream.timestamped)
        self.key_fn = key_fn

    def add_to_dag(self, planner: Planner) -> None:
        key = on_item(self.key_fn, planner.events(self.upstream[0]))
        prefix = planner.unique_name(self.name, "-step")
        first = planner.dag.new_vertex(f"{prefix}1", distinct_p(key), self.local_parallelism)
        planner.connect(self, first, lambda edge, _: edge.partitioned(key, HASH_CODE))
        second = planner.add_vertex(self, f"{prefix}2", distinct_p(key), self.local_parallelism)
        partitioner = partitioner_of([self.key_fn])
        planner.dag.edge(Edge.between(first, second).distributed().partitioned(key, partitioner))


class GroupTransform(Transform):
    """`grouping_key(...).aggregate(...)` (and co-grouping): accumulate by key locally, combine
    by key across members; one stage when the operation cannot combine."""

    def __init__(
        self,
        upstream: Sequence[Transform],
        key_fns: Sequence[Callable[[Any], Any]],
        aggr_op: AggregateOperation,
        map_to_output_fn: Callable[[Any, Any], Any],
    ) -> None:
        super().__init__(upstream)
        self.key_fns = list(key_fns)
        self.aggr_op = aggr_op
        self.map_to_output_fn = map_to_output_fn
        self.name = self.default_name = (
            "group-and-aggregate"
            if len(upstream) == 1
            else f"{len(upstream)}-way cogroup-and-aggregate"
        )

    def emits_events(self, planner: Planner) -> bool:
        return False

    def add_to_dag(self, planner: Planner) -> None:
        keys = planner.on_items(self.key_fns, self.upstream)
        op = planner.accumulating_items(self.aggr_op, self.upstream)
        partitioner = partitioner_of(self.key_fns)
        if op.combine_fn is None:
            vertex = planner.add_vertex(
                self,
                planner.unique_name(self.name),
                aggregate_by_key_p(keys, op, self.map_to_output_fn),
                self.local_parallelism,
            )
            planner.connect(
                self, vertex, lambda e, i: e.distributed().partitioned(keys[i], partitioner)
            )
            return
        prefix = planner.unique_name(self.name, "-step")
        first = planner.dag.new_vertex(
            f"{prefix}1", accumulate_by_key_p(keys, op), self.local_parallelism
        )
        planner.connect(self, first, lambda e, i: e.partitioned(keys[i], HASH_CODE))
        second = planner.add_vertex(
            self,
            f"{prefix}2",
            combine_by_key_p(op, self.map_to_output_fn),
            self.local_parallelism,
        )
        planner.dag.edge(
            Edge.between(first, second).distributed().partitioned(entry_key, partitioner)
        )


class AggregateTransform(Transform):
    """`aggregate(...)` without a key: accumulate locally, combine on one processor. As in
    Jet 0.7 (a group of one constant key), nothing is emitted when there were no items."""

    def __init__(self, upstream: Sequence[Transform], aggr_op: AggregateOperation) -> None:
        super().__init__(upstream)
        self.aggr_op = aggr_op
        self.name = self.default_name = (
            "aggregate" if len(upstream) == 1 else f"{len(upstream)}-way co-aggregate"
        )

    def emits_events(self, planner: Planner) -> bool:
        return False

    def add_to_dag(self, planner: Planner) -> None:
        keys = [_constant_key] * len(self.upstream)
        op = planner.accumulating_items(self.aggr_op, self.upstream)
        if op.combine_fn is None:
            supplier = aggregate_by_key_p(keys, op, _value_only)
            vertex = planner.add_vertex(self, planner.unique_name(self.name), supplier, 1)
            planner.connect(self, vertex, lambda edge, _: edge.distributed().all_to_one())
            return
        prefix = planner.unique_name(self.name, "-step")
        first = planner.dag.new_vertex(
            f"{prefix}1", accumulate_by_key_p(keys, op), self.local_parallelism
        )
        planner.connect(self, first)
        second = planner.add_vertex(self, f"{prefix}2", combine_by_key_p(op, _value_only), 1)
        planner.dag.edge(Edge.between(first, second).distributed().all_to_one())


def _value_only(key: Any, value: Any) -> Any:
    return value


class RollingAggregateTransform(Transform):
    """`rolling_aggregate`: keyed state updated and emitted per item."""

    default_name = "rolling-aggregate"

    def __init__(
        self,
        upstream: Transform,
        key_fn: Callable[[Any], Any],
        aggr_op: AggregateOperation,
        map_to_output_fn: Callable[[Any, Any], Any],
    ) -> None:
        super().__init__((upstream,), upstream.timestamped)
        self.key_fn = key_fn
        self.aggr_op = aggr_op
        self.map_to_output_fn = map_to_output_fn

    def emits_events(self, planner: Planner) -> bool:
        return self.restamps(planner)

    def add_to_dag(self, planner: Planner) -> None:
        key = on_item(self.key_fn, planner.events(self.upstream[0]))
        op = planner.accumulating_items(self.aggr_op, self.upstream)
        output = _RollingOutput(self.map_to_output_fn, planner.events(self))
        vertex = planner.add_vertex(
            self,
            planner.unique_name(self.name),
            rolling_aggregate_p(key, op, output),
            self.local_parallelism,
        )
        connect_by_key(planner, self, vertex, self.key_fn)


class StatefulTransform(Transform):
    """`map_stateful`, `filter_stateful`, `flat_map_stateful` (Jet 4): a state per key on the
    processor that owns the key; ungrouped, one state for the whole stage, on one processor
    (a constant key, as Jet plans it)."""

    def __init__(
        self,
        upstream: Transform,
        kind: str,
        create_fn: Callable[[], Any],
        fn: Callable[..., Any],
        key_fn: Callable[[Any], Any] | None,
        ttl: int = 0,
        on_evict_fn: Callable[[Any, Any, int], Any] | None = None,
    ) -> None:
        super().__init__((upstream,), upstream.timestamped)
        self.kind = kind
        self.create_fn = create_fn
        self.fn = fn
        self.key_fn = key_fn
        self.ttl = ttl
        self.on_evict_fn = on_evict_fn
        scope = "global" if key_fn is None else "keyed"
        self.name = self.default_name = f"{kind.replace('_', '-')}-stateful-{scope}"

    def add_to_dag(self, planner: Planner) -> None:
        events = planner.events(self.upstream[0])
        grouped = self.key_fn is not None
        key_fn = self.key_fn if self.key_fn is not None else _constant_key
        key = on_item(key_fn, events)
        fn = _StatefulFn(self.kind, self.fn, events, grouped and self.kind != "filter")
        evict = None if self.on_evict_fn is None else _EvictFn(self.kind, self.on_evict_fn, events)
        make = {"map": map_stateful_p, "flat_map": flat_map_stateful_p}.get(self.kind)
        options: dict[str, Any] = {"key_fn": key, "ttl": self.ttl}
        if self.ttl:
            options["timestamp_fn"] = event_timestamp
        if make is None:
            supplier = filter_stateful_p(self.create_fn, fn, **options)
        else:
            supplier = make(self.create_fn, fn, on_evict_fn=evict, **options)
        parallelism = self.local_parallelism if grouped else 1
        vertex = planner.add_vertex(self, planner.unique_name(self.name), supplier, parallelism)
        connect_by_key(planner, self, vertex, key_fn)


@dataclass(frozen=True)
class _StatefulFn:
    """The user's stateful function on an item as they see it: `fn(state, key, item)` where
    `with_key`, else `fn(state, item)`; its results keep the event's timestamp."""

    kind: str
    fn: Callable[..., Any]
    events: bool
    with_key: bool

    def __call__(self, state: Any, key: Any, item: Any) -> Any:
        payload = item.item if self.events else item
        result = self.fn(state, key, payload) if self.with_key else self.fn(state, payload)
        if not self.events or self.kind == "filter":
            return result
        return _stateful_events(result, item.timestamp, self.kind == "flat_map")


@dataclass(frozen=True)
class _EvictFn:
    """The user's `on_evict_fn(state, key, watermark)`, its results events at the watermark."""

    kind: str
    fn: Callable[[Any, Any, int], Any]
    events: bool

    def __call__(self, state: Any, key: Any, watermark: int) -> Any:
        result = self.fn(state, key, watermark)
        if not self.events:
            return result
        return _stateful_events(result, watermark, self.kind == "flat_map")


def _stateful_events(result: Any, timestamp: int, flat: bool) -> Any:
    """A stateful function's result as events at `timestamp`: one, or each of a flat-map's."""
    if result is None:
        return None
    if flat:
        return [JetEvent(timestamp, one) for one in result]
    return JetEvent(timestamp, result)


@dataclass(frozen=True)
class _RollingOutput:
    """`map_to_output_fn(key, result)`, re-stamped with the event's timestamp when `restamp`."""

    map_to_output_fn: Callable[[Any, Any], Any]
    restamp: bool

    def __call__(self, item: Any, key: Any, result: Any) -> Any:
        output = self.map_to_output_fn(key, result)
        if not self.restamp or output is None:
            return output
        return JetEvent(item.timestamp, output)


class WindowTransform(Transform):
    """A windowed aggregation, grouped (`key_fns`) or not: sliding and tumbling windows by
    frame in two stages (one when the operation cannot combine), session windows in one."""

    def __init__(
        self,
        upstream: Sequence[Transform],
        window: WindowDefinition,
        key_fns: Sequence[Callable[[Any], Any]] | None,
        aggr_op: AggregateOperation,
        map_to_output_fn: Callable[[int, int, Any, Any], Any],
    ) -> None:
        super().__init__(upstream, timestamped=True)
        self.window = window
        self.grouped = key_fns is not None
        self.key_fns: list[Callable[[Any], Any]] = (
            list(key_fns) if key_fns is not None else [_constant_key] * len(upstream)
        )
        self.aggr_op = aggr_op
        self.map_to_output_fn = map_to_output_fn
        self.name = self.default_name = window.describe()

    def watermark_frame_size(self) -> int:
        return self.window.frame_size

    def emits_events(self, planner: Planner) -> bool:
        """Results stay plain for sinks; a stage after the window gets them as JetEvents, so
        it can window them again (Jet's timestamped results)."""
        return not all(is_unwrap(t) for t in planner.downstream(self))

    def add_to_dag(self, planner: Planner) -> None:
        keys = planner.on_items(self.key_fns, self.upstream)
        op = planner.accumulating_items(self.aggr_op, self.upstream)
        timestamps = [_timestamp_fn(t, planner) for t in self.upstream]
        output = self.map_to_output_fn
        if planner.events(self):
            output = _AtWindowEnd(output)
        window = self.window
        parallelism = self.local_parallelism if self.grouped else 1
        partitioner = partitioner_of(self.key_fns)

        def spread(edge: Edge, ordinal: int) -> Any:
            if self.grouped:
                return edge.distributed().partitioned(keys[ordinal], partitioner)
            return edge.distributed().all_to_one()

        early = window.early_results_period
        if window.kind is WindowKind.SESSION:
            supplier = aggregate_to_session_window_p(
                window.session_timeout, timestamps, keys, op, output, early_results_period=early
            )
            vertex = planner.add_vertex(self, planner.unique_name(self.name), supplier, parallelism)
            planner.connect(self, vertex, spread)
            return
        policy = window.policy()
        if op.combine_fn is None or early:  # early results need every frame in one place (Jet 4)
            supplier = aggregate_to_sliding_window_p(
                keys,
                timestamps,
                TimestampKind.EVENT,
                policy,
                op,
                output,
                early_results_period=early,
            )
            vertex = planner.add_vertex(self, planner.unique_name(self.name), supplier, parallelism)
            planner.connect(self, vertex, spread)
            return
        prefix = planner.unique_name(self.name, "-step")
        first = planner.dag.new_vertex(
            f"{prefix}1",
            accumulate_by_frame_p(keys, timestamps, TimestampKind.EVENT, policy, op),
            self.local_parallelism,
        )
        second = planner.add_vertex(
            self,
            f"{prefix}2",
            combine_to_sliding_window_p(policy, op, output),
            parallelism,
        )
        between = Edge.between(first, second).distributed()
        if self.grouped:
            planner.connect(self, first, lambda e, i: e.partitioned(keys[i], HASH_CODE))
            planner.dag.edge(between.partitioned(entry_key, partitioner))
        else:
            planner.connect(self, first)
            planner.dag.edge(between.all_to_one())


@dataclass(frozen=True)
class _AtWindowEnd:
    """A window's output as a JetEvent at the window's last instant, its end - 1, as Jet 0.7
    stamps it: at the end itself, the watermark that closed the window would make it late."""

    output_fn: Callable[[int, int, Any, Any], Any]

    def __call__(self, start: int, end: int, key: Any, value: Any) -> JetEvent | None:
        output = self.output_fn(start, end, key, value)
        return None if output is None else JetEvent(end - 1, output)


def is_unwrap(transform: Transform) -> bool:
    """True for the step that hands a timestamped stage's items to a sink or processor."""
    return isinstance(transform, StatelessTransform) and transform.step.kind == "unwrap"


def _timestamp_fn(upstream: Transform, planner: Planner) -> Callable[[Any], int]:
    """How a window finds the timestamp of an item of `upstream`."""
    if isinstance(upstream, TimestampTransform):
        return upstream.window_timestamp_fn(planner)
    return event_timestamp


def _constant_key(item: Any) -> int:
    return 0


@dataclass(frozen=True)
class PartitionedKey:
    """A grouping key function with the partitioner its distributed edges route by
    (`grouping_key(key_fn, partitioner)`)."""

    key_fn: Callable[[Any], Any]
    partitioner: Partitioner

    def __call__(self, item: Any) -> Any:
        return self.key_fn(item)


def partitioner_of(key_fns: Sequence[Callable[[Any], Any]]) -> Partitioner | None:
    """The partitioner the stages grouped by `key_fns` chose (None: the default one); stages
    grouped together must choose the same."""
    chosen = [fn.partitioner if isinstance(fn, PartitionedKey) else None for fn in key_fns]
    if any(p != chosen[0] for p in chosen):
        raise DagValidationError(
            "stages grouped together must route their keys alike: give each grouping_key the "
            f"same partitioner (or none), got {chosen!r:.200}"
        )
    return chosen[0]


def connect_by_key(
    planner: Planner, transform: Transform, vertex: Vertex, key_fn: Callable[[Any], Any]
) -> None:
    """Distributed edges from `transform`'s upstream into `vertex`, partitioned by `key_fn` of
    each item (of its payload, where the items are events) with the partitioner of the
    stage's `grouping_key`: a key's items all reach one processor across the cluster."""
    key = on_item(key_fn, planner.events(transform.upstream[0]))
    partitioner = partitioner_of([key_fn])
    planner.connect(
        transform, vertex, lambda edge, _: edge.distributed().partitioned(key, partitioner)
    )


def timestamped_entry(start: int, end: int, key: Any, value: Any) -> TimestampedEntry:
    """A grouped window's result as Jet gives it: the window's end, the key, the value."""
    return TimestampedEntry(end, key, value)


def timestamped_item(start: int, end: int, key: Any, value: Any) -> TimestampedItem:
    """An ungrouped window's result as Jet gives it: the window's end and the value."""
    return TimestampedItem(end, value)


class HashJoinTransform(Transform):
    """`hash_join` and its builder: every enriching input into a collector on each member over a
    distributed broadcast edge, the collectors' tables into the joiner at a higher priority."""

    def __init__(
        self,
        upstream: Sequence[Transform],
        clauses: Sequence[Any],
        output_fn: Callable[[Any, list[Any]], Any],
    ) -> None:
        super().__init__(upstream, upstream[0].timestamped)
        self.clauses = list(clauses)
        self.output_fn = output_fn
        self.name = self.default_name = f"{len(upstream)}-way hash-join"

    def emits_events(self, planner: Planner) -> bool:
        return self.restamps(planner)

    def add_to_dag(self, planner: Planner) -> None:
        events = planner.events(self.upstream[0])
        key_fns = [on_item(clause.left_key_fn, events) for clause in self.clauses]
        output = _JoinOutput(self.output_fn, events, planner.events(self))
        prefix = planner.unique_name(self.name)
        joiner = planner.add_vertex(
            self,
            f"{prefix}-joiner",
            hash_join_p(key_fns, output),
            self.local_parallelism,
        )
        planner.dag.edge(planner.edge_from(self.upstream[0]).to(joiner, 0))
        for ordinal, (enriching, clause) in enumerate(
            zip(self.upstream[1:], self.clauses, strict=True), start=1
        ):
            right_key, project = planner.on_items(
                [clause.right_key_fn, clause.right_project_fn], [enriching, enriching]
            )
            collector = planner.dag.new_vertex(
                f"{prefix}-collector{ordinal}", hash_join_collect_p(right_key, project), 1
            )
            planner.dag.edge(
                planner.edge_from(enriching).to(collector, 0).distributed().broadcast()
            )
            planner.dag.edge(Edge.from_(collector).to(joiner, ordinal).broadcast().priority(-1))


@dataclass(frozen=True)
class _JoinOutput:
    """`output_fn(item, looked_up)` on the payload of JetEvents (`events`), the output
    re-stamped with the event's timestamp when `restamp`."""

    output_fn: Callable[[Any, list[Any]], Any]
    events: bool
    restamp: bool

    def __call__(self, item: Any, looked_up: list[Any]) -> Any:
        if not self.events:
            return self.output_fn(item, looked_up)
        output = self.output_fn(item.item, looked_up)
        if output is None or not self.restamp:
            return output
        return JetEvent(item.timestamp, output)


class ContextTransform(Transform):
    """`map_using_context` and its kin: `fn(ctx, item)` (or `fn(ctx, key, item)` keyed, the
    input then partitioned by the key across members), `ctx` made per processor."""

    def __init__(
        self,
        upstream: Transform,
        name: str,
        factory: ContextFactory | ServiceFactory,
        kind: str,
        fn: Callable[..., Any],
        key_fn: Callable[[Any], Any] | None,
    ) -> None:
        super().__init__((upstream,), upstream.timestamped)
        self.name = self.default_name = name
        self.factory = factory
        self.kind = kind
        self.fn = fn
        self.key_fn = key_fn

    def emits_events(self, planner: Planner) -> bool:
        return self.restamps(planner)

    def add_to_dag(self, planner: Planner) -> None:
        events = planner.events(self.upstream[0])
        bound = _ContextFn(self.kind, self.fn, events, planner.events(self), self.key_fn)
        flat = self.kind == "flat_map"
        supplier: Any
        if isinstance(self.factory, ServiceFactory):
            make = flat_map_using_service_p if flat else map_using_service_p
            supplier = make(self.factory, bound)
        elif flat:
            supplier = flat_map_using_context_p(self.factory, bound)
        else:
            supplier = map_using_context_p(self.factory, bound)
        vertex = planner.add_vertex(
            self, planner.unique_name(self.name), supplier, self.local_parallelism
        )
        if self.key_fn is None:
            planner.connect(self, vertex)
        else:
            connect_by_key(planner, self, vertex, self.key_fn)


@dataclass(frozen=True)
class _ContextFn:
    """A user's `fn(ctx, item)` (or `fn(ctx, key, item)` when keyed) as the processor's
    `fn(ctx, item)`, on the payloads of JetEvents (`events`), results re-stamped with the
    event's timestamp when `restamp`; filter as a map to the item."""

    kind: str
    fn: Callable[..., Any]
    events: bool
    restamp: bool
    key_fn: Callable[[Any], Any] | None

    def __call__(self, ctx: Any, item: Any) -> Any:
        payload = item.item if self.events else item
        args = (ctx, payload) if self.key_fn is None else (ctx, self.key_fn(payload), payload)
        result = self.fn(*args)
        if self.kind == "filter":
            return (item if self.restamp else payload) if result else None
        if not self.restamp or result is None:
            return result
        if self.kind == "flat_map":
            return [JetEvent(item.timestamp, r) for r in result if r is not None]
        return JetEvent(item.timestamp, result)


class AsyncServiceTransform(Transform):
    """`map_using_service_async`, its flat-map and batched forms (Jet 4): the operations
    `fn(service, item)` starts (`fn(service, key, item)` keyed, the input then partitioned by
    the key), at most `max_concurrent_ops` in flight per processor."""

    def __init__(
        self,
        upstream: Transform,
        name: str,
        factory: ContextFactory | ServiceFactory,
        kind: str,
        fn: Callable[..., Any],
        key_fn: Callable[[Any], Any] | None,
        max_concurrent_ops: int,
        preserve_order: bool = True,
        max_batch_size: int = 0,
    ) -> None:
        super().__init__((upstream,), upstream.timestamped)
        self.name = self.default_name = name
        self.factory = factory
        self.kind = kind
        self.fn = fn
        self.key_fn = key_fn
        self.max_concurrent_ops = max_concurrent_ops
        self.preserve_order = preserve_order
        self.max_batch_size = max_batch_size

    def emits_events(self, planner: Planner) -> bool:
        return planner.events(self.upstream[0])

    def add_to_dag(self, planner: Planner) -> None:
        events = planner.events(self.upstream[0])
        key = None if self.key_fn is None else on_item(self.key_fn, events)
        if self.kind == "batched":
            fn: Any = _AsyncBatchFn(self.fn, events, self.key_fn)
            supplier = map_using_service_async_batched_p(
                self.factory, self.max_batch_size, fn, self.max_concurrent_ops
            )
        else:
            fn = _AsyncFn(self.fn, events, self.kind == "flat_map", self.key_fn)
            make = (
                flat_map_using_service_async_p
                if self.kind == "flat_map"
                else map_using_service_async_p
            )
            supplier = make(self.factory, fn, self.max_concurrent_ops, self.preserve_order, key)
        vertex = planner.add_vertex(
            self, planner.unique_name(self.name), supplier, self.local_parallelism
        )
        if self.key_fn is None:
            planner.connect(self, vertex)
        else:
            connect_by_key(planner, self, vertex, self.key_fn)


@dataclass(frozen=True)
class _AsyncFn:
    """The user's async `fn(service, item)` (`fn(service, key, item)` when keyed) on an item's
    payload; where items are events, the pending result re-stamped with the event's time."""

    fn: Callable[..., Any]
    events: bool
    flat: bool
    key_fn: Callable[[Any], Any] | None

    def __call__(self, service: Any, item: Any) -> Any:
        payload = item.item if self.events else item
        if self.key_fn is None:
            pending = self.fn(service, payload)
        else:
            pending = self.fn(service, self.key_fn(payload), payload)
        if not self.events or pending is None:
            return pending
        return _when_done(pending, _Restamp((item.timestamp,), self.flat, single=True))


@dataclass(frozen=True)
class _AsyncBatchFn:
    """The user's `fn(service, items)` (`fn(service, keys, items)` keyed) on the payloads;
    results re-stamped by position."""

    fn: Callable[..., Any]
    events: bool
    key_fn: Callable[[Any], Any] | None

    def __call__(self, service: Any, items: list[Any]) -> Any:
        payloads = [event.item for event in items] if self.events else items
        if self.key_fn is None:
            pending = self.fn(service, payloads)
        else:
            pending = self.fn(service, [self.key_fn(item) for item in payloads], payloads)
        if not self.events:
            return pending
        if pending is None:
            return None
        stamps = tuple(event.timestamp for event in items)
        return _when_done(pending, _Restamp(stamps, flat=False, single=False))


@dataclass(frozen=True)
class _Restamp:
    """Results as events at their items' timestamps (one result, or one per item)."""

    timestamps: tuple[int, ...]
    flat: bool
    single: bool

    def __call__(self, result: Any) -> Any:
        if result is None:
            return None
        if not self.single:
            return [
                None if r is None else JetEvent(t, r)
                for t, r in zip(self.timestamps, result, strict=True)
            ]
        timestamp = self.timestamps[0]
        if self.flat:
            return [JetEvent(timestamp, r) for r in result if r is not None]
        return JetEvent(timestamp, result)


def _when_done(pending: Any, then: Callable[[Any], Any]) -> Any:
    """`then(result)` of a pending operation: a Future chained to one, an awaitable awaited."""
    if isinstance(pending, concurrent.futures.Future):
        chained: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def done(future: concurrent.futures.Future[Any]) -> None:
            if future.cancelled():
                chained.cancel()
            elif future.exception() is not None:
                chained.set_exception(future.exception())
            else:
                try:
                    chained.set_result(then(future.result()))
                except Exception as error:
                    chained.set_exception(error)

        pending.add_done_callback(done)
        return chained
    return _awaited(pending, then)


async def _awaited(awaitable: Any, then: Callable[[Any], Any]) -> Any:
    return then(await awaitable)


class CustomTransform(Transform):
    """`custom_transform(name, supplier)`: a vertex of any Core API processor, fed the items
    as the user sees them (the stage unwraps events before it); on a keyed stage its input is
    partitioned by the key across members (`partition_key`)."""

    def __init__(
        self,
        upstream: Transform,
        name: str,
        supplier: Any,
        partition_key: Callable[[Any], Any] | None = None,
    ) -> None:
        super().__init__((upstream,))
        self.name = self.default_name = name
        self.supplier = supplier
        self.partition_key = partition_key

    def emits_events(self, planner: Planner) -> bool:
        return False

    def add_to_dag(self, planner: Planner) -> None:
        vertex = planner.add_vertex(
            self, planner.unique_name(self.name), self.supplier, self.local_parallelism
        )
        key = self.partition_key
        if key is None:
            planner.connect(self, vertex)
        else:
            planner.connect(self, vertex, lambda edge, _: edge.distributed().partitioned(key))


class SinkTransform(Transform):
    """`drain_to(sink)`: the sink's vertex, fed the items as the user sees them."""

    def __init__(self, upstream: Sequence[Transform], sink: Sink) -> None:
        super().__init__(upstream)
        self.sink = sink
        self.name = self.default_name = sink.name
        self.local_parallelism = sink.local_parallelism

    def emits_events(self, planner: Planner) -> bool:
        return False

    def add_to_dag(self, planner: Planner) -> None:
        vertex = planner.add_vertex(
            self, planner.unique_name(self.name), self.sink.supplier, self.local_parallelism
        )
        planner.connect(self, vertex)


def accumulating_payloads(
    aggr_op: AggregateOperation, events: Sequence[bool]
) -> AggregateOperation:
    """`aggr_op` accumulating each input's payloads: a JetEvent's item where `events[ordinal]`."""
    if not any(events):
        return aggr_op
    fns = [
        _AccumulatePayload(aggr_op.accumulate_fn(ordinal))
        if wrapped
        else aggr_op.accumulate_fn(ordinal)
        for ordinal, wrapped in enumerate(events)
    ]
    per_ordinal = PerOrdinal(fns[0] if len(fns) == 1 else fns, "accumulate fn")
    return replace(aggr_op, accumulate_fns=per_ordinal)


@dataclass(frozen=True)
class _AccumulatePayload:
    accumulate_fn: Callable[[Any, Any], Any]

    def __call__(self, acc: Any, event: JetEvent) -> Any:
        return self.accumulate_fn(acc, event.item)
