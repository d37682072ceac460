"""Small processors for the runtime and LocalEngine tests (the processor library is separate)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from jetspark.core import Context, Inbox, Outbox, Processor, Watermark

_END = object()


class Emission:
    """Offers an iterable's items, keeping a refused item for the next `emit` call."""

    def __init__(self, items: Iterable[Any]) -> None:
        self._items = iter(items)
        self._held = next(self._items, _END)

    def emit(self, outbox: Outbox, ordinal: int | None = None) -> bool:
        """True once every item was accepted; False when the outbox refused one."""
        item = self._held
        while item is not _END:
            if not outbox.offer(item, ordinal):
                self._held = item
                return False
            item = next(self._items, _END)
        self._held = _END
        return True


class ScriptSource(Processor):
    """Emits `scripts[global index]` (items and Watermarks), then completes."""

    def __init__(self, scripts: dict[int, list[Any]]) -> None:
        self.scripts = scripts

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox
        self.emission = Emission(self.scripts.get(context.global_processor_index, []))

    def complete(self) -> bool:
        return self.emission.emit(self.outbox)


class ListSource(ScriptSource):
    """Emits its share of the engine list `name`: items at global index, + total parallelism..."""

    def __init__(self, name: str) -> None:
        super().__init__({})
        self.name = name

    def init(self, outbox: Outbox, context: Context) -> None:
        items = context.stores.get_list(self.name)
        self.outbox = outbox
        self.emission = Emission(items[context.global_processor_index :: context.total_parallelism])


class MapSource(ListSource):
    """Emits its share of the engine dict `name`'s items, sorted by key."""

    def init(self, outbox: Outbox, context: Context) -> None:
        items = sorted(context.stores.get_map(self.name).items())
        self.outbox = outbox
        self.emission = Emission(items[context.global_processor_index :: context.total_parallelism])


class ListSink(Processor):
    """Appends every item to the engine list `name`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def init(self, outbox: Outbox, context: Context) -> None:
        self.target = context.stores.get_list(self.name)

    def process(self, ordinal: int, inbox: Inbox) -> None:
        inbox.drain_to(self.target)


class MapSink(ListSink):
    """Puts every `(key, value)` item into the engine dict `name`."""

    def init(self, outbox: Outbox, context: Context) -> None:
        self.target = context.stores.get_map(self.name)  # type: ignore[assignment]

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self.target.update(inbox.queue)  # type: ignore[attr-defined]
        inbox.queue.clear()  # type: ignore[attr-defined]


class FlatMap(Processor):
    """Emits the items of `fn(item)` for every item; an item leaves the inbox once all went out."""

    def __init__(self, fn: Callable[[Any], Iterable[Any]], cooperative: bool = True) -> None:
        self.fn = fn
        self.cooperative = cooperative

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox
        self.emission: Emission | None = None

    def is_cooperative(self) -> bool:
        return self.cooperative

    def process(self, ordinal: int, inbox: Inbox) -> None:
        queue = inbox.queue  # type: ignore[attr-defined]
        while queue:
            if self.emission is None:
                self.emission = Emission(self.fn(queue[0]))
            if not self.emission.emit(self.outbox):
                return
            self.emission = None
            queue.popleft()


class SumByKey(Processor):
    """Sums `value_fn(item)` per `key_fn(item)`; emits `(key, total)` items when complete."""

    def __init__(
        self,
        key_fn: Callable[[Any], Any] = lambda item: item,
        value_fn: Callable[[Any], Any] = lambda item: 1,
    ) -> None:
        self.key_fn = key_fn
        self.value_fn = value_fn

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox
        self.totals: dict[Any, Any] = {}
        self.emission: Emission | None = None

    def process(self, ordinal: int, inbox: Inbox) -> None:
        totals, key_fn, value_fn = self.totals, self.key_fn, self.value_fn
        for item in inbox.queue:  # type: ignore[attr-defined]
            key = key_fn(item)
            totals[key] = totals.get(key, 0) + value_fn(item)
        inbox.queue.clear()  # type: ignore[attr-defined]

    def complete(self) -> bool:
        if self.emission is None:
            self.emission = Emission(self.totals.items())
        return self.emission.emit(self.outbox)


class Recorder(Processor):
    """A sink that logs what it sees into the engine list `name`, tagged with its global index:
    `(index, "item", ordinal, item)`, `(index, "wm", timestamp)`, `(index, "edge", ordinal)`."""

    def __init__(self, name: str = "recorded") -> None:
        self.name = name

    def init(self, outbox: Outbox, context: Context) -> None:
        self.log = context.stores.get_list(self.name)
        self.index = context.global_processor_index

    def process(self, ordinal: int, inbox: Inbox) -> None:
        index, log = self.index, self.log
        inbox.drain(lambda item: log.append((index, "item", ordinal, item)))

    def try_process_watermark(self, watermark: Watermark) -> bool:
        self.log.append((self.index, "wm", watermark.timestamp))
        return True

    def complete_edge(self, ordinal: int) -> bool:
        self.log.append((self.index, "edge", ordinal))
        return True


def received(log: list[tuple[Any, ...]], index: int) -> list[Any]:
    """The items processor `index` of a Recorder received, in order."""
    return [entry[3] for entry in log if entry[0] == index and entry[1] == "item"]


class Failing(Processor):
    """Raises in `callback` (init, process, complete, ...); records close() calls."""

    closed: list[int]

    def __init__(self, callback: str, closed: list[int], cooperative: bool = True) -> None:
        self.callback = callback
        self.closed = closed
        self.cooperative = cooperative
        self.index = -1

    def init(self, outbox: Outbox, context: Context) -> None:
        self.index = context.global_processor_index
        self._maybe_fail("init")

    def is_cooperative(self) -> bool:
        return self.cooperative

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self._maybe_fail("process")
        inbox.drain(lambda item: None)

    def complete(self) -> bool:
        self._maybe_fail("complete")
        return True

    def close(self) -> None:
        self.closed.append(self.index)
        self._maybe_fail("close")

    def _maybe_fail(self, callback: str) -> None:
        if self.callback == callback:
            raise ValueError(f"boom in {callback}")


class Endless(Processor):
    """A source that never completes; emits `item` every call until `stop` is set."""

    def __init__(self, stop: threading.Event | None = None, cooperative: bool = True) -> None:
        self.stop = stop
        self.cooperative = cooperative

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox
        self.count = 0

    def is_cooperative(self) -> bool:
        return self.cooperative

    def complete(self) -> bool:
        if self.outbox.offer(self.count):
            self.count += 1
        return self.stop is not None and self.stop.is_set()


def ship_to_executors(test_module: ModuleType) -> None:
    """Lets Spark executors, which cannot import the tests, unpickle the processors of
    `test_module` and of this module (pickled by value)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(test_module)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
