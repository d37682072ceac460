"""An aggregate operation over several inputs named by the tags of an aggregate builder: Jet's
`CoAggregateOperationBuilder` (`co_aggregate_operation_builder()`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jetspark.core.pipeline.items import ItemsByTag, Tag, items_by_tag
from jetspark.processors.aggregate import AggregateOperation, co_aggregate


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
