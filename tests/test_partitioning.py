"""Tests of jetspark.partitioning: stable partition ids, key normalisation, the assignment."""

from __future__ import annotations

import enum
import fractions
import json
import os
import pickle
import subprocess
import sys
import threading
from collections import Counter, OrderedDict, namedtuple

import mmh3
import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetspark.partitioning import (
    DEFAULT,
    DEFAULT_PARTITION_COUNT,
    HASH_CODE,
    HashCodePartitioner,
    MurmurHashPartitioner,
    PartitionAssignment,
    Partitioner,
    UnpartitionableKeyError,
    global_processor_of_partition,
    is_deterministic_across_processes,
    local_edge_processor_of_partition,
    local_processor_of_partition,
    member_of_partition,
    normalise_key,
    partition_id,
    partitions_of_global_processor,
)

FIX = (
    "use a key function that returns str, bytes, int, float, bool, None, Decimal, Fraction, "
    "date, datetime, time, timedelta, UUID, an Enum member, a frozen dataclass, or a tuple, "
    "list or frozenset of them; or give the edge your own partitioner: "
    "edge.partitioned(key_fn, partitioner)"
)

# (key, id with 271 partitions, full unsigned murmur3_32): a change of algorithm breaks these.
PINNED = [
    ("", 64, 408952885),
    ("a", 225, 3037308063),
    ("héllo wörld", 267, 1905001813),
    ("日本語", 33, 3774048742),
    ("\ud800", 85, 1553314362),
    (b"\x00\xff", 73, 1261532986),
    (0, 124, 1364076727),
    (-1, 148, 4251775245),
    (2**64 - 1, 172, 131834626),
    (-(2**63), 187, 3507823916),
    (1.5, 256, 2498479336),
    (None, 127, 1111242131),
    ((1, "a"), 22, 527456265),
    (("a", (2, b"x", None)), 270, 2410603806),
]

# Evaluated by repr in a child process, so every key must round-trip through repr.
CROSS_PROCESS_KEYS = [
    "word",
    "",
    "héllo wörld",
    "日本語テキスト",
    "emoji 🎉",
    "\ud800 lone surrogate",
    b"bytes",
    b"\x00\x01\xff",
    0,
    42,
    -7,
    2**63,
    1.5,
    -0.0,
    3.0,
    float("inf"),
    True,
    False,
    None,
    ("a", 1),
    ("a", ("b", (2.5, None, True)), b"c"),
    ["list", 1],
    (),
]

CHILD = """
import json, sys
from jetspark.partitioning import DEFAULT
keys = eval(sys.stdin.read(), {"inf": float("inf")})
print(json.dumps([DEFAULT.partition(k, 2**32) for k in keys]))
"""


def _ids_in_child(seed: str) -> list[int]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=repr(CROSS_PROCESS_KEYS),
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout)


def test_default_is_deterministic_across_processes() -> None:
    here = [DEFAULT.partition(k, 2**32) for k in CROSS_PROCESS_KEYS]
    assert _ids_in_child("1") == here
    assert _ids_in_child("2") == here


@pytest.mark.parametrize(("key", "expected", "full"), PINNED)
def test_pinned_partition_ids(key: object, expected: int, full: int) -> None:
    assert partition_id(key) == expected
    assert DEFAULT.partition(key, 2**32) == full


def test_algorithm_is_murmur3_over_msgpack() -> None:
    for key in ["a", 12345, (1, "a"), b"xyz", None]:
        expected = mmh3.hash(msgpack.packb(key), 0, False) % DEFAULT_PARTITION_COUNT
        assert partition_id(key) == expected


@pytest.mark.parametrize(
    "equal_keys",
    [
        (1, 1.0, True, np.int64(1), fractions.Fraction(2, 2)),
        (0, 0.0, -0.0, False),
        ((1, "a"), [1, "a"], (True, "a"), [1.0, "a"]),
        (("a", (1, 2)), ["a", [1.0, 2]], ("a", [True, 2])),
        (2.5, np.float64(2.5), np.float32(2.5), fractions.Fraction(5, 2)),
        (2**63, float(2**63)),
    ],
)
def test_keys_equal_in_a_dict_share_a_partition(equal_keys: tuple[object, ...]) -> None:
    ids = {partition_id(k, 2**32) for k in equal_keys}
    assert len(ids) == 1


def test_subclasses_and_enums_encode_as_their_value() -> None:
    class Colour(str, enum.Enum):
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    point = namedtuple("point", "x y")
    assert partition_id(Colour.RED) == partition_id("red")
    assert partition_id(Level.HIGH) == partition_id(3)
    assert partition_id(point(1, "a")) == partition_id((1, "a"))


def test_normalise_key() -> None:
    assert normalise_key([True, 2.0, [b"x", None, -0.0]]) == (1, 2, (b"x", None, 0))
    assert type(normalise_key(2.0)) is int
    assert normalise_key(2.5) == 2.5
    assert type(normalise_key(1e30)) is float  # beyond 64 bits: stays a float


@pytest.mark.parametrize(
    ("key", "type_name"),
    [
        ({1, 2}, "'set'"),
        ({"a": 1}, "'dict'"),
        (OrderedDict(a=1), "'OrderedDict'"),
        (object(), "'object'"),
        (2**70, "'int'"),
        (-(2**63) - 1, "'int'"),
        (("a", {1}), "'set'"),
        ((1, 2**64), "'int'"),
    ],
)
def test_unpartitionable_keys_raise_type_error(key: object, type_name: str) -> None:
    with pytest.raises(TypeError) as info:
        partition_id(key)
    assert isinstance(info.value, UnpartitionableKeyError)
    message = str(info.value)
    assert type_name in message
    assert FIX in message


def test_dict_refusal_explains_insertion_order() -> None:
    with pytest.raises(TypeError, match="insertion order"):
        partition_id({"a": 1})


def test_pickle_round_trip() -> None:
    copy = pickle.loads(pickle.dumps(DEFAULT))
    assert isinstance(copy, MurmurHashPartitioner)
    assert copy == DEFAULT
    assert hash(copy) == hash(DEFAULT)
    for key in CROSS_PROCESS_KEYS:
        assert copy.partition(key, 2**32) == DEFAULT.partition(key, 2**32)


def test_default_is_thread_safe() -> None:
    keys = [f"key-{i}" if i % 2 else (i, "x") for i in range(20_000)]
    expected = [DEFAULT.partition(k, 271) for k in keys]
    results: list[list[int]] = []

    def work() -> None:
        results.append([DEFAULT.partition(k, 271) for k in keys])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4


def test_hash_code_partitioner_is_hash_mod_n() -> None:
    for key in ["a", b"b", 12, -12, (1, "x"), None, 2**70, frozenset({1})]:
        for count in (1, 7, 271):
            assert HASH_CODE.partition(key, count) == hash(key) % count
    assert HashCodePartitioner() == HASH_CODE


def test_partitioner_protocol_and_determinism_flags() -> None:
    class Custom:
        def partition(self, key: object, partition_count: int) -> int:
            return 0

    assert isinstance(DEFAULT, Partitioner)
    assert isinstance(HASH_CODE, Partitioner)
    assert isinstance(Custom(), Partitioner)
    assert DEFAULT.deterministic_across_processes is True
    assert HASH_CODE.deterministic_across_processes is False
    assert is_deterministic_across_processes(DEFAULT)
    assert not is_deterministic_across_processes(HASH_CODE)
    assert is_deterministic_across_processes(Custom())


def test_partition_id_uses_the_given_partitioner_and_checks_the_count() -> None:
    assert partition_id("a", 10, HASH_CODE) == hash("a") % 10
    with pytest.raises(ValueError, match="partition_count"):
        partition_id("a", 0)


# --- hypothesis: ids in range, equal keys -> equal ids ---------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
)
keys = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.lists(inner, max_size=4), max_leaves=10
)


def _equal_twin(key: object) -> object:
    """Build a key equal to ``key`` in a dict but typed differently where Python allows it."""
    if isinstance(key, bool):
        return int(key)
    if isinstance(key, int) and float(key) == key:
        return float(key)
    if isinstance(key, float) and key.is_integer() and -(2**63) <= key <= 2**64 - 1:
        return int(key)
    if isinstance(key, tuple):
        return [_equal_twin(item) for item in key]
    if isinstance(key, list):
        return tuple(_equal_twin(item) for item in key)
    return key


def _tupled(key: object) -> object:
    """Turn lists into tuples, recursively, so a key compares with its twin like a dict would."""
    if isinstance(key, (tuple, list)):
        return tuple(_tupled(item) for item in key)
    return key


@settings(database=None)
@given(key=keys | st.floats(), partition_count=st.integers(min_value=1, max_value=2**32))
def test_ids_are_in_range(key: object, partition_count: int) -> None:
    assert 0 <= DEFAULT.partition(key, partition_count) < partition_count
    assert 0 <= HASH_CODE.partition(normalise_key(key), partition_count) < partition_count


@settings(database=None)
@given(key=keys)
def test_equal_keys_get_equal_ids(key: object) -> None:
    twin = _equal_twin(key)
    assert _tupled(twin) == _tupled(key)
    assert DEFAULT.partition(twin, 2**32) == DEFAULT.partition(key, 2**32)


# --- the assignment partition -> member -> processor ------------------------------------------

SHAPES = [(1, 1), (1, 4), (3, 2), (2, 8), (7, 5), (271, 1)]


def _partition_counts(member_count: int, local_parallelism: int) -> list[int]:
    processors = member_count * local_parallelism
    return sorted({processors, processors + 1, max(processors, DEFAULT_PARTITION_COUNT)})


@pytest.mark.parametrize(("member_count", "local_parallelism"), SHAPES)
def test_assignment_is_balanced_and_inverse_agrees(
    member_count: int, local_parallelism: int
) -> None:
    processors = member_count * local_parallelism
    for partition_count in _partition_counts(member_count, local_parallelism):
        plan = PartitionAssignment(member_count, local_parallelism, partition_count)
        owners = [plan.global_processor(p) for p in range(partition_count)]
        counts = Counter(owners)
        assert set(counts) == set(range(processors))  # every processor gets partitions
        assert max(counts.values()) - min(counts.values()) <= 1
        owned = [plan.partitions_of(g) for g in range(processors)]
        assert sorted(p for ps in owned for p in ps) == list(range(partition_count))
        for g, partitions in enumerate(owned):
            assert partitions == sorted(partitions)
            assert all(owners[p] == g for p in partitions)
            assert partitions == partitions_of_global_processor(
                g, member_count, local_parallelism, partition_count
            )
        for p in range(partition_count):
            member = member_of_partition(p, member_count)
            local = local_processor_of_partition(p, member_count, local_parallelism)
            assert (plan.member(p), plan.local_processor(p)) == (member, local)
            assert owners[p] == member * local_parallelism + local
            assert owners[p] == global_processor_of_partition(p, member_count, local_parallelism)


@pytest.mark.parametrize("local_parallelism", [1, 2, 5, 8])
def test_local_edge_assignment_is_balanced(local_parallelism: int) -> None:
    counts = Counter(
        local_edge_processor_of_partition(p, local_parallelism)
        for p in range(DEFAULT_PARTITION_COUNT)
    )
    assert set(counts) == set(range(local_parallelism))
    assert max(counts.values()) - min(counts.values()) <= 1


def test_fewer_partitions_than_processors_leaves_surplus_idle() -> None:
    plan = PartitionAssignment(member_count=3, local_parallelism=4, partition_count=5)
    owners = {plan.global_processor(p) for p in range(5)}
    assert len(owners) == 5
    assert all(0 <= g < 12 for g in owners)
    assert sum(len(plan.partitions_of(g)) for g in range(12)) == 5


@pytest.mark.parametrize(
    "shape", [(0, 1, 271), (1, 0, 271), (1, 1, 0), (2, -1, 271), (2.0, 1, 271)]
)
def test_assignment_rejects_bad_shapes(shape: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError, match="must be an int >= 1"):
        PartitionAssignment(*shape)


def test_assignment_is_frozen_and_picklable() -> None:
    plan = PartitionAssignment(2, 3)
    assert plan.partition_count == DEFAULT_PARTITION_COUNT
    assert pickle.loads(pickle.dumps(plan)) == plan
    with pytest.raises(AttributeError):
        plan.member_count = 5  # type: ignore[misc]
