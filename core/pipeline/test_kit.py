"""Jet 4's test kit for pipelines: `TestSources` feed a pipeline, `Assertions` check what a
stage emits, in line: `stage.apply(Assertions.assert_ordered([...]))`.

An assertion is a sink on a branch of the stage. Whatever the member count, one processor of
the job collects every item: the items reach its member over an edge partitioned by one
constant key (the `<assertion>-route` vertex), and there a sink of local parallelism 1 keeps
them (Jet's total parallelism one). It checks them when its input ends, or, for
`assert_collected_eventually`, after every item until the check holds, and then ends the job
with AssertionCompletedError, which every engine reports as the job's completion.
"""

from __future__ import annotations

import operator
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.errors import AssertionCompletedError
from jetspark.core.outbox import Outbox
from jetspark.core.pipeline.connectors import BatchSource, Sink, SourceBuilder, StreamSource
from jetspark.core.pipeline.stages import ComputeStage
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.partitioning import member_of_partition, partition_id
from jetspark.processors.functions import whole_item
from jetspark.processors.source_builder import SourceBuffer
from jetspark.processors.transforms import map_p

_Stage = TypeVar("_Stage", bound=ComputeStage)

_ROUTE_KEY = "jetspark-assertion"
"""The key of every item on its way to an assertion sink: its partition's member collects."""
_STATE_KEY = broadcast_key("assertion")
"""Saves the collecting processor's state; broadcast, so a restored job's collecting processor
takes it, wherever the routing puts it."""
_SHOWN_ITEMS = 100
"""How many collected items a failure's message shows."""
_MAX_BATCH = 1024
"""The most items `item_stream` adds to the source buffer at once (Jet's MAX_BATCH_SIZE)."""


@dataclass(frozen=True, slots=True)
class SimpleEvent:
    """An item of `TestSources.item_stream` by default: its event timestamp (epoch ms) and
    its sequence number from 0 (Jet's `SimpleEvent`)."""

    timestamp: int
    sequence: int


class TestSources:
    """Sources for testing pipelines (Jet's `TestSources`)."""

    __test__ = False  # not a pytest test class, whatever its name

    @staticmethod
    def items(*items: Any) -> BatchSource:
        """A batch source emitting `items` in this order, from one processor of the job."""
        if any(item is None for item in items):
            raise ValueError("TestSources.items: a source emits no None items")
        source = (
            SourceBuilder.batch("items", lambda context: _ItemsReader(items))
            .fill_buffer_fn(_ItemsReader.fill)
            .create_snapshot_fn(operator.attrgetter("position"))
            .restore_snapshot_fn(_ItemsReader.restore)
            .build()
        )
        return cast(BatchSource, source)

    @staticmethod
    def item_stream(
        items_per_second: float,
        generator_fn: Callable[[int, int], Any] | None = None,
    ) -> StreamSource:
        """A stream source emitting `generator_fn(timestamp, sequence)` `items_per_second`
        times a second (None: a SimpleEvent), from one processor of the job. Each item comes
        timestamped with the wall clock time it fell due, in epoch ms, never in the future
        (Jet's native timestamps), so `window(...)` follows the source directly. Its position
        goes into snapshots: a restored job, or the next micro-batch, goes on from there,
        first emitting the items that fell due meanwhile."""
        if isinstance(items_per_second, bool) or not (
            isinstance(items_per_second, int | float) and items_per_second > 0
        ):
            raise ValueError(
                f"TestSources.item_stream: items_per_second must be > 0, got {items_per_second!r}"
            )
        if generator_fn is None:
            generator_fn = SimpleEvent
        elif not callable(generator_fn):
            raise TypeError(
                "TestSources.item_stream: generator_fn takes a function (timestamp, sequence), "
                f"got {type(generator_fn).__name__}"
            )
        period_ns = max(1, round(1e9 / items_per_second))
        source = (
            SourceBuilder.timestamped_stream(
                "itemStream", lambda context: _ItemStream(period_ns, generator_fn)
            )
            .fill_buffer_fn(_ItemStream.fill)
            .create_snapshot_fn(_ItemStream.snapshot)
            .restore_snapshot_fn(_ItemStream.restore)
            .build()
        )
        return cast(StreamSource, source)


@dataclass
class _ItemsReader:
    """The state of `TestSources.items`: how many of the items went into the source buffer."""

    items: tuple[Any, ...]
    position: int = 0

    def fill(self, buffer: SourceBuffer) -> None:
        for item in self.items[self.position :]:
            buffer.add(item)
        self.position = len(self.items)
        buffer.close()

    def restore(self, saved: list[int]) -> None:
        (self.position,) = saved


@dataclass
class _ItemStream:
    """The state of `TestSources.item_stream`: the next item's sequence number and when it is
    due, on the wall clock (ns), so that a restored job, or the next micro-batch, emits the
    items that fell due meanwhile."""

    period_ns: int
    generator_fn: Callable[[int, int], Any]
    sequence: int = 0
    due_ns: int | None = None
    """None until the first fill."""

    def fill(self, buffer: SourceBuffer) -> None:
        """Adds the items due by now, each stamped with the time it fell due (epoch ms)."""
        now = time.time_ns()
        due = now if self.due_ns is None else self.due_ns
        for _ in range(_MAX_BATCH):
            if due > now:
                break
            timestamp = due // 1_000_000
            buffer.add(self.generator_fn(timestamp, self.sequence), timestamp)
            self.sequence += 1
            due += self.period_ns
        self.due_ns = due

    def snapshot(self) -> tuple[int, int | None]:
        return self.sequence, self.due_ns

    def restore(self, saved: list[tuple[int, int | None]]) -> None:
        ((self.sequence, self.due_ns),) = saved


class Assertions:
    """Assertions on what a stage emits (Jet's `Assertions`). Each returns a function for
    `stage.apply(fn)`, which drains the stage into an assertion sink and returns the stage
    itself, so its items go on to what follows. A failed assertion fails the job: `join()`
    raises a JobFailedError reporting an AssertionError (its `cause_type`) whose message names
    the asserted stage and shows what was expected and the items collected."""

    @staticmethod
    def assert_ordered(
        expected: Iterable[Any], message: str | None = None
    ) -> Callable[[_Stage], _Stage]:
        """When its input ends, the stage has emitted exactly `expected`, in this order (items
        of several upstream processors interleave in no set order: for a non-distributed
        source, such as `TestSources.items`). `message` leads the failure's message."""
        return _asserting("assertOrdered", _Ordered(list(expected)), message)

    @staticmethod
    def assert_any_order(
        expected: Iterable[Any], message: str | None = None
    ) -> Callable[[_Stage], _Stage]:
        """When its input ends, the stage has emitted exactly `expected`, each item as many
        times, in any order."""
        return _asserting("assertAnyOrder", _AnyOrder(list(expected)), message)

    @staticmethod
    def assert_contains(
        expected: Iterable[Any], message: str | None = None
    ) -> Callable[[_Stage], _Stage]:
        """When its input ends, the stage has emitted every item of `expected`, among others."""
        return _asserting("assertContains", _Contains(list(expected)), message)

    @staticmethod
    def assert_collected(assert_fn: Callable[[list[Any]], object]) -> Callable[[_Stage], _Stage]:
        """When its input ends, `assert_fn(items)` gets the list of every item the stage
        emitted (empty if none) and raises AssertionError when they are wrong."""
        return _asserting("assertCollected", _checked(assert_fn, "assert_collected"))

    @staticmethod
    def assert_collected_eventually(
        timeout_seconds: float, assert_fn: Callable[[list[Any]], object]
    ) -> Callable[[_Stage], _Stage]:
        """For a stream: `assert_fn(items)` gets the list of the items collected so far after
        each item, until it raises no AssertionError; the job then ends, as COMPLETED
        (`join()` returns), on every engine. When it still fails `timeout_seconds` after the
        job started, the job fails with its AssertionError (any other exception fails it at
        once). Other assertions in the job may not have run their checks by then (as in Jet).
        """
        if isinstance(timeout_seconds, bool) or not (
            isinstance(timeout_seconds, int | float) and timeout_seconds > 0
        ):
            raise ValueError(
                f"assert_collected_eventually: timeout_seconds must be > 0, got {timeout_seconds!r}"
            )
        check = _checked(assert_fn, "assert_collected_eventually")
        return _asserting("assertCollectedEventually", check, timeout=timeout_seconds)


def _asserting(
    kind: str,
    check: Callable[[list[Any]], object],
    message: str | None = None,
    timeout: float | None = None,
) -> Callable[[_Stage], _Stage]:
    """The function for `stage.apply` of the assertion `kind` (the sink's name)."""

    def attach(stage: _Stage) -> _Stage:
        spec = _AssertionSpec(kind, stage.name, check, message, timeout)
        route = stage.grouping_key(_route_key).custom_transform(f"{kind}-route", map_p(whole_item))
        route.drain_to(Sink(kind, partial(_AssertionP, spec), local_parallelism=1))
        return stage

    return attach


def _route_key(item: Any) -> str:
    return _ROUTE_KEY


@dataclass(frozen=True)
class _AssertionSpec:
    """What an assertion sink checks: `check(items)` raises AssertionError when they are
    wrong; with a `timeout` (seconds) it runs after every item until it holds."""

    kind: str
    stage: str
    check: Callable[[list[Any]], object]
    message: str | None
    timeout: float | None

    def failure(
        self, error: AssertionError, collected: list[Any], when: str = ""
    ) -> AssertionError:
        """The AssertionError failing the job: the stage, what failed, the items collected."""
        lead = f"{self.message}: " if self.message else ""
        return AssertionError(
            f"stage '{self.stage}': {lead}{when}{str(error) or 'the assertion failed'}; "
            f"collected {_shown(collected)}"
        )


class _AssertionP(AbstractProcessor):
    """An assertion sink's processor (Jet's AssertionP). The one on the member owning the
    route key's partition gets every item and checks them; the others get none and do
    nothing. Its items go into snapshots, so that a restored job, or the next micro-batch,
    goes on collecting, the timeout counting from when it first started."""

    def __init__(self, spec: _AssertionSpec) -> None:
        self._spec = spec
        self._collected: list[Any] = []
        self._started = 0.0
        self._active = False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        partition = partition_id(_ROUTE_KEY, context.partition_count)
        self._active = context.member_index == member_of_partition(partition, context.member_count)
        self._started = time.time()

    def try_process0(self, item: Any) -> bool:
        self._collected.append(item)
        if self._spec.timeout is not None and self._failure_of_check() is None:
            raise self._completion()
        return True

    def try_process(self) -> bool:
        spec = self._spec
        if self._active and spec.timeout is not None and time.time() > self._started + spec.timeout:
            error = self._failure_of_check()
            if error is None:
                raise self._completion()
            when = f"it did not hold within {spec.timeout:g} s: "
            raise spec.failure(error, self._collected, when) from error
        return True

    def complete(self) -> bool:
        error = self._failure_of_check() if self._active else None
        if error is not None:
            raise self._spec.failure(error, self._collected) from error
        return True

    def save_to_snapshot(self) -> bool:
        if not self._active:
            return True
        return self.try_emit_to_snapshot(_STATE_KEY, (self._started, tuple(self._collected)))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if self._active:
            self._started, collected = value
            self._collected = list(collected)

    def _failure_of_check(self) -> AssertionError | None:
        try:
            self._spec.check(self._collected)
        except AssertionError as error:
            return error
        return None

    def _completion(self) -> AssertionCompletedError:
        spec = self._spec
        return AssertionCompletedError(
            f"stage '{spec.stage}': {spec.kind} holds after {len(self._collected)} items"
        )


@dataclass(frozen=True)
class _Ordered:
    expected: list[Any]

    def __call__(self, collected: list[Any]) -> None:
        if collected != self.expected:
            raise AssertionError(f"expected {_shown(self.expected)} in this order")


@dataclass(frozen=True)
class _AnyOrder:
    expected: list[Any]

    def __call__(self, collected: list[Any]) -> None:
        missing = _bag_difference(self.expected, collected)
        unexpected = _bag_difference(collected, self.expected)
        if missing or unexpected:
            raise AssertionError(
                f"expected {_shown(self.expected)} in any order: missing {_shown(missing)}, "
                f"unexpected {_shown(unexpected)}"
            )


@dataclass(frozen=True)
class _Contains:
    expected: list[Any]

    def __call__(self, collected: list[Any]) -> None:
        missing = [item for item in self.expected if item not in collected]
        if missing:
            raise AssertionError(
                f"expected to contain {_shown(self.expected)}: not collected {_shown(missing)}"
            )


def _bag_difference(items: list[Any], removed: list[Any]) -> list[Any]:
    """`items` less one equal item for each of `removed`, as multisets; unhashable items too."""
    try:
        return list((Counter(items) - Counter(removed)).elements())
    except TypeError:
        left = list(items)
        for item in removed:
            if item in left:
                left.remove(item)
        return left


def _shown(items: list[Any]) -> str:
    """`items` as a message shows them: the first _SHOWN_ITEMS, and how many there are."""
    if len(items) <= _SHOWN_ITEMS:
        return repr(items)
    return f"{repr(items[:_SHOWN_ITEMS])[:-1]}, ... ({len(items)} items)]"


def _checked(fn: Any, what: str) -> Any:
    if not callable(fn):
        raise TypeError(f"{what} takes a function of the list of items, got {type(fn).__name__}")
    return fn
