"""Unit tests of routing: target sets, partition tables and the routers (edges/routing.py)."""

from __future__ import annotations

import pytest

from jetspark.edges import RoutingPolicy
from jetspark.edges.routing import (
    BroadcastRouter,
    PartitionedRouter,
    RoundRobinRouter,
    SingleTargetRouter,
    make_router,
    partition_table,
    target_processors,
)
from jetspark.partitioning import DEFAULT, HASH_CODE, PartitionAssignment

ISOLATED, UNICAST = RoutingPolicy.ISOLATED, RoutingPolicy.UNICAST


class Channel:
    """Records pushes; `free` is its room."""

    def __init__(self, free: int = 1000) -> None:
        self.items: list[object] = []
        self.controls: list[object] = []
        self.free = free

    def room(self) -> int:
        return self.free

    def push(self, chunk: list[object]) -> None:
        assert len(chunk) <= self.free
        self.items.extend(chunk)
        self.free -= len(chunk)

    def push_control(self, entry: object) -> None:
        self.controls.append(entry)
        self.free -= 1


@pytest.mark.parametrize(
    ("lp_up", "lp_down", "expected"),
    [
        (2, 4, {0: [0, 2], 1: [1, 3]}),
        (2, 1, {0: [0], 1: [0]}),
        (3, 2, {0: [0], 1: [1], 2: [0]}),
        (2, 2, {0: [0], 1: [1]}),
        (1, 3, {0: [0, 1, 2]}),
    ],
)
def test_isolated_targets_follow_the_modulo_rule(
    lp_up: int, lp_down: int, expected: dict[int, list[int]]
) -> None:
    got = {i: target_processors(ISOLATED, False, i, lp_up, lp_down, 1) for i in range(lp_up)}
    assert got == expected


def test_isolated_targets_stay_on_the_upstream_member() -> None:
    # member 1, local index 1, LP 2 -> LP 4: local targets 1 and 3 on member 1
    assert target_processors(ISOLATED, False, 3, 2, 4, 2) == [5, 7]


def test_local_edges_reach_the_own_member_and_distributed_ones_all() -> None:
    assert target_processors(UNICAST, False, 5, 2, 3, 3) == [6, 7, 8]
    assert target_processors(UNICAST, True, 5, 2, 3, 3) == list(range(9))


def test_partition_tables_use_the_partition_assignment() -> None:
    distributed = partition_table(True, 3, 2, 271)
    assignment = PartitionAssignment(3, 2, 271)
    assert distributed == tuple(assignment.global_processor(p) for p in range(271))
    assert partition_table(False, 3, 2, 271) == tuple(p % 2 for p in range(271))


def test_round_robin_sprays_item_by_item_from_the_start_offset() -> None:
    channels = [Channel(), Channel(), Channel()]
    router = RoundRobinRouter(channels, start=4)  # 4 % 3: starts at channel 1
    assert router.route(list(range(7)), 7) == 7
    assert router.route([7, 8], 2) == 2  # continues where it stopped
    assert [c.items for c in channels] == [[2, 5, 8], [0, 3, 6], [1, 4, 7]]


def test_round_robin_routes_around_a_full_channel_and_stops_when_all_are_full() -> None:
    channels = [Channel(1), Channel(0), Channel(2)]
    router = RoundRobinRouter(channels, start=0)
    assert router.route(list(range(5)), 5) == 3
    assert [c.items for c in channels] == [[0], [], [1, 2]]


def test_broadcast_sends_the_prefix_every_channel_has_room_for() -> None:
    channels = [Channel(5), Channel(2)]
    assert BroadcastRouter(channels).route([1, 2, 3], 3) == 2
    assert [c.items for c in channels] == [[1, 2], [1, 2]]


def test_control_entries_go_to_all_channels_or_none() -> None:
    channels = [Channel(1), Channel(0)]
    router = SingleTargetRouter(channels, 0)
    assert not router.push_control("wm")
    assert [c.controls for c in channels] == [[], []]
    channels[1].free = 1
    assert router.push_control("wm")
    assert [c.controls for c in channels] == [["wm"], ["wm"]]


@pytest.mark.parametrize("partitioner", [DEFAULT, HASH_CODE])
def test_partitioned_routing_sends_each_item_to_its_partition_owner(partitioner: object) -> None:
    table = partition_table(True, 2, 2, 271)
    channels = [Channel() for _ in range(4)]
    router = PartitionedRouter(channels, lambda item: item[0], partitioner, 271, table)
    items = [(f"k{i % 17}", i) for i in range(100)]
    assert router.route(items, 100) == 100
    for item in items:
        owner = table[partitioner.partition(item[0], 271)]  # type: ignore[attr-defined]
        assert item in channels[owner].items
    assert sum(len(c.items) for c in channels) == 100


@pytest.mark.parametrize(
    "keys",
    [
        [f"word{i}" for i in range(3 * (1 << 16))],  # more distinct keys than the router keeps
        [["unhashable", i % 5] for i in range(50)],  # partitioned as the tuple of the same items
        [1, 1.0, True, ("k", 1), ("k", 1.0), "1", b"1", None, "x" * 200] * 3,  # equal: one owner
    ],
    ids=["many", "lists", "equal"],
)
def test_default_partitioned_routing_matches_the_partitioner_for_any_key(keys: list) -> None:
    table = partition_table(True, 3, 2, 271)
    channels = [Channel(len(keys)) for _ in range(6)]
    router = PartitionedRouter(channels, lambda item: item[0], DEFAULT, 271, table)
    items = [(key, n) for n, key in enumerate(keys)]
    for start in range(0, len(items), 1024):
        batch = items[start : start + 1024]
        assert router.route(batch, len(batch)) == len(batch)
    for owner, channel in enumerate(channels):
        expected = [item for item in items if table[DEFAULT.partition(item[0], 271)] == owner]
        assert channel.items == expected


def test_partitioned_routing_stops_at_the_first_item_whose_channel_is_full() -> None:
    table = tuple(p % 2 for p in range(4))
    channels = [Channel(1), Channel(10)]
    router = PartitionedRouter(channels, lambda item: item, HASH_CODE, 4, table)
    assert router.route([0, 1, 2, 3, 5], 5) == 2  # item 2 would be the second for channel 0
    assert [c.items for c in channels] == [[0], [1]]


def test_make_router_picks_the_router_of_the_policy() -> None:
    one, two = [Channel()], [Channel(), Channel()]
    assert isinstance(make_router(UNICAST, False, one, 0), SingleTargetRouter)
    assert isinstance(make_router(UNICAST, False, two, 0), RoundRobinRouter)
    assert isinstance(make_router(RoutingPolicy.BROADCAST, True, two, 0), BroadcastRouter)
    partitioned = dict(key_fn=lambda x: x, partitioner=DEFAULT, partition_count=4, table=(0,) * 4)
    # one candidate: no partition to compute, unless the edge is distributed (keys get checked)
    assert isinstance(
        make_router(RoutingPolicy.PARTITIONED, False, one, 0, **partitioned), SingleTargetRouter
    )
    assert isinstance(
        make_router(RoutingPolicy.PARTITIONED, True, one, 0, **partitioned), PartitionedRouter
    )
    all_to_one = make_router(
        RoutingPolicy.ALL_TO_ONE, True, two, 0, table=(1, 0), all_to_one_partition=0
    )
    assert isinstance(all_to_one, SingleTargetRouter)
    all_to_one.route(["x"], 1)
    assert [c.items for c in two] == [[], ["x"]]
