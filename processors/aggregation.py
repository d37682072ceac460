"""Batch aggregation processors: aggregate*, accumulate* and combine*, with and without keys.

`accumulate_*` is the first stage of a two-stage aggregation (it emits accumulators), `combine_*`
the second (it combines them and finishes); `aggregate_*` does both in one step (manual §8.2.1).
"""

from __future__ import annotations

from collections import _count_elements  # type: ignore[attr-defined]
from collections.abc import Callable, Iterable
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.inbox import Inbox
from jetspark.core.outbox import Outbox, is_plain_batch, offer_items_of
from jetspark.core.state_definition import defines_state
from jetspark.core.suppliers import ProcessorFn
from jetspark.processors.aggregate import AggregateOperation, counting
from jetspark.processors.emission import ResumableEmission, offer_batch
from jetspark.processors.functions import (
    NOTHING,
    KeyFns,
    PerOrdinal,
    drain,
    entry,
    entry_key,
    entry_value,
    whole_item,
)
from jetspark.processors.snapshots import ProcessorState

_ACCUMULATOR = ProcessorState("accumulator")
_COUNTING = counting()
_COUNT_ONE = _COUNTING.accumulate_fn()
"""counting()'s accumulate function: what the shortcuts for counting recognise it by."""


def accumulate_by_key(
    accs: dict[Any, Any],
    items: Iterable[Any],
    key_fn: Callable[[Any], Any],
    accumulate_fn: Callable[[Any, Any], Any],
    create_fn: Callable[[], Any],
) -> None:
    """Accumulates each item into `accs[key_fn(item)]`, creating missing accumulators: the
    keyed-aggregation core of every grouping processor.

    `counting()` takes a shortcut: the standard library's C loop behind `Counter.update`
    does `accs[key] = accs.get(key, 0) + 1` per key, what its create and accumulate do.
    """
    if accumulate_fn is _COUNT_ONE and create_fn is _COUNTING.create_fn:
        _count_elements(accs, items if key_fn is whole_item else map(key_fn, items))
        return
    get = accs.get
    for item in items:
        key = key_fn(item)
        acc = get(key, NOTHING)
        accs[key] = accumulate_fn(create_fn() if acc is NOTHING else acc, item)


def merge_restored(accs: dict[Any, Any], key: Any, acc: Any, aggr_op: AggregateOperation) -> None:
    """Puts a restored accumulator into `accs`, combining it with one already restored."""
    present = accs.get(key, NOTHING)
    if present is NOTHING:
        accs[key] = acc
    else:
        combine = aggr_op.require_combine(f"restoring key {key!r} saved twice")
        accs[key] = combine(present, acc)


class AggregateP(AbstractProcessor):
    """Accumulates every item into one accumulator; on completion emits `finish(acc)`.

    Emits a result even when it received nothing (the finish of an empty accumulator), where
    Jet 0.7's aggregateP emits nothing; a None result is not emitted. Snapshot: the
    accumulator, saved under a broadcast key tagged with this processor's index (see
    `snapshots.ProcessorState`); restored onto fewer processors, the accumulators are combined.
    At-least-once: items processed after the snapshot and before a failure are accumulated
    again after the restart, so the result may count them twice.
    """

    def __init__(self, aggr_op: AggregateOperation) -> None:
        self._op = aggr_op
        self._acc = aggr_op.create_fn()
        self._result: Any = NOTHING
        self._restored = False

    def process(self, ordinal: int, inbox: Inbox) -> None:
        accumulate = self._op.accumulate_fn(ordinal)
        items = drain(inbox)
        if accumulate is _COUNT_ONE:  # counting(): one addition per batch, not a call per item
            self._acc += len(items)
            return
        acc = self._acc
        for item in items:
            acc = accumulate(acc, item)
        self._acc = acc

    def complete(self) -> bool:
        if self._result is NOTHING:
            self._result = self._op.finish_fn(self._acc)
        return self._result is None or self.try_emit(self._result)

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot(*_ACCUMULATOR.entry(self.context, self._acc))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        saved = _ACCUMULATOR.saved(key, value)
        if not ProcessorState.owns(self.context, saved):
            return
        if self._restored:
            combine = self._op.require_combine("restoring several saved accumulators into one")
            self._acc = combine(self._acc, saved.value)
        else:
            self._acc = saved.value
            self._restored = True


_RESULT_CHUNK = 1024
"""How many results GroupByKeyP finishes at a time and offers as one batch."""


class GroupByKeyP(AbstractProcessor):
    """Groups items by key and accumulates each group; on completion emits
    `map_to_output_fn(key, finish(acc))` for every key (None results are skipped).

    Snapshot: one entry per key, saved under the key itself, so on restore each key reaches the
    processor that owns it at any parallelism; results not yet emitted are part of the state.
    At-least-once: items processed after the snapshot are accumulated again after a restart, so
    a key's result may count them twice.
    """

    def __init__(
        self,
        key_fns: PerOrdinal,
        aggr_op: AggregateOperation,
        map_to_output_fn: Callable[[Any, Any], Any],
    ) -> None:
        self._key_fns = key_fns
        self._op = aggr_op
        self._map_to_output_fn = map_to_output_fn
        self._accs: dict[Any, Any] = {}
        self._unemitted: list[tuple[Any, Any]] | None = None
        """Once complete() started: the (key, acc) entries not yet finished, the next one last."""
        self._entries: list[tuple[Any, Any]] = []
        """The entries of the results being emitted, `_results[i]` from `_entries[i]`."""
        self._results: list[Any] = []
        self._emitted = 0
        self._snapshot = ResumableEmission(self.emit_from_traverser_to_snapshot)

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._offer_items = offer_items_of(outbox)

    def process(self, ordinal: int, inbox: Inbox) -> None:
        op = self._op
        accumulate_by_key(
            self._accs,
            drain(inbox),
            self._key_fns(ordinal),
            op.accumulate_fn(ordinal),
            op.create_fn,
        )

    def complete(self) -> bool:
        """Emits the results `_RESULT_CHUNK` at a time, each chunk offered as one batch."""
        if self._unemitted is None:
            self._unemitted = list(self._accs.items())
            self._unemitted.reverse()
            self._accs = {}
        while True:
            if self._emitted == len(self._results) and not self._next_chunk():
                return True
            results = self._results
            end = offer_batch(self, self._offer_items, results, self._emitted, self._plain)
            self._emitted = end
            if end < len(results):
                return False

    def _next_chunk(self) -> bool:
        """Finishes the next chunk of entries into results; False when none is left."""
        unemitted = self._unemitted
        assert unemitted is not None
        if not unemitted:
            self._entries, self._results, self._emitted = [], [], 0
            return False
        entries = unemitted[-_RESULT_CHUNK:]
        del unemitted[-_RESULT_CHUNK:]
        entries.reverse()
        finish, map_to_output = self._op.finish_fn, self._map_to_output_fn
        if finish is whole_item and map_to_output is entry:  # the entries are the results
            self._results = entries
        else:
            self._results = [map_to_output(key, finish(acc)) for key, acc in entries]
        self._entries, self._emitted = entries, 0
        self._plain = is_plain_batch(self._results)
        return True

    def save_to_snapshot(self) -> bool:
        def state() -> list[tuple[Any, Any]]:
            return [*self._accs.items(), *self._entries[self._emitted :], *(self._unemitted or ())]

        return self._snapshot.emit(state)

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        merge_restored(self._accs, key, value, self._op)


def aggregate_p(aggr_op: AggregateOperation) -> ProcessorFn:
    """Aggregates all items into one result, emitted on completion (Jet's aggregateP)."""
    return defines_state(lambda: AggregateP(aggr_op), AggregateP, aggregate=aggr_op)


def accumulate_p(aggr_op: AggregateOperation) -> ProcessorFn:
    """First stage of a two-stage aggregation: emits its accumulator on completion."""
    first_stage = aggr_op.with_identity_finish()
    return defines_state(lambda: AggregateP(first_stage), AggregateP, aggregate=first_stage)


def combine_p(aggr_op: AggregateOperation) -> ProcessorFn:
    """Second stage: combines the accumulators `accumulate_p` emitted, emits the finished result."""
    second_stage = aggr_op.with_combining_accumulate_fn(whole_item)
    return defines_state(lambda: AggregateP(second_stage), AggregateP, aggregate=second_stage)


def aggregate_by_key_p(
    key_fns: KeyFns,
    aggr_op: AggregateOperation,
    map_to_output_fn: Callable[[Any, Any], Any] = entry,
) -> ProcessorFn:
    """Groups by key and aggregates; emits `map_to_output_fn(key, result)` per key on completion."""
    return _group_by_key(key_fns, aggr_op, map_to_output_fn)


def accumulate_by_key_p(key_fns: KeyFns, aggr_op: AggregateOperation) -> ProcessorFn:
    """First stage of a keyed two-stage aggregation: emits `(key, accumulator)` per key."""
    return _group_by_key(key_fns, aggr_op.with_identity_finish(), entry)


def combine_by_key_p(
    aggr_op: AggregateOperation, map_to_output_fn: Callable[[Any, Any], Any] = entry
) -> ProcessorFn:
    """Second stage: combines the `(key, accumulator)` entries of `accumulate_by_key_p` per key
    and emits `map_to_output_fn(key, result)`; route them to it by `entry_key`.
    """
    return _group_by_key(
        entry_key, aggr_op.with_combining_accumulate_fn(entry_value), map_to_output_fn
    )


def _group_by_key(
    key_fns: KeyFns, aggr_op: AggregateOperation, map_to_output_fn: Callable[[Any, Any], Any]
) -> ProcessorFn:
    per_ordinal = PerOrdinal(key_fns, "key fn")
    per_ordinal.check_matches(aggr_op.accumulate_fns)
    return defines_state(
        lambda: GroupByKeyP(per_ordinal, aggr_op, map_to_output_fn),
        GroupByKeyP,
        aggregate=aggr_op,
        key=per_ordinal,
    )
