"""Named lists and maps inside a Spark task: the driver's contents shipped in, new writes out.

Sources read the contents the driver's stores had when the job started (shipped once per job
as a broadcast variable); what sinks add during the task goes back to the driver as result
records, never through a driver-side `collect()` of data between stages.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jetspark.core.serialization import encode_batch
from jetspark.core.spark.stages.records import LIST, MAP, RDD, result_record
from jetspark.core.stores import Stores

RESULT_BATCH = 4096
"""Items per result record; also how many a store gathers before the task sends them."""


class TaskStores(Stores):
    """Stores of one task, starting from a shipped copy of the driver's; reports what changed."""

    def __init__(self, shipped: dict[str, dict[str, Any]] | None, rdd_input: Any = None) -> None:
        super().__init__()
        self._shipped = shipped or {"lists": {}, "maps": {}}
        self._rdd_sinks: dict[str, list[Any]] = {}
        self.rdd_input = rdd_input
        """The task's RDD partition records, for the stage's `read_rdd_p` vertex (or None)."""

    def get_list(self, name: str) -> list[Any]:
        """The list called `name`, starting as a copy of the driver's."""
        with self._lock:
            if name not in self._lists:
                self._lists[name] = list(self._shipped["lists"].get(name, ()))
            return self._lists[name]

    def get_map(self, name: str) -> dict[Any, Any]:
        """The dict called `name`, starting as a copy of the driver's."""
        with self._lock:
            if name not in self._maps:
                self._maps[name] = dict(self._shipped["maps"].get(name, {}))
            return self._maps[name]

    def get_rdd_sink(self, name: str) -> list[Any]:
        """The items an RDD sink collects in this task, for `job.rdd(name)`."""
        return self._rdd_sinks.setdefault(name, [])

    def result_records(self, member: int, stage: int, *, at_least: int = 1) -> Iterator[Any]:
        """What this task added since the last call, as records of at most 4096 items, for each
        store holding `at_least` new items: list items, new or changed map entries, RDD-sink
        items. What is taken leaves the task's memory, so a task calls this after every round
        and its sinks never buffer more than a batch (the driver applies the records in order).

        A non-cooperative sink may write from its own thread meanwhile: a list loses exactly the
        items taken (items appended meanwhile stay); a map is copied at once (never iterated
        while it changes), and an entry written again after the copy stays for the next call.
        """
        for name, items in self._lists.items():
            start = len(self._shipped["lists"].get(name, ()))
            added = _take_from(items, start, at_least)
            if added:
                yield from _batched(member, stage, LIST, name, added)
        for name, entries in self._maps.items():
            if len(entries) >= at_least:
                before = self._shipped["maps"].get(name, {})
                current = entries.copy()
                changed = [(k, v) for k, v in current.items() if k not in before or before[k] != v]
                if len(changed) >= at_least:
                    for key, value in changed:
                        _remove_if_unchanged(entries, key, value)
                    yield from _batched(member, stage, MAP, name, changed)
        for name, items in self._rdd_sinks.items():
            taken = _take_from(items, 0, at_least)
            if taken:
                yield from _batched(member, stage, RDD, name, taken)


def _take_from(items: list[Any], start: int, at_least: int) -> list[Any]:
    """The items after `start`, removed from `items` (none when fewer than `at_least`, or
    than 1); items appended meanwhile stay."""
    count = len(items) - start
    if count < max(at_least, 1):
        return []
    taken = items[start : start + count]
    del items[start : start + count]
    return taken


_ABSENT = object()


def _remove_if_unchanged(entries: dict[Any, Any], key: Any, value: Any) -> None:
    """Removes `key` from `entries` unless another thread wrote it after `value` was taken; each
    step is one dict operation, so a write in between is never lost."""
    current = entries.pop(key, _ABSENT)
    if current is not value and current is not _ABSENT:
        entries.setdefault(key, current)  # written again: it goes in the next call


def _batched(member: int, stage: int, kind: str, name: str, items: list[Any]) -> Iterator[Any]:
    for start in range(0, len(items), RESULT_BATCH):
        payload = encode_batch(items[start : start + RESULT_BATCH], classes_by_value=True)
        yield result_record(member, stage, kind, name, payload)
