"""Named in-memory lists and dicts of an engine: Jet's IList/IMap role for sources and sinks."""

from __future__ import annotations

import threading
from typing import Any


class Stores:
    """Lists and dicts by name, created empty on first use and shared by every job of the engine.

    Processors reach them through `context.stores`, tests and examples through the engine, so a
    job needs no files. The lock only guards creation; appending to a list or setting a key is
    atomic in CPython, which is all concurrent sinks need.
    """

    def __init__(self) -> None:
        self._lists: dict[str, list[Any]] = {}
        self._maps: dict[str, dict[Any, Any]] = {}
        self._lock = threading.Lock()

    def get_list(self, name: str) -> list[Any]:
        """The list called `name`, created empty if it does not exist yet."""
        with self._lock:
            return self._lists.setdefault(name, [])

    def get_map(self, name: str) -> dict[Any, Any]:
        """The dict called `name`, created empty if it does not exist yet."""
        with self._lock:
            return self._maps.setdefault(name, {})

    def get_rdd_sink(self, name: str) -> list[Any]:
        """Where an RDD sink writes; on an in-process engine simply the list called `name`."""
        return self.get_list(name)

    def contents(self) -> dict[str, dict[str, Any]]:
        """The non-empty lists and maps, for shipping into the tasks of a Spark job."""
        with self._lock:
            return {
                "lists": {name: list(items) for name, items in self._lists.items() if items},
                "maps": {name: dict(entries) for name, entries in self._maps.items() if entries},
            }

    def __repr__(self) -> str:
        return f"Stores(lists={sorted(self._lists)}, maps={sorted(self._maps)})"
