"""AggregateOperation and the built-in operations (Jet's AggregateOperations, manual §7.3).

Accumulators follow Python's value semantics: `accumulate(acc, item)`, `combine(acc, other)` and
`deduct(acc, other)` return the new accumulator. They may mutate `acc` and return it (lists,
sets), so plain ints and tuples work as accumulators too; they must never mutate `other`.
`export(acc)` gives a result and leaves the accumulator usable (sliding windows emit a window and
keep going); `finish(acc)` gives the final result and may hand out the accumulator itself.
"""

from __future__ import annotations

import heapq
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from jetspark.core.state_definition import describe
from jetspark.processors.functions import PerOrdinal, whole_item

CreateFn = Callable[[], Any]
AccumulateFn = Callable[[Any, Any], Any]
CombineFn = Callable[[Any, Any], Any]
ResultFn = Callable[[Any], Any]


@dataclass(frozen=True)
class AggregateOperation:
    """The primitives of an aggregation: create, accumulate (per inbound ordinal), combine,
    deduct (optional), export and finish.

    Build one with `AggregateOperation.with_create(fn).and_accumulate(fn)...and_export_finish(fn)`.
    """

    create_fn: CreateFn
    accumulate_fns: PerOrdinal
    combine_fn: CombineFn | None = None
    deduct_fn: CombineFn | None = None
    export_fn: ResultFn = whole_item
    finish_fn: ResultFn = whole_item

    def __post_init__(self) -> None:
        for name in ("create_fn", "export_fn", "finish_fn"):
            if not callable(getattr(self, name)):
                raise TypeError(f"AggregateOperation.{name} must be callable")
        for name in ("combine_fn", "deduct_fn"):
            fn = getattr(self, name)
            if fn is not None and not callable(fn):
                raise TypeError(f"AggregateOperation.{name} must be callable or None")

    @staticmethod
    def with_create(create_fn: CreateFn) -> AggregateOperationBuilder:
        """Starts building an operation whose accumulators `create_fn()` makes."""
        return AggregateOperationBuilder(create_fn)

    def state_description(self) -> str:
        """The functions that make and change its accumulators (not export and finish, which
        only read them), as a snapshot records them (state_definition.py)."""
        parts = [f"create={describe(self.create_fn)}"]
        parts.append(f"accumulate={describe(self.accumulate_fns)}")
        for name in ("combine", "deduct"):
            fn = getattr(self, f"{name}_fn")
            if fn is not None:
                parts.append(f"{name}={describe(fn)}")
        return f"AggregateOperation({', '.join(parts)})"

    @property
    def arity(self) -> int:
        """How many accumulate functions were given (1 means one for every inbound ordinal)."""
        return len(self.accumulate_fns)

    def accumulate_fn(self, ordinal: int = 0) -> AccumulateFn:
        """The accumulate function for items of inbound edge `ordinal`."""
        return self.accumulate_fns(ordinal)

    def require_combine(self, purpose: str) -> CombineFn:
        """The combine function, or a ValueError saying that `purpose` needs one."""
        if self.combine_fn is None:
            raise ValueError(f"{purpose} needs an AggregateOperation with a combine function")
        return self.combine_fn

    def with_identity_finish(self) -> AggregateOperation:
        """This operation emitting the accumulator itself: the first stage of a two-stage job."""
        return replace(self, export_fn=whole_item, finish_fn=whole_item)

    def with_combining_accumulate_fn(
        self, get_acc_fn: Callable[[Any], Any] = whole_item
    ) -> AggregateOperation:
        """This operation accumulating items that carry accumulators, by combining them.

        The second stage of a two-stage aggregation receives the first stage's accumulators;
        `get_acc_fn` extracts the accumulator from each received item.
        """
        combine = self.require_combine("the combining stage of a two-stage aggregation")
        accumulate = _CombiningAccumulate(combine, get_acc_fn)
        return replace(self, accumulate_fns=PerOrdinal(accumulate, "accumulate fn"))


@dataclass(frozen=True)
class AggregateOperationBuilder:
    """Collects the primitives of an AggregateOperation; `and_finish`/`and_export_finish` end it."""

    create_fn: CreateFn
    accumulate_fns: PerOrdinal | None = None
    combine_fn: CombineFn | None = None
    deduct_fn: CombineFn | None = None
    export_fn: ResultFn | None = None
    tagged_fns: tuple[tuple[int, AccumulateFn], ...] = ()

    def and_accumulate(
        self,
        accumulate_fns: AccumulateFn | Sequence[AccumulateFn] | Any,
        accumulate_fn: AccumulateFn | None = None,
    ) -> AggregateOperationBuilder:
        """Sets `accumulate(acc, item) -> acc`: one for all inbound ordinals, or one per ordinal;
        `and_accumulate(tag, fn)` sets the function of the input an aggregate builder's `tag`
        names (Jet's `andAccumulate(tag, fn)`), for every tag from 0 up in any order."""
        if accumulate_fn is None:
            return replace(self, accumulate_fns=PerOrdinal(accumulate_fns, "accumulate fn"))
        index = getattr(accumulate_fns, "index", None)
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(
                "and_accumulate(tag, fn) takes the Tag of an aggregate builder's input first, "
                f"got {type(accumulate_fns).__name__}"
            )
        if not callable(accumulate_fn):
            kind = type(accumulate_fn).__name__
            raise TypeError(f"an accumulate fn must be callable, got {kind}")
        others = tuple(pair for pair in self.tagged_fns if pair[0] != index)
        return replace(self, tagged_fns=(*others, (index, accumulate_fn)))

    def and_accumulate0(self, accumulate_fn: AccumulateFn) -> AggregateOperationBuilder:
        """Sets the accumulate function of inbound ordinal 0 (Jet's `andAccumulate0`)."""
        return self._and_accumulate_at(0, accumulate_fn)

    def and_accumulate1(self, accumulate_fn: AccumulateFn) -> AggregateOperationBuilder:
        """Sets the accumulate function of inbound ordinal 1 (after `and_accumulate0`)."""
        return self._and_accumulate_at(1, accumulate_fn)

    def and_accumulate2(self, accumulate_fn: AccumulateFn) -> AggregateOperationBuilder:
        """Sets the accumulate function of inbound ordinal 2 (after ordinals 0 and 1)."""
        return self._and_accumulate_at(2, accumulate_fn)

    def _and_accumulate_at(
        self, ordinal: int, accumulate_fn: AccumulateFn
    ) -> AggregateOperationBuilder:
        given = self.accumulate_fns
        count = 0 if given is None else len(given)
        if count != ordinal or (given is not None and not given.per_ordinal):
            raise ValueError(
                f"and_accumulate{ordinal}() follows and_accumulate0() .. "
                f"and_accumulate{ordinal - 1}(), in order"
                if ordinal
                else "and_accumulate0() starts the per-ordinal accumulate functions"
            )
        fns = [given(i) for i in range(count)] if given is not None else []
        per_ordinal = PerOrdinal([*fns, accumulate_fn], "accumulate fn", per_ordinal=True)
        return replace(self, accumulate_fns=per_ordinal)

    def and_combine(self, combine_fn: CombineFn) -> AggregateOperationBuilder:
        """Sets `combine(acc, other) -> acc`, merging two partial results."""
        return replace(self, combine_fn=combine_fn)

    def and_deduct(self, deduct_fn: CombineFn) -> AggregateOperationBuilder:
        """Sets `deduct(acc, other) -> acc`, undoing an earlier combine (sliding windows use it)."""
        return replace(self, deduct_fn=deduct_fn)

    def and_export(self, export_fn: ResultFn) -> AggregateOperationBuilder:
        """Sets `export(acc)`, a result that leaves the accumulator usable."""
        return replace(self, export_fn=export_fn)

    def and_finish(self, finish_fn: ResultFn) -> AggregateOperation:
        """Sets `finish(acc)`, the final result, and builds (export defaults to `finish_fn`)."""
        export_fn = finish_fn if self.export_fn is None else self.export_fn
        return self._build(export_fn, finish_fn)

    def and_export_finish(self, export_finish_fn: ResultFn) -> AggregateOperation:
        """Uses one function as both export and finish, and builds the operation."""
        return self._build(export_finish_fn, export_finish_fn)

    def _build(self, export_fn: ResultFn, finish_fn: ResultFn) -> AggregateOperation:
        return AggregateOperation(
            self.create_fn,
            self._accumulate_fns(),
            self.combine_fn,
            self.deduct_fn,
            export_fn,
            finish_fn,
        )

    def _accumulate_fns(self) -> PerOrdinal:
        """The accumulate functions given one way or the other, checked."""
        if not self.tagged_fns:
            if self.accumulate_fns is None:
                raise ValueError("call and_accumulate() before finishing an AggregateOperation")
            return self.accumulate_fns
        if self.accumulate_fns is not None:
            raise ValueError(
                "and_accumulate(tag, fn) cannot be mixed with and_accumulate(fn) or "
                "and_accumulate0/1/2(): give every input's function by its tag"
            )
        by_index = dict(self.tagged_fns)
        if sorted(by_index) != list(range(len(by_index))):
            raise ValueError(
                f"and_accumulate(tag, fn) was given for tags {sorted(by_index)}, but they must be "
                f"{list(range(len(by_index)))}: one function for each input of the builder"
            )
        fns = [by_index[index] for index in range(len(by_index))]
        return PerOrdinal(fns, "accumulate fn", per_ordinal=True)


@dataclass(frozen=True)
class _CombiningAccumulate:
    """`acc = combine(acc, get_acc(item))`: accumulates an item that carries an accumulator."""

    combine_fn: CombineFn
    get_acc_fn: Callable[[Any], Any]

    def __call__(self, acc: Any, item: Any) -> Any:
        return self.combine_fn(acc, self.get_acc_fn(item))


def counting() -> AggregateOperation:
    """Counts the items; the result is an int."""
    return (
        AggregateOperation.with_create(int)
        .and_accumulate(_count_one)
        .and_combine(operator.add)
        .and_deduct(operator.sub)
        .and_export_finish(whole_item)
    )


def summing(value_fn: Callable[[Any], Any] = whole_item) -> AggregateOperation:
    """Sums `value_fn(item)` over the items (ints stay exact)."""
    return (
        AggregateOperation.with_create(int)
        .and_accumulate(_Summing(value_fn))
        .and_combine(operator.add)
        .and_deduct(operator.sub)
        .and_export_finish(whole_item)
    )


def averaging(value_fn: Callable[[Any], Any] = whole_item) -> AggregateOperation:
    """The arithmetic mean of `value_fn(item)`; NaN when there were no items."""
    return (
        AggregateOperation.with_create(_zero_pair)
        .and_accumulate(_Averaging(value_fn))
        .and_combine(_add_tuples)
        .and_deduct(_sub_tuples)
        .and_export_finish(_mean)
    )


def min_by(key_fn: Callable[[Any], Any] = whole_item) -> AggregateOperation:
    """The item with the smallest `key_fn(item)` (the first one on ties); None without items."""
    return _extreme_by(key_fn, operator.lt)


def max_by(key_fn: Callable[[Any], Any] = whole_item) -> AggregateOperation:
    """The item with the largest `key_fn(item)` (the first one on ties); None without items."""
    return _extreme_by(key_fn, operator.gt)


def to_list() -> AggregateOperation:
    """All items in a list, in arrival order within each accumulator."""
    return (
        AggregateOperation.with_create(list)
        .and_accumulate(_append)
        .and_combine(_extend)
        .and_export(list)
        .and_finish(whole_item)
    )


def to_set() -> AggregateOperation:
    """The distinct items in a set."""
    return (
        AggregateOperation.with_create(set)
        .and_accumulate(_add_to_set)
        .and_combine(_union)
        .and_export(set)
        .and_finish(whole_item)
    )


def linear_trend(x_fn: Callable[[Any], Any], y_fn: Callable[[Any], Any]) -> AggregateOperation:
    """The slope of the least-squares line through the points `(x_fn(item), y_fn(item))`.

    NaN when the slope is undefined (fewer than two distinct x values).
    """
    return (
        AggregateOperation.with_create(_zero_trend)
        .and_accumulate(_Trend(x_fn, y_fn))
        .and_combine(_add_tuples)
        .and_deduct(_sub_tuples)
        .and_export_finish(_slope)
    )


def all_of(*operations: AggregateOperation) -> AggregateOperation:
    """Runs several operations at once; the accumulator and the result are tuples, one per op.

    Combine and deduct are available when every operation has them.
    """
    if not operations:
        raise ValueError("all_of() needs at least one AggregateOperation")
    widest = max(operations, key=lambda op: op.arity)
    for op in operations:
        op.accumulate_fns.check_matches(widest.accumulate_fns)
    return AggregateOperation(
        _AllOfCreate(operations),
        PerOrdinal(
            [
                _AllOfAccumulate(tuple(op.accumulate_fn(ordinal) for op in operations))
                for ordinal in range(widest.arity)
            ],
            "accumulate fn",
        ),
        _pairwise([op.combine_fn for op in operations]),
        _pairwise([op.deduct_fn for op in operations]),
        _AllOfResult(tuple(op.export_fn for op in operations)),
        _AllOfResult(tuple(op.finish_fn for op in operations)),
    )


def _count_one(acc: int, item: Any) -> int:
    return acc + 1


@dataclass(frozen=True)
class _Summing:
    value_fn: Callable[[Any], Any]

    def __call__(self, acc: Any, item: Any) -> Any:
        return acc + self.value_fn(item)


def _zero_pair() -> tuple[int, int]:
    return (0, 0)


@dataclass(frozen=True)
class _Averaging:
    value_fn: Callable[[Any], Any]

    def __call__(self, acc: tuple[int, Any], item: Any) -> tuple[int, Any]:
        return (acc[0] + 1, acc[1] + self.value_fn(item))


def _add_tuples(acc: tuple[Any, ...], other: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(map(operator.add, acc, other))


def _sub_tuples(acc: tuple[Any, ...], other: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(map(operator.sub, acc, other))


def _mean(acc: tuple[int, Any]) -> float:
    count, total = acc
    return total / count if count else math.nan


def _extreme_by(
    key_fn: Callable[[Any], Any], better: Callable[[Any, Any], bool]
) -> AggregateOperation:
    pick = _PickBetter(key_fn, better)
    return (
        AggregateOperation.with_create(_none)
        .and_accumulate(pick)
        .and_combine(pick)
        .and_export_finish(whole_item)
    )


def _none() -> None:
    return None


@dataclass(frozen=True)
class _PickBetter:
    """Keeps `acc` unless `candidate` is strictly better by `key_fn`; None means "nothing yet"."""

    key_fn: Callable[[Any], Any]
    better: Callable[[Any, Any], bool]

    def __call__(self, acc: Any, candidate: Any) -> Any:
        if candidate is None:
            return acc
        if acc is None or self.better(self.key_fn(candidate), self.key_fn(acc)):
            return candidate
        return acc


def _append(acc: list[Any], item: Any) -> list[Any]:
    acc.append(item)
    return acc


def _extend(acc: list[Any], other: list[Any]) -> list[Any]:
    acc.extend(other)
    return acc


def _add_to_set(acc: set[Any], item: Any) -> set[Any]:
    acc.add(item)
    return acc


def _union(acc: set[Any], other: set[Any]) -> set[Any]:
    acc |= other
    return acc


def _zero_trend() -> tuple[int, int, int, int, int]:
    return (0, 0, 0, 0, 0)


@dataclass(frozen=True)
class _Trend:
    """Accumulates (n, Σx, Σy, Σxy, Σx²)."""

    x_fn: Callable[[Any], Any]
    y_fn: Callable[[Any], Any]

    def __call__(self, acc: tuple[Any, ...], item: Any) -> tuple[Any, ...]:
        x, y = self.x_fn(item), self.y_fn(item)
        n, sx, sy, sxy, sxx = acc
        return (n + 1, sx + x, sy + y, sxy + x * y, sxx + x * x)


def _slope(acc: tuple[Any, ...]) -> float:
    n, sx, sy, sxy, sxx = acc
    denominator = n * sxx - sx * sx
    return (n * sxy - sx * sy) / denominator if denominator else math.nan


@dataclass(frozen=True)
class _AllOfCreate:
    operations: tuple[AggregateOperation, ...]

    def __call__(self) -> tuple[Any, ...]:
        return tuple(op.create_fn() for op in self.operations)


@dataclass(frozen=True)
class _AllOfAccumulate:
    fns: tuple[AccumulateFn, ...]

    def __call__(self, acc: tuple[Any, ...], item: Any) -> tuple[Any, ...]:
        return tuple(fn(a, item) for fn, a in zip(self.fns, acc, strict=True))


@dataclass(frozen=True)
class _Pairwise:
    """Applies one combine/deduct function per slot of two tuple accumulators."""

    fns: tuple[CombineFn, ...]

    def __call__(self, acc: tuple[Any, ...], other: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(fn(a, b) for fn, a, b in zip(self.fns, acc, other, strict=True))


def _pairwise(fns: Sequence[CombineFn | None]) -> _Pairwise | None:
    """The combine/deduct function of the slots' `fns`; None unless every slot has one."""
    present = [fn for fn in fns if fn is not None]
    return _Pairwise(tuple(present)) if len(present) == len(fns) else None


@dataclass(frozen=True)
class _AllOfResult:
    fns: tuple[ResultFn, ...]

    def __call__(self, acc: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(fn(a) for fn, a in zip(self.fns, acc, strict=True))


def to_map(
    key_fn: Callable[[Any], Any],
    value_fn: Callable[[Any], Any] = whole_item,
    merge_fn: Callable[[Any, Any], Any] | None = None,
) -> AggregateOperation:
    """A dict of `key_fn(item) -> value_fn(item)`; two values of one key become
    `merge_fn(earlier, later)`, or, without `merge_fn`, a ValueError naming the key (Jet's
    `toMap`)."""
    merge = _MergeValues(merge_fn)
    return (
        AggregateOperation.with_create(dict)
        .and_accumulate(_PutEntry(key_fn, value_fn, merge))
        .and_combine(merge.into)
        .and_export(dict)
        .and_finish(whole_item)
    )


def pick_any() -> AggregateOperation:
    """One of the items (the first one seen by the accumulator); None without items."""
    return (
        AggregateOperation.with_create(_none)
        .and_accumulate(_keep_first)
        .and_combine(_keep_first)
        .and_export_finish(whole_item)
    )


def reducing(
    empty: Any,
    value_fn: Callable[[Any], Any],
    combine_fn: Callable[[Any, Any], Any],
    deduct_fn: Callable[[Any, Any], Any] | None = None,
) -> AggregateOperation:
    """Folds `value_fn(item)` into `empty` with `combine_fn(a, b)` (associative; `deduct_fn`
    its inverse, for sliding windows). `empty` must be immutable (a number, a tuple)."""
    builder = (
        AggregateOperation.with_create(_Constant(empty))
        .and_accumulate(_Reduce(value_fn, combine_fn))
        .and_combine(combine_fn)
    )
    if deduct_fn is not None:
        builder = builder.and_deduct(deduct_fn)
    return builder.and_export_finish(whole_item)


def mapping(map_fn: Callable[[Any], Any], operation: AggregateOperation) -> AggregateOperation:
    """`operation` over `map_fn(item)` instead of the item (None results are skipped)."""
    return replace(operation, accumulate_fns=operation.accumulate_fns.map(_Mapped.of(map_fn)))


def co_aggregate(
    operations: Sequence[AggregateOperation],
    finish_fn: Callable[[tuple[Any, ...]], Any] = whole_item,
) -> AggregateOperation:
    """An operation over several inputs: the items of inbound ordinal i go to `operations[i]`
    (each an operation of one input); the result is `finish_fn((result0, result1, ...))`.

    Jet's `aggregateOperation2/3`, and what the aggregate builders use. Combine and deduct are
    available when every operation has them.
    """
    if not operations:
        raise ValueError("co_aggregate() needs at least one AggregateOperation")
    for op in operations:
        if op.arity > 1:
            raise ValueError("co_aggregate() takes AggregateOperations of one input each")
    accumulates = [_AccumulateSlot(slot, op.accumulate_fn()) for slot, op in enumerate(operations)]
    return AggregateOperation(
        _AllOfCreate(tuple(operations)),
        PerOrdinal(accumulates if len(accumulates) > 1 else accumulates[0], "accumulate fn"),
        _pairwise([op.combine_fn for op in operations]),
        _pairwise([op.deduct_fn for op in operations]),
        _Finishing(tuple(op.export_fn for op in operations), finish_fn),
        _Finishing(tuple(op.finish_fn for op in operations), finish_fn),
    )


def aggregate_operation2(
    op0: AggregateOperation,
    op1: AggregateOperation,
    finish_fn: Callable[[Any, Any], Any] | None = None,
) -> AggregateOperation:
    """Two operations over two inputs; the result is `finish_fn(result0, result1)`, or the
    tuple `(result0, result1)` without one."""
    return co_aggregate((op0, op1), whole_item if finish_fn is None else _Spread(finish_fn))


def aggregate_operation3(
    op0: AggregateOperation,
    op1: AggregateOperation,
    op2: AggregateOperation,
    finish_fn: Callable[[Any, Any, Any], Any] | None = None,
) -> AggregateOperation:
    """Three operations over three inputs; the result is `finish_fn(result0, result1,
    result2)`, or the tuple of the three without one."""
    return co_aggregate((op0, op1, op2), whole_item if finish_fn is None else _Spread(finish_fn))


def top_n(n: int, key_fn: Callable[[Any], Any] = whole_item) -> AggregateOperation:
    """The `n` items with the greatest `key_fn(item)`, greatest first (Jet's `topN`); on equal
    keys the item seen first is kept and listed first. No deduct."""
    return _ranking(n, key_fn, least=False)


def bottom_n(n: int, key_fn: Callable[[Any], Any] = whole_item) -> AggregateOperation:
    """The `n` items with the least `key_fn(item)`, least first (Jet's `bottomN`); on equal
    keys the item seen first is kept and listed first. No deduct."""
    return _ranking(n, key_fn, least=True)


def sorting(key_fn: Callable[[Any], Any] = whole_item, reverse: bool = False) -> AggregateOperation:
    """All items in a list sorted by `key_fn(item)` (stable; descending with `reverse`), Jet's
    `sorting(comparator)`."""
    order = _Sorting(key_fn, reverse)
    return (
        AggregateOperation.with_create(list)
        .and_accumulate(_append)
        .and_combine(_extend)
        .and_export(order.sorted_copy)
        .and_finish(order.in_place)
    )


def grouping_by(
    key_fn: Callable[[Any], Any], downstream: AggregateOperation | None = None
) -> AggregateOperation:
    """A dict of `key_fn(item) -> downstream's result over the items of that key`; `downstream`
    defaults to `to_list()` (Jet's `groupingBy`). Combine and deduct are available when
    `downstream` has them; a deduct drops the keys whose items were all deducted."""
    downstream = to_list() if downstream is None else downstream
    check_one_input(downstream, "grouping_by()")
    groups = _Groups(key_fn, downstream)
    builder = AggregateOperation.with_create(dict).and_accumulate(groups)
    if downstream.combine_fn is not None:
        builder = builder.and_combine(groups.combine)
    if downstream.deduct_fn is not None:
        builder = builder.and_deduct(groups.deduct)
    return builder.and_export(groups.export).and_finish(groups.finish)


def concatenating(delimiter: str = "", prefix: str = "", suffix: str = "") -> AggregateOperation:
    """The str items joined by `delimiter` between `prefix` and `suffix` (Jet's
    `concatenating`): empty items add nothing, not even a delimiter; no items give
    `prefix + suffix`. No deduct."""
    for name, text in (("delimiter", delimiter), ("prefix", prefix), ("suffix", suffix)):
        if not isinstance(text, str):
            raise TypeError(f"concatenating(): {name} must be a str, got {type(text).__name__}")
    return (
        AggregateOperation.with_create(list)
        .and_accumulate(_add_text)
        .and_combine(_extend)
        .and_export_finish(_Joining(delimiter, prefix, suffix))
    )


def to_collection(create_collection_fn: Callable[[], Any]) -> AggregateOperation:
    """The items added to a collection `create_collection_fn()` makes (Jet's `toCollection`):
    by its `add` (a set) or else its `append` (a list, a deque). Export gives a new collection
    of the same items, finish the accumulated one."""
    if not callable(create_collection_fn):
        kind = type(create_collection_fn).__name__
        raise TypeError(f"to_collection() takes a function that creates a collection, got {kind}")
    return (
        AggregateOperation.with_create(create_collection_fn)
        .and_accumulate(_collect)
        .and_combine(_collect_all)
        .and_export(_CollectionCopy(create_collection_fn))
        .and_finish(whole_item)
    )


@dataclass(frozen=True)
class _MergeValues:
    """Puts a value under its key, merging it with a value already there by `merge_fn`."""

    merge_fn: Callable[[Any, Any], Any] | None

    def put(self, acc: dict[Any, Any], key: Any, value: Any) -> None:
        if key in acc:
            if self.merge_fn is None:
                raise ValueError(f"to_map: duplicate key {key!r} (give a merge_fn to merge values)")
            value = self.merge_fn(acc[key], value)
        acc[key] = value

    def into(self, acc: dict[Any, Any], other: dict[Any, Any]) -> dict[Any, Any]:
        for key, value in other.items():
            self.put(acc, key, value)
        return acc


@dataclass(frozen=True)
class _PutEntry:
    key_fn: Callable[[Any], Any]
    value_fn: Callable[[Any], Any]
    merge: _MergeValues

    def __call__(self, acc: dict[Any, Any], item: Any) -> dict[Any, Any]:
        self.merge.put(acc, self.key_fn(item), self.value_fn(item))
        return acc


def _keep_first(acc: Any, item: Any) -> Any:
    return item if acc is None else acc


@dataclass(frozen=True)
class _Constant:
    value: Any

    def __call__(self) -> Any:
        return self.value


@dataclass(frozen=True)
class _Reduce:
    value_fn: Callable[[Any], Any]
    combine_fn: Callable[[Any, Any], Any]

    def __call__(self, acc: Any, item: Any) -> Any:
        return self.combine_fn(acc, self.value_fn(item))


@dataclass(frozen=True)
class _Mapped:
    """An accumulate function fed `map_fn(item)`; None results leave the accumulator as is."""

    map_fn: Callable[[Any], Any]
    accumulate_fn: AccumulateFn

    @staticmethod
    def of(map_fn: Callable[[Any], Any]) -> Callable[[AccumulateFn], AccumulateFn]:
        return lambda accumulate_fn: _Mapped(map_fn, accumulate_fn)

    def __call__(self, acc: Any, item: Any) -> Any:
        value = self.map_fn(item)
        return acc if value is None else self.accumulate_fn(acc, value)


@dataclass(frozen=True)
class _AccumulateSlot:
    """Accumulates into slot `slot` of a tuple accumulator."""

    slot: int
    accumulate_fn: AccumulateFn

    def __call__(self, acc: tuple[Any, ...], item: Any) -> tuple[Any, ...]:
        slot = self.slot
        return (*acc[:slot], self.accumulate_fn(acc[slot], item), *acc[slot + 1 :])


@dataclass(frozen=True)
class _Finishing:
    fns: tuple[ResultFn, ...]
    finish_fn: Callable[..., Any]

    def __call__(self, acc: tuple[Any, ...]) -> Any:
        return self.finish_fn(tuple(fn(a) for fn, a in zip(self.fns, acc, strict=True)))


@dataclass(frozen=True)
class _Spread:
    """`fn(*results)`: the results of a co-aggregation as separate arguments."""

    fn: Callable[..., Any]

    def __call__(self, results: tuple[Any, ...]) -> Any:
        return self.fn(*results)


def check_one_input(operation: AggregateOperation, where: str) -> None:
    if operation.arity > 1:
        raise ValueError(f"{where} takes an AggregateOperation of one input")


@dataclass
class _Ranked:
    """top_n's and bottom_n's accumulator: a heap of `(rank, -arrival, item)` entries, the
    first one to give way at its root, and the count of items offered so far."""

    entries: list[tuple[Any, int, Any]] = field(default_factory=list)
    arrivals: int = 0


@dataclass(frozen=True)
class _Reversed:
    """A key that orders the other way round: bottom_n ranks by it."""

    key: Any

    def __lt__(self, other: _Reversed) -> bool:
        return bool(other.key < self.key)


def _ranking(n: int, key_fn: Callable[[Any], Any], least: bool) -> AggregateOperation:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    ranking = _Ranking(n, key_fn, least)
    return (
        AggregateOperation.with_create(_Ranked)
        .and_accumulate(ranking)
        .and_combine(ranking.combine)
        .and_export_finish(_best_first)
    )


@dataclass(frozen=True)
class _Ranking:
    """Keeps the `n` items of the greatest keys (`least`: the least) in a `_Ranked`; an item
    displaces the worst kept one only when its key is strictly better."""

    n: int
    key_fn: Callable[[Any], Any]
    least: bool

    def __call__(self, acc: _Ranked, item: Any) -> _Ranked:
        key = self.key_fn(item)
        self._offer(acc, _Reversed(key) if self.least else key, item)
        return acc

    def combine(self, acc: _Ranked, other: _Ranked) -> _Ranked:
        """Offers `other`'s items to `acc` in their order of arrival, after `acc`'s own."""
        for rank, _, item in sorted(other.entries, key=operator.itemgetter(1), reverse=True):
            self._offer(acc, rank, item)
        return acc

    def _offer(self, acc: _Ranked, rank: Any, item: Any) -> None:
        entry = (rank, -acc.arrivals, item)
        acc.arrivals += 1
        if len(acc.entries) < self.n:
            heapq.heappush(acc.entries, entry)
        elif acc.entries[0] < entry:
            heapq.heapreplace(acc.entries, entry)


def _best_first(acc: _Ranked) -> list[Any]:
    return [item for _, _, item in sorted(acc.entries, reverse=True)]


@dataclass(frozen=True)
class _Sorting:
    key_fn: Callable[[Any], Any]
    reverse: bool

    def sorted_copy(self, acc: list[Any]) -> list[Any]:
        return sorted(acc, key=self.key_fn, reverse=self.reverse)

    def in_place(self, acc: list[Any]) -> list[Any]:
        acc.sort(key=self.key_fn, reverse=self.reverse)
        return acc


_KeyedAccs = dict[Any, list[Any]]
"""grouping_by's accumulator: `key -> [item count, downstream accumulator]`."""


@dataclass(frozen=True)
class _Groups:
    """grouping_by's primitives; a key's item count tells a deduct when it has no items left."""

    key_fn: Callable[[Any], Any]
    downstream: AggregateOperation

    def __call__(self, acc: _KeyedAccs, item: Any) -> _KeyedAccs:
        slot = self._slot(acc, self.key_fn(item))
        slot[0] += 1
        slot[1] = self.downstream.accumulate_fn()(slot[1], item)
        return acc

    def combine(self, acc: _KeyedAccs, other: _KeyedAccs) -> _KeyedAccs:
        combine = self.downstream.combine_fn
        assert combine is not None
        for key, (count, other_acc) in other.items():
            slot = self._slot(acc, key)
            slot[0] += count
            slot[1] = combine(slot[1], other_acc)
        return acc

    def deduct(self, acc: _KeyedAccs, other: _KeyedAccs) -> _KeyedAccs:
        deduct = self.downstream.deduct_fn
        assert deduct is not None
        for key, (count, other_acc) in other.items():
            slot = acc[key]
            slot[0] -= count
            if slot[0]:
                slot[1] = deduct(slot[1], other_acc)
            else:
                del acc[key]
        return acc

    def export(self, acc: _KeyedAccs) -> dict[Any, Any]:
        export = self.downstream.export_fn
        return {key: export(key_acc) for key, (_, key_acc) in acc.items()}

    def finish(self, acc: _KeyedAccs) -> dict[Any, Any]:
        finish = self.downstream.finish_fn
        return {key: finish(key_acc) for key, (_, key_acc) in acc.items()}

    def _slot(self, acc: _KeyedAccs, key: Any) -> list[Any]:
        """The key's `[count, accumulator]`, a fresh one (never `other`'s) if it had none."""
        slot = acc.get(key)
        if slot is None:
            slot = acc[key] = [0, self.downstream.create_fn()]
        return slot


def _add_text(acc: list[str], item: str) -> list[str]:
    if not isinstance(item, str):
        raise TypeError(f"concatenating() takes str items, got {type(item).__name__}")
    if item:
        acc.append(item)
    return acc


@dataclass(frozen=True)
class _Joining:
    delimiter: str
    prefix: str
    suffix: str

    def __call__(self, acc: list[str]) -> str:
        return f"{self.prefix}{self.delimiter.join(acc)}{self.suffix}"


def _collect(acc: Any, item: Any) -> Any:
    """Adds `item` to the collection `acc`: `acc.add(item)`, or `acc.append(item)` without one."""
    add = getattr(acc, "add", None)
    (acc.append if add is None else add)(item)
    return acc


def _collect_all(acc: Any, other: Any) -> Any:
    for item in other:
        _collect(acc, item)
    return acc


@dataclass(frozen=True)
class _CollectionCopy:
    create_collection_fn: Callable[[], Any]

    def __call__(self, acc: Any) -> Any:
        return _collect_all(self.create_collection_fn(), acc)
