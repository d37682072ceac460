"""What a snapshot records of each vertex: the definition that gives its saved state a meaning.

A window processor's state is per-frame accumulators: restored under another window size, its
frames fall between the new windows; restored into another aggregate operation, key function
or processor class, its entries are read as something they are not. So a snapshot's manifest
records each vertex's `StateDefinition` (`definitions_of`), and a restore compares it with the
new DAG's (runtime/definition_change.py), as it does the routing of edges (edge_routing.py).

A definition is plain data: (aspect, description) pairs such as `("processor",
"jetspark.processors.sliding_window.SlidingWindowP")`, `("window", "tumbling(size=100)")`,
`("aggregate", ...)`, `("key", ...)`. The built-in stateful processors declare theirs
(`defines_state`); a vertex supplied as a Processor class (or a `functools.partial` of one) is
known by that class; any other vertex (a lambda returning a processor) has no definition unless
its author declares one, and is not checked. Functions are known by their qualified names, so
two lambdas in one function look alike, and a function renamed looks changed.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Iterable
from typing import Any

from jetspark.core.dag import Vertex
from jetspark.core.edge_routing import qualified_name
from jetspark.core.processor import Processor
from jetspark.core.suppliers import processor_fn_of, supplier_holders

StateDefinition = tuple[tuple[str, str], ...]
"""(aspect, description) pairs, sorted by aspect; "processor" names the processor class."""

_DEPTH = 4
"""How deep `describe` looks into nested callables before naming only their type."""


def defines_state(supplier: Any, processor: type, **aspects: Any) -> Any:
    """Declares that the processors `supplier` makes (a processor function, a supplier or a
    meta-supplier) are of class `processor` and that their state's meaning depends on
    `aspects` (a window policy, an aggregate operation, key functions...), each described with
    `describe` unless already a str. Returns `supplier`."""
    described = {"processor": qualified_name(processor)}
    described.update(
        (aspect, value if isinstance(value, str) else describe(value))
        for aspect, value in aspects.items()
    )
    supplier.state_definition = tuple(sorted(described.items()))
    return supplier


def state_definition_of(supplier: Any) -> StateDefinition | None:
    """The definition `defines_state` declared on a vertex's supplier (in any of its forms);
    else the processor class it was given as; else None (unknown)."""
    for holder in supplier_holders(supplier):
        declared = getattr(holder, "state_definition", None)
        if isinstance(declared, tuple):
            return declared
    maker = processor_fn_of(supplier)
    if isinstance(maker, functools.partial):
        maker = maker.func
    if inspect.isclass(maker) and issubclass(maker, Processor):
        return (("processor", qualified_name(maker)),)
    return None


def definitions_of(vertices: Iterable[Vertex]) -> dict[str, StateDefinition]:
    """The known definition of each of `vertices` (a DAG's), by vertex name."""
    definitions = {}
    for vertex in vertices:
        definition = state_definition_of(vertex.supplier)
        if definition is not None:
            definitions[vertex.name] = definition
    return definitions


def definitions_from_record(record: Iterable[Any]) -> dict[str, StateDefinition]:
    """Definitions from what `definitions_of` gave, after a round trip through msgpack."""
    return {
        vertex: tuple((str(aspect), str(text)) for aspect, text in definition)
        for vertex, definition in record
    }


def describe(value: Any, depth: int = _DEPTH) -> str:
    """A stable description of `value` for comparing definitions across runs: functions and
    classes by qualified name, dataclass instances (the built-in callables) by their fields,
    objects with a `state_description()` by it, other objects by their class."""
    describes_itself = getattr(value, "state_description", None)
    if callable(describes_itself) and not inspect.isclass(value):
        return str(describes_itself())
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(describe(item, depth) for item in value) + ")"
    if isinstance(value, functools.partial):
        arguments = [describe(arg, depth - 1) for arg in value.args]
        arguments += [f"{name}={describe(arg, depth - 1)}" for name, arg in value.keywords.items()]
        return f"partial({', '.join([describe(value.func, depth - 1), *arguments])})"
    if inspect.isroutine(value) or inspect.isclass(value):
        return qualified_name(value)
    if dataclasses.is_dataclass(value) and depth > 0:
        fields = ", ".join(
            f"{field.name}={describe(getattr(value, field.name), depth - 1)}"
            for field in dataclasses.fields(value)
        )
        return f"{type(value).__qualname__}({fields})"
    return qualified_name(type(value))
