"""Rescaled restore: a snapshot of N processor instances restored into M, as after a rescale.

The input is routed to the instances as a partitioned edge would (DEFAULT partitioner over
`key_fn(item)`, the default partition assignment with one processor per member); the N instances
process the input up to a cut point and save a snapshot; its keyed entries go to the owner of
their key's partition among M new instances, `broadcast_key` entries to all of them; the M
instances restore, process the rest of the input and complete. Their union, without
watermarks, must match the expected output: as a multiset (instances interleave arbitrarily and
each forwards every watermark), or by the test's own output checker when it set one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from jetspark.core.processor import Processor
from jetspark.core.snapshot_keys import BroadcastKey, snapshot_targets
from jetspark.core.test_support.boxes import TestProcessorContext
from jetspark.core.test_support.driver import Driver, Settings, VerificationFailure
from jetspark.core.test_support.inputs import InputItem, show
from jetspark.core.test_support.modes import ONE_ITEM
from jetspark.core.test_support.report import (
    OutputChecker,
    exact_equality,
    mismatch_message,
    same_items_any_order,
)
from jetspark.core.test_support.source import ProcessorSource
from jetspark.core.watermark import Watermark
from jetspark.partitioning import DEFAULT, DEFAULT_PARTITION_COUNT, PartitionAssignment

KeyFn = Callable[[Any], Any]
Entries = list[tuple[Any, Any]]


@dataclass(frozen=True)
class Rescale:
    """One rescaled-restore check: N instances snapshot, M instances restore."""

    from_parallelism: int
    to_parallelism: int
    key_fn: KeyFn | Sequence[KeyFn | None]
    """The partitioning key function, or one per inbound ordinal (None: a broadcast edge)."""

    def __post_init__(self) -> None:
        for name in ("from_parallelism", "to_parallelism"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    def key_fns(self, ordinal_count: int) -> tuple[KeyFn | None, ...]:
        """The key function of each of `ordinal_count` inbound ordinals."""
        if not isinstance(self.key_fn, Sequence):
            return (self.key_fn,) * ordinal_count
        if len(self.key_fn) != ordinal_count:
            raise ValueError(f"{len(self.key_fn)} key functions for {ordinal_count} inputs")
        return tuple(self.key_fn)


@dataclass
class _Saved:
    """What one of the N instances left behind: its snapshot, and the partitions it was given."""

    index: int
    entries: Entries
    partitions: set[int]


class RescaledRun:
    """Runs one Rescale over the mixed input and checks the union of the outputs."""

    def __init__(
        self,
        rescale: Rescale,
        key_fns: tuple[KeyFn | None, ...],
        source: ProcessorSource,
        settings: Settings,
        expected: Sequence[list[Any]],
        call_complete: bool,
        checker: OutputChecker,
    ) -> None:
        self.rescale = rescale
        self.key_fns = key_fns
        self.source = source
        self.settings = settings
        self.expected = expected
        self.call_complete = call_complete
        self.checker = same_items_any_order if checker is exact_equality else checker
        """The test's checker; its default, ordered equality, cannot hold across instances."""

    def verify(self, mixed: Sequence[InputItem]) -> None:
        """Checks the rescale with the snapshot taken mid-input and after all input."""
        for cut in sorted({len(mixed) // 2, len(mixed)}):
            self._verify_cut(mixed, cut)

    def _verify_cut(self, mixed: Sequence[InputItem], cut: int) -> None:
        n, m = self.rescale.from_parallelism, self.rescale.to_parallelism
        when = f"after {mixed[cut - 1]}" if cut else "before any input"
        name = f"rescaled restore from {n} to {m} processors, snapshot taken {when}"
        drivers: list[Driver] = []
        saved = [self._before(name, mixed[:cut], i, drivers) for i in range(n)]
        routed = self._route_entries(saved, PartitionAssignment(m, 1))
        for j in range(m):
            self._after(name, mixed[cut:], j, routed[j], drivers)
        self._check(name, drivers, self._key_notes(saved))

    def _before(
        self, name: str, items: Sequence[InputItem], index: int, drivers: list[Driver]
    ) -> _Saved:
        """Runs old instance `index` over its share of `items` and saves its snapshot."""
        n = self.rescale.from_parallelism
        assignment = PartitionAssignment(n, 1)
        share = list(self._share(items, index, assignment))
        with self.source.session(n, 1) as new_processor:
            driver = self._driver(new_processor, index, n, f"{name}: processor {index} of {n}")
            driver.start()
            driver.feed(share, take_snapshots=False)
            entries = driver.save_snapshot()
            driver.close()
        drivers.append(driver)
        keyed = [(key_fn, e.item) for e in share if (key_fn := self._key_fn(e)) is not None]
        return _Saved(index, entries, {_partition_of(key_fn(item)) for key_fn, item in keyed})

    def _after(
        self,
        name: str,
        items: Sequence[InputItem],
        index: int,
        entries: Entries,
        drivers: list[Driver],
    ) -> None:
        """Runs new instance `index`: restores its entries, processes its share, completes."""
        m = self.rescale.to_parallelism
        share = list(self._share(items, index, PartitionAssignment(m, 1)))
        with self.source.session(m, 1) as new_processor:
            driver = self._driver(new_processor, index, m, f"{name}: new processor {index} of {m}")
            driver.start()
            driver.load_snapshot(entries, "the rescaled restore")
            driver.feed(share, take_snapshots=False)
            if self.call_complete:
                driver.complete(take_snapshots=False)
            driver.close()
        drivers.append(driver)

    def _driver(
        self, new_processor: Callable[[int], Processor], index: int, count: int, name: str
    ) -> Driver:
        context = TestProcessorContext(
            vertex_name=self.source.vertex_name,
            total_parallelism=count,
            member_count=count,
            member_index=index,
            global_processor_index=index,
        )
        return Driver(
            lambda: new_processor(index), context, self.settings, ONE_ITEM, len(self.expected), name
        )

    def _share(
        self, items: Sequence[InputItem], index: int, assignment: PartitionAssignment
    ) -> Iterator[InputItem]:
        """The items a partitioned edge gives processor `index`; broadcast ones go to all."""
        for entry in items:
            key_fn = self._key_fn(entry)
            if (
                key_fn is None
                or assignment.global_processor(_partition_of(key_fn(entry.item))) == index
            ):
                yield entry

    def _key_fn(self, entry: InputItem) -> KeyFn | None:
        if isinstance(entry.item, Watermark):
            return None
        return self.key_fns[entry.ordinal]

    @staticmethod
    def _route_entries(saved: Sequence[_Saved], assignment: PartitionAssignment) -> list[Entries]:
        """Deals every saved entry to the new instances that restore it."""
        routed: list[Entries] = [[] for _ in range(assignment.member_count)]
        for old in saved:
            for key, value in old.entries:
                for target in snapshot_targets(key, assignment):
                    routed[target].append((key, value))
        return routed

    def _key_notes(self, saved: Sequence[_Saved]) -> list[str]:
        """Notes on snapshot keys that no item routed to their saver had: not partitioning keys."""
        savers: dict[str, list[int]] = {}  # by repr: a key may be unhashable (a list)
        for old in saved:
            for key, _ in old.entries:
                if _foreign(key, old.partitions):
                    savers.setdefault(show(key), []).append(old.index)
        n = self.rescale.from_parallelism
        return [
            f"snapshot key {key} was saved by processor(s) {indexes} of {n}, but no item "
            "routed to them has that key: on restore a keyed entry goes only to the processor "
            "that owns its key's partition, so save per-key state under the partitioning key "
            "(one entry per key), and state every processor needs under broadcast_key(key)"
            for key, indexes in savers.items()
        ]

    def _check(self, name: str, drivers: Sequence[Driver], notes: list[str]) -> None:
        for ordinal, expected in enumerate(self.expected):
            actual = _without_watermarks(item for d in drivers for item in d.outputs[ordinal])
            wanted = _without_watermarks(expected)
            if self.checker(wanted, actual):
                continue
            hints = notes + [note for driver in drivers for note in driver.notes]
            own_checker = self.checker is not same_items_any_order
            compared = "by the output checker" if own_checker else "any order"
            headline = (
                f"output on ordinal {ordinal} does not match in the {name} "
                f"(union of all instances, {compared}, watermarks left out)"
            )
            message = mismatch_message(headline, wanted, actual, (), True, hints)
            raise VerificationFailure(message)


def _without_watermarks(items: Iterable[Any]) -> list[Any]:
    return [item for item in items if not isinstance(item, Watermark)]


def _foreign(key: Any, partitions: set[int]) -> bool:
    """True for a keyed entry whose key's partition none of its saver's input items had."""
    return (
        bool(partitions)
        and not isinstance(key, BroadcastKey)
        and (_partition_of(key) not in partitions)
    )


def _partition_of(key: Any) -> int:
    return DEFAULT.partition(key, DEFAULT_PARTITION_COUNT)
