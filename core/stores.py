"""Named in-memory lists and dicts of an engine: Jet's IList/IMap role for sources and sinks."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
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

    def contents(
        self, only: Collection[tuple[str, str]] | None = None
    ) -> dict[str, dict[str, Any]]:
        """The non-empty lists and maps, for shipping into the tasks of a Spark job; with `only`,
        just those of its `("list", name)` and `("map", name)` pairs."""
        with self._lock:
            return {
                "lists": _copies(self._lists, list, "list", only),
                "maps": _copies(self._maps, dict, "map", only),
            }

    def __repr__(self) -> str:
        return f"Stores(lists={sorted(self._lists)}, maps={sorted(self._maps)})"


def _copies(
    stores: dict[str, Any],
    copy: Callable[[Any], Any],
    kind: str,
    only: Collection[tuple[str, str]] | None,
) -> dict[str, Any]:
    """Copies of the non-empty `stores` (of `kind`), all or those `only` names."""
    return {
        name: copy(items)
        for name, items in stores.items()
        if items and (only is None or (kind, name) in only)
    }
