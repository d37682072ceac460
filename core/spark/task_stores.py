"""Named lists and maps inside a Spark task: the driver's contents shipped in, new writes out.

Sources read the contents the driver's stores had when the job started (shipped once per job
as a broadcast variable); what sinks add during the task goes back to the driver as result
records, never through a driver-side `collect()` of data between stages.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jetspark.core.serialization import encode_batch
from jetspark.core.spark.records import LIST, MAP, RDD, result_record
from jetspark.core.stores import Stores

_BATCH = 4096


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

    def result_records(self, member: int, stage: int) -> Iterator[Any]:
        """What this task added: new list items, new or changed map entries, RDD-sink items."""
        for name, items in self._lists.items():
            added = items[len(self._shipped["lists"].get(name, ())) :]
            yield from _batched(member, stage, LIST, name, added)
        for name, entries in self._maps.items():
            before = self._shipped["maps"].get(name, {})
            changed = [(k, v) for k, v in entries.items() if k not in before or before[k] != v]
            yield from _batched(member, stage, MAP, name, changed)
        for name, items in self._rdd_sinks.items():
            yield from _batched(member, stage, RDD, name, items)


def _batched(member: int, stage: int, kind: str, name: str, items: list[Any]) -> Iterator[Any]:
    for start in range(0, len(items), _BATCH):
        payload = encode_batch(items[start : start + _BATCH])
        yield result_record(member, stage, kind, name, payload)
