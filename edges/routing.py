"""Routing: which downstream processors an upstream processor feeds, and the routers that send
its output there (manual §8.1.4-8.1.5).

Processors are named by their global index `member * local_parallelism + local index`. A router
serves one upstream processor on one edge; its channels are those of `target_processors(...)`, in
that (ascending) order, and it moves items in chunks (lists), so per-item work happens only
where the policy needs it (a partitioned edge computes each item's partition). Control entries
(watermarks, the end-of-stream marker) always go to every channel, whatever the policy.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from jetspark.edges.policy import RoutingPolicy
from jetspark.partitioning import (
    HashCodePartitioner,
    MurmurHashPartitioner,
    PartitionAssignment,
    Partitioner,
    local_edge_processor_of_partition,
)


class Channel(Protocol):
    """Where a router puts what one downstream processor receives: a queue, or an exchange."""

    def room(self) -> int:
        """How many items (or control entries) the channel accepts now."""
        ...

    def push(self, chunk: list[Any]) -> None:
        """Appends a chunk of items, at most `room()` of them; the chunk is never mutated after."""
        ...

    def push_control(self, entry: Any) -> None:
        """Appends one control entry (a watermark, the end-of-stream marker); needs room 1."""
        ...


def target_processors(
    policy: RoutingPolicy,
    distributed: bool,
    upstream: int,
    upstream_parallelism: int,
    downstream_parallelism: int,
    member_count: int,
) -> list[int]:
    """The global indexes of the downstream processors that processor `upstream` is connected to.

    A distributed edge reaches every processor on every member; a local one those of the
    upstream's own member; an isolated one (local only) the local processors `j` with
    `j % upstream_parallelism == i % downstream_parallelism`, where `i` is the upstream's local
    index, so LP2 -> LP4, LP2 -> LP1 and LP3 -> LP2 all give every processor a fixed feeder set.
    """
    if distributed:
        return list(range(member_count * downstream_parallelism))
    member, local = divmod(upstream, upstream_parallelism)
    base = member * downstream_parallelism
    if policy is RoutingPolicy.ISOLATED:
        wanted = local % downstream_parallelism
        return [
            base + j for j in range(downstream_parallelism) if j % upstream_parallelism == wanted
        ]
    return list(range(base, base + downstream_parallelism))


def partition_table(
    distributed: bool, member_count: int, downstream_parallelism: int, partition_count: int
) -> tuple[int, ...]:
    """Partition id -> position of its processor in `target_processors(...)`.

    Distributed: the owning member's processor (positions are global indexes). Local: every
    member has its own processor per partition (positions are local indexes).
    """
    if distributed:
        assignment = PartitionAssignment(member_count, downstream_parallelism, partition_count)
        return tuple(assignment.global_processor(p) for p in range(partition_count))
    return tuple(
        local_edge_processor_of_partition(p, downstream_parallelism) for p in range(partition_count)
    )


class Router(abc.ABC):
    """Sends one upstream processor's items on one edge to its channels."""

    __slots__ = ("channels",)

    def __init__(self, channels: Sequence[Channel]) -> None:
        self.channels = list(channels)

    @abc.abstractmethod
    def route(self, items: list[Any], count: int) -> int:
        """Sends the prefix of `items[:count]` the channels have room for; returns its length."""

    def push_control(self, entry: Any) -> bool:
        """Sends `entry` to every channel, or to none when one is full (then returns False)."""
        channels = self.channels
        for channel in channels:
            if channel.room() < 1:
                return False
        for channel in channels:
            channel.push_control(entry)
        return True


class SingleTargetRouter(Router):
    """All items to one channel (all-to-one, or any policy with one candidate)."""

    __slots__ = ("_target",)

    def __init__(self, channels: Sequence[Channel], target: int) -> None:
        super().__init__(channels)
        self._target = self.channels[target]

    def route(self, items: list[Any], count: int) -> int:
        target = self._target
        count = min(count, target.room())
        if count:
            target.push(items[:count])
        return count


class RoundRobinRouter(Router):
    """Each item to the next channel in turn (unicast, isolated), skipping full channels."""

    __slots__ = ("_next",)

    def __init__(self, channels: Sequence[Channel], start: int) -> None:
        super().__init__(channels)
        self._next = start % len(self.channels)

    def route(self, items: list[Any], count: int) -> int:
        channels = self.channels
        n = len(channels)
        rooms = [channel.room() for channel in channels]
        low = min(rooms)
        if low:
            # every channel takes its share: item j goes to channel (next + j) % n, by slicing
            count = min(count, low * n)
            batch = items[:count]
            start = self._next
            for j in range(min(n, count)):
                channels[(start + j) % n].push(batch[j::n])
            self._next = (start + count) % n
            return count
        return self._route_around_full(items, count, rooms)

    def _route_around_full(self, items: list[Any], count: int, rooms: list[int]) -> int:
        """Item by item to the next channel with room, as long as any channel has room."""
        n = len(rooms)
        chunks: list[list[Any]] = [[] for _ in range(n)]
        position = self._next
        sent = 0
        free = sum(1 for room in rooms if room)
        while sent < count and free:
            while not rooms[position]:
                position = (position + 1) % n
            chunks[position].append(items[sent])
            rooms[position] -= 1
            if not rooms[position]:
                free -= 1
            position = (position + 1) % n
            sent += 1
        for channel, chunk in zip(self.channels, chunks, strict=True):
            if chunk:
                channel.push(chunk)
        self._next = position
        return sent


class BroadcastRouter(Router):
    """Every item to every channel (the same chunk object: items are shared within a member)."""

    __slots__ = ()

    def route(self, items: list[Any], count: int) -> int:
        count = min([count, *(channel.room() for channel in self.channels)])
        if count:
            chunk = items[:count]
            for channel in self.channels:
                channel.push(chunk)
        return count


class PartitionedRouter(Router):
    """Each item to the channel owning the partition of `key_fn(item)`.

    Stops at the first item whose channel is full, so items never overtake each other.
    """

    __slots__ = ("_targets_of",)

    def __init__(
        self,
        channels: Sequence[Channel],
        key_fn: Callable[[Any], Any],
        partitioner: Partitioner,
        partition_count: int,
        table: Sequence[int],
    ) -> None:
        super().__init__(channels)
        table = tuple(table)
        partition = partitioner.partition

        def computed_targets(batch: list[Any]) -> list[int]:
            return [table[partition(key_fn(x), partition_count)] for x in batch]

        if type(partitioner) is HashCodePartitioner:

            def targets_of(batch: list[Any]) -> list[int]:
                return [table[hash(key_fn(x)) % partition_count] for x in batch]

        elif type(partitioner) is MurmurHashPartitioner:
            memo = _TargetMemo(lambda key: table[partition(key, partition_count)])

            def targets_of(batch: list[Any]) -> list[int]:
                try:
                    return [memo[key_fn(x)] for x in batch]
                except TypeError:  # an unhashable key (a list), or one murmur cannot take
                    return computed_targets(batch)

        else:
            targets_of = computed_targets

        self._targets_of = targets_of

    def route(self, items: list[Any], count: int) -> int:
        channels = self.channels
        batch = items[:count]
        targets = self._targets_of(batch)
        rooms = [channel.room() for channel in channels]
        if min(rooms) < count:
            count = _fitting_prefix(targets, rooms)
        chunks: list[list[Any]] = [[] for _ in channels]
        appends = [chunk.append for chunk in chunks]
        for target, item in zip(targets, batch[:count], strict=False):
            appends[target](item)
        for channel, chunk in zip(channels, chunks, strict=True):
            if chunk:
                channel.push(chunk)
        return count


_MEMO_KEYS = 1 << 16
"""How many distinct keys a partitioned router remembers the target of."""
_MEMO_KEY_LENGTH = 128
"""The longest str or bytes key remembered: a full memo holds about 20 MB at most."""


class _TargetMemo(dict[Any, int]):
    """key -> target channel under the default partitioner, remembered for the first
    `_MEMO_KEYS` distinct int, str and bytes keys (the short ones): keys repeat (a word's every
    occurrence), and a dict lookup costs a tenth of msgpack + murmur3. Keys equal in a dict
    share their partition (`normalise_key`)."""

    __slots__ = ("_target_of",)

    def __init__(self, target_of: Callable[[Any], int]) -> None:
        super().__init__()
        self._target_of = target_of

    def __missing__(self, key: Any) -> int:
        target = self._target_of(key)
        if len(self) < _MEMO_KEYS and _rememberable(key):
            self[key] = target
        return target


def _rememberable(key: Any) -> bool:
    kind = type(key)
    return kind is int or ((kind is str or kind is bytes) and len(key) <= _MEMO_KEY_LENGTH)


def _fitting_prefix(targets: list[int], rooms: list[int]) -> int:
    """The length of the longest prefix of `targets` whose items all fit into `rooms`."""
    left = list(rooms)
    for i, target in enumerate(targets):
        if not left[target]:
            return i
        left[target] -= 1
    return len(targets)


def make_router(
    policy: RoutingPolicy,
    distributed: bool,
    channels: Sequence[Channel],
    upstream: int,
    *,
    key_fn: Callable[[Any], Any] | None = None,
    partitioner: Partitioner | None = None,
    partition_count: int = 0,
    table: Sequence[int] = (),
    all_to_one_partition: int | None = None,
) -> Router:
    """The router of processor `upstream` on an edge, over channels aligned with its targets.

    Unicast starts at channel `upstream % len(channels)`, so upstream processors begin their
    round-robin at different targets. With one channel every policy is the same move, so items
    skip the partition computation, except on a distributed partitioned edge where computing it
    checks on one member that the keys can be partitioned on many.
    """
    if policy is RoutingPolicy.PARTITIONED and (distributed or len(channels) > 1):
        assert key_fn is not None and partitioner is not None
        return PartitionedRouter(channels, key_fn, partitioner, partition_count, table)
    if policy is RoutingPolicy.ALL_TO_ONE:
        assert all_to_one_partition is not None
        return SingleTargetRouter(channels, table[all_to_one_partition])
    if len(channels) == 1:
        return SingleTargetRouter(channels, 0)
    if policy is RoutingPolicy.BROADCAST:
        return BroadcastRouter(channels)
    return RoundRobinRouter(channels, upstream)
