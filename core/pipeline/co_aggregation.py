"""An aggregate operation over several inputs named by the tags of an aggregate builder: Jet's
`CoAggregateOperationBuilder` (`co_aggregate_operation_builder()`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from jetspark.core.pipeline.items import ItemsByTag, Tag, items_by_tag
from jetspark.processors.aggregate import (
    AggregateOperation,
    all_of,
    check_one_input,
    co_aggregate,
)


@dataclass(frozen=True)
class _TaggedFinish:
    """The results of the inputs as an ItemsByTag, then `finish_fn` of it if given."""

    finish_fn: Callable[[ItemsByTag], Any] | None

    def __call__(self, results: tuple[Any, ...]) -> Any:
        tagged = items_by_tag(results)
        return tagged if self.finish_fn is None else self.finish_fn(tagged)


class CoAggregateOperationBuilder:
    """Registers one single-input operation per input tag (`add`); `build()` gives the operation
    of all those inputs, whose result holds each input's result under its tag."""

    def __init__(self) -> None:
        self._operations: dict[int, AggregateOperation] = {}

    def add(self, tag: Tag, operation: AggregateOperation) -> Tag:
        """Aggregates the input `tag` names with `operation`; its result is found under the tag
        returned (the same one)."""
        if not isinstance(tag, Tag):
            raise TypeError(
                f"add() takes the Tag an aggregate builder gave for an input, got "
                f"{type(tag).__name__}"
            )
        if not isinstance(operation, AggregateOperation):
            raise TypeError(
                f"add() takes an AggregateOperation (counting(), to_list(), ...) for {tag!r}, "
                f"got {type(operation).__name__}"
            )
        self._operations[tag.index] = operation
        return tag

    def build(self, finish_fn: Callable[[ItemsByTag], Any] | None = None) -> AggregateOperation:
        """The operation; its result is an ItemsByTag, or `finish_fn(items_by_tag)`."""
        indices = sorted(self._operations)
        if not indices:
            raise ValueError("add() an operation for each input of the builder before build()")
        if indices != list(range(len(indices))):
            raise ValueError(
                f"the registered tags' indices are {indices}, but they must be "
                f"{list(range(len(indices)))}: add() an operation for every input of the builder"
            )
        operations = [self._operations[index] for index in indices]
        return co_aggregate(operations, _TaggedFinish(finish_fn))


def co_aggregate_operation_builder() -> CoAggregateOperationBuilder:
    """A builder of one aggregate operation over the inputs of `aggregate_builder()`."""
    return CoAggregateOperationBuilder()


class AllOfAggregationBuilder:
    """Jet's `AllOfAggregationBuilder`: `add(op)` registers an operation over the same items and
    returns the Tag of its result; `build()` gives the operation running them all at once."""

    def __init__(self) -> None:
        self._tagged: list[tuple[Tag, AggregateOperation]] = []

    def add(self, operation: AggregateOperation) -> Tag:
        """Adds `operation` (of one input); its result is found under the returned tag."""
        if not isinstance(operation, AggregateOperation):
            kind = type(operation).__name__
            raise TypeError(f"add() takes an AggregateOperation (counting(), ...), got {kind}")
        check_one_input(operation, "all_of_builder().add()")
        tag = Tag(len(self._tagged))
        self._tagged.append((tag, operation))
        return tag

    def build(self, finish_fn: Callable[[ItemsByTag], Any] | None = None) -> AggregateOperation:
        """The operation; its result (exported or finished) is an ItemsByTag holding each added
        operation's result under its tag, or `finish_fn(items_by_tag)`. Combine and deduct are
        available when every operation has them."""
        if not self._tagged:
            raise ValueError("add() at least one AggregateOperation before build()")
        tagged = co_aggregate_operation_builder()
        for tag, operation in self._tagged:
            tagged.add(tag, operation)
        # a co-aggregation's accumulators, combine, deduct and ItemsByTag results, but every
        # item goes to every operation, as in all_of()
        every_item = all_of(*(operation for _, operation in self._tagged)).accumulate_fns
        return replace(tagged.build(finish_fn), accumulate_fns=every_item)


def all_of_builder() -> AllOfAggregationBuilder:
    """A builder of one operation running several over the same items, each result under its
    tag in an ItemsByTag (Jet's `allOfBuilder()`)."""
    return AllOfAggregationBuilder()
