"""Rolling aggregation and duplicate suppression: keyed state that emits as items arrive
(manual §4.4 and §4.13)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.state_definition import defines_state
from jetspark.core.suppliers import ProcessorFn
from jetspark.processors.aggregate import AggregateOperation
from jetspark.processors.aggregation import merge_restored
from jetspark.processors.emission import ResumableEmission
from jetspark.processors.functions import NOTHING


class RollingAggregateP(AbstractProcessor):
    """Accumulates each item into its key's accumulator and emits `map_to_output_fn(item, key,
    export(acc))` at once: the aggregate so far, for every item (None: nothing emitted).

    Snapshot: one entry per key, saved under the key, so a restored key reaches its owner.
    """

    def __init__(
        self,
        key_fn: Callable[[Any], Any],
        aggr_op: AggregateOperation,
        map_to_output_fn: Callable[[Any, Any, Any], Any],
    ) -> None:
        self._key_fn = key_fn
        self._op = aggr_op
        self._accumulate = aggr_op.accumulate_fn(0)
        self._map_to_output_fn = map_to_output_fn
        self._accs: dict[Any, Any] = {}
        self._pending: Any = NOTHING
        self._snapshot = ResumableEmission(self.emit_from_traverser_to_snapshot)

    def try_process0(self, item: Any) -> bool:
        result = self._pending
        if result is NOTHING:
            key = self._key_fn(item)
            acc = self._accs.get(key, NOTHING)
            acc = self._accumulate(self._op.create_fn() if acc is NOTHING else acc, item)
            self._accs[key] = acc
            result = self._map_to_output_fn(item, key, self._op.export_fn(acc))
        if result is None or self.try_emit(result):
            self._pending = NOTHING
            return True
        self._pending = result
        return False

    def save_to_snapshot(self) -> bool:
        return self._snapshot.emit(lambda: list(self._accs.items()))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        merge_restored(self._accs, key, value, self._op)


class DistinctP(AbstractProcessor):
    """Emits an item only when no item of the same `key_fn(item)` passed before.

    Snapshot: the keys seen, each saved under itself, so a restored key reaches its owner.
    """

    def __init__(self, key_fn: Callable[[Any], Any]) -> None:
        self._key_fn = key_fn
        self._seen: set[Any] = set()
        self._snapshot = ResumableEmission(self.emit_from_traverser_to_snapshot)

    def try_process0(self, item: Any) -> bool:
        key = self._key_fn(item)
        if key in self._seen:
            return True
        if not self.try_emit(item):
            return False
        self._seen.add(key)
        return True

    def save_to_snapshot(self) -> bool:
        return self._snapshot.emit(lambda: [(key, True) for key in self._seen])

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        self._seen.add(key)


def rolling_aggregate_p(
    key_fn: Callable[[Any], Any],
    aggr_op: AggregateOperation,
    map_to_output_fn: Callable[[Any, Any, Any], Any],
) -> ProcessorFn:
    """Emits, per item, `map_to_output_fn(item, key, result so far for its key)`."""
    if aggr_op.arity > 1:
        raise ValueError("a rolling aggregation takes an AggregateOperation of one input")
    return defines_state(
        lambda: RollingAggregateP(key_fn, aggr_op, map_to_output_fn),
        RollingAggregateP,
        aggregate=aggr_op,
        key=key_fn,
    )


def distinct_p(key_fn: Callable[[Any], Any]) -> ProcessorFn:
    """Emits the first item of every distinct `key_fn(item)`, drops the later ones."""
    return defines_state(lambda: DistinctP(key_fn), DistinctP, key=key_fn)
