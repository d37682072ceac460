"""Hash-join processors: the collector that builds a lookup table from an enriching input and
the joiner that enriches its primary input with the tables (manual §4.7, Jet's planner).

The pipeline planner feeds each collector over a distributed broadcast edge, so every member's
collector holds the whole enriching data set, and each joiner reads its collectors' tables over
local broadcast edges of a higher priority than its primary input, so every table is complete
before the first primary item is joined.

An enriching input may hold a key more than once (Jet 4's rule): the table keeps every value of
the key, and a primary item is joined with each combination of its matches, one output per
combination (a key missing from a table is one match, None).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.inbox import Inbox
from jetspark.core.suppliers import ProcessorFn
from jetspark.processors.emission import ResumableEmission
from jetspark.processors.functions import drain
from jetspark.processors.snapshots import ProcessorState

_TABLE = ProcessorState("hash_join_table")
_TABLES = ProcessorState("hash_join_tables")


class Matches(list[Any]):
    """The values of a key that an enriching input holds more than once (Jet's
    `HashJoinArrayList`): a table's value is one value, or a Matches of several."""

    __slots__ = ()


class HashJoinCollectP(AbstractProcessor):
    """Collects `key_fn(item) -> project_fn(item)` of every item (a key seen again keeps all its
    values, in a `Matches`); on completion emits the table as one item.

    Snapshot: every collector sees the same items (a broadcast edge), so only processor 0
    saves its table, and every processor restores it.
    """

    def __init__(self, key_fn: Callable[[Any], Any], project_fn: Callable[[Any], Any]) -> None:
        self._key_fn = key_fn
        self._project_fn = project_fn
        self._table: dict[Any, Any] = {}

    def process(self, ordinal: int, inbox: Inbox) -> None:
        key_fn, project_fn, table = self._key_fn, self._project_fn, self._table
        for item in drain(inbox):
            key, value = key_fn(item), project_fn(item)
            if key not in table:
                table[key] = value
                continue
            held = table[key]
            if type(held) is Matches:
                held.append(value)
            else:
                table[key] = Matches((held, value))

    def complete(self) -> bool:
        return self.try_emit(self._table)

    def save_to_snapshot(self) -> bool:
        if self.context.global_processor_index:
            return True
        return self.try_emit_to_snapshot(*_TABLE.entry(self.context, self._table))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        self._table = dict(_TABLE.saved(key, value).value)


class HashJoinP(AbstractProcessor):
    """Joins each item of ordinal 0 with one table per further ordinal: `output_fn(item,
    [one match of key_fns[i](item) in tables[i] for each table])` is emitted for every
    combination of the matches (None outputs: nothing).

    The tables arrive first (higher-priority edges); a key missing from a table gives None, as
    Jet's hash join does. Snapshot: the tables, saved by processor 0 and restored everywhere.
    """

    def __init__(
        self,
        key_fns: Sequence[Callable[[Any], Any]],
        output_fn: Callable[[Any, list[Any]], Any],
    ) -> None:
        self._key_fns = tuple(key_fns)
        self._output_fn = output_fn
        self._tables: list[dict[Any, Any]] = [{} for _ in self._key_fns]
        self._joined = ResumableEmission(self.emit_from_traverser)

    def try_process_item(self, ordinal: int, item: Any) -> bool:
        if ordinal:
            self._tables[ordinal - 1] = item
            return True
        looked_up = [
            table.get(key_fn(item))
            for key_fn, table in zip(self._key_fns, self._tables, strict=True)
        ]
        if not any(type(value) is Matches for value in looked_up):  # one output: the usual case
            result = self._output_fn(item, looked_up)
            return result is None or self.try_emit(result)
        return self._joined.emit(lambda: self._combinations(item, looked_up))

    def _combinations(self, item: Any, looked_up: list[Any]) -> Iterator[Any]:
        """`output_fn(item, combination)` of every combination of the matches, in order."""
        choices = [value if type(value) is Matches else (value,) for value in looked_up]
        for combination in itertools.product(*choices):
            yield self._output_fn(item, list(combination))

    def save_to_snapshot(self) -> bool:
        if self.context.global_processor_index:
            return True
        return self.try_emit_to_snapshot(*_TABLES.entry(self.context, self._tables))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        self._tables = [dict(table) for table in _TABLES.saved(key, value).value]


def hash_join_collect_p(
    key_fn: Callable[[Any], Any], project_fn: Callable[[Any], Any]
) -> ProcessorFn:
    """A collector building the lookup table `key_fn(item) -> project_fn(item)`."""
    return lambda: HashJoinCollectP(key_fn, project_fn)


def hash_join_p(
    key_fns: Sequence[Callable[[Any], Any]], output_fn: Callable[[Any, list[Any]], Any]
) -> ProcessorFn:
    """A joiner: ordinal 0 is the primary input, ordinal i + 1 the table `key_fns[i]` looks up."""
    if not key_fns:
        raise ValueError("hash_join_p needs at least one key function (one per joined table)")
    return lambda: HashJoinP(key_fns, output_fn)
