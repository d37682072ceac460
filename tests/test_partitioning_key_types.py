"""The default partitioner on the standard library's immutable key types (issue #43): keys equal
in a dict share a partition in every process; other types are refused naming the fix."""

from __future__ import annotations

import enum
import json
import math
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from itertools import combinations
from typing import Any, NamedTuple
from uuid import UUID
from zoneinfo import ZoneInfo

import msgpack
import pytest
from runtime_processors import ListSource, MapSink, SumByKey

from jetspark.core import DAG, JobStatus, LocalEngine
from jetspark.edges import between
from jetspark.partitioning import MurmurHashPartitioner, UnpartitionableKeyError, normalise_key

PARTITIONER = MurmurHashPartitioner()


class Colour(enum.Enum):
    RED = 1
    GREEN = 2


class Level(enum.IntEnum):
    ONE = 1


class Mode(str, enum.Enum):  # what enum.StrEnum (3.11+) is
    RED = "red"


class Perm(enum.IntFlag):
    READ = 1
    WRITE = 2


class Shade(enum.Flag):
    A = 1
    B = 2


class Pair(NamedTuple):
    left: Any
    right: Any


@dataclass(frozen=True)
class Point:
    x: Any
    y: Any
    note: str = field(default="", compare=False)


@dataclass
class Box:
    content: Any


class Plain:
    pass


UTC = timezone.utc
NEW_YORK = ZoneInfo("America/New_York")
AMBIGUOUS = datetime(2021, 11, 7, 1, 30, tzinfo=NEW_YORK)  # clocks went back at 2:00
NOON_UTC = datetime(2020, 2, 29, 12, 30, tzinfo=UTC)
ID = UUID("12345678-1234-5678-1234-567812345678")

# Each group holds keys equal as dict keys (checked below), often of different types.
EQUAL_GROUPS: list[tuple[Any, ...]] = [
    (1, 1.0, True, Decimal(1), Decimal("1.000"), Fraction(3, 3), Level.ONE, Perm.READ),
    (0, -0.0, False, Decimal("-0"), Decimal("0E+5"), Fraction(0)),
    (0.5, Decimal("0.5"), Decimal("0.50"), Fraction(1, 2)),
    (Decimal("0.1"), Decimal("0.10"), Fraction(1, 10)),
    (Decimal("1.10"), Decimal("1.1"), Fraction(11, 10)),
    (-2.25, Decimal("-2.25"), Fraction(-9, 4)),
    (Fraction(1, 3), Fraction(2, 6)),
    (2**60 + 1, Decimal(2**60 + 1), Fraction(2**60 + 1)),
    (float(2**70), Decimal(2**70), Fraction(2**70)),
    (2.0**-70, Decimal(2.0**-70), Fraction(1, 2**70)),
    (math.inf, Decimal("Infinity")),
    ("red", Mode.RED),
    (Colour.RED, Colour(1), Colour["RED"]),
    (Shade.A | Shade.B, Shade(3)),
    (Perm.READ | Perm.WRITE, 3),
    (date(2020, 2, 29), date.fromisoformat("2020-02-29")),
    (datetime(2020, 2, 29, 12, 30), datetime(2020, 2, 29, 12, 30, fold=1)),
    (
        NOON_UTC,
        NOON_UTC.astimezone(timezone(timedelta(hours=9))),
        NOON_UTC.astimezone(ZoneInfo("Europe/Paris")),
    ),
    (AMBIGUOUS, AMBIGUOUS.replace(fold=1)),
    (time(23, 59, 59, 999999), time(23, 59, 59, 999999, fold=1)),
    (
        time(12, tzinfo=timezone(timedelta(hours=1))),
        time(11, tzinfo=UTC),
        time(6, 30, tzinfo=timezone(-timedelta(hours=4, minutes=30))),
    ),
    (timedelta(days=1), timedelta(hours=24), timedelta(microseconds=86_400_000_000)),
    (timedelta(seconds=-1), timedelta(days=-1, seconds=86_399)),
    (ID, UUID(int=ID.int), UUID(bytes=ID.bytes)),
    (Point(1, Decimal("0.5"), note="a"), Point(True, Fraction(1, 2), note="b")),
    (frozenset({"a", "b", 1}), frozenset({"b", 1.0, "a"}), frozenset({Decimal(1), "a", "b"})),
    (frozenset({frozenset({1}), (2, "x")}), frozenset({(2.0, "x"), frozenset({True})})),
    (Pair(1, date(2020, 1, 1)), (1, date(2020, 1, 1)), (Level.ONE, date(2020, 1, 1))),
    (
        ("k", Colour.GREEN, (Decimal("0.5"), NOON_UTC), frozenset({ID})),
        ("k", Colour.GREEN, (0.5, NOON_UTC.astimezone(NEW_YORK)), frozenset({UUID(int=ID.int)})),
    ),
]

# Not equal to anything else (NaN not even to itself), but partitioned alike everywhere.
OTHER_KEYS: list[Any] = [Decimal("NaN"), math.nan, datetime.max, timedelta.min, time.min]


def all_keys() -> list[Any]:
    """Every key of this module, in one order; the child process rebuilds the same list."""
    return [key for group in EQUAL_GROUPS for key in group] + OTHER_KEYS


def partitions() -> list[int]:
    """The partition of each of ``all_keys()`` among 271 partitions."""
    return [PARTITIONER.partition(key, 271) for key in all_keys()]


@pytest.mark.parametrize("group", EQUAL_GROUPS, ids=lambda group: type(group[0]).__name__)
def test_equal_keys_normalise_alike_and_share_a_partition(group: tuple[Any, ...]) -> None:
    for a, b in combinations(group, 2):
        assert a == b and hash(a) == hash(b), (a, b)  # the group really is equal in a dict
    assert len({msgpack.packb(normalise_key(key)) for key in group}) == 1
    assert len({PARTITIONER.partition(key, 271) for key in group}) == 1


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (Decimal("0.1"), 0.1),
        (date(2020, 1, 1), datetime(2020, 1, 1)),
        (datetime(2020, 1, 1), datetime(2020, 1, 1, tzinfo=UTC)),
        (time(12), time(12, tzinfo=UTC)),
        (Colour.RED, 1),
        (Colour.RED, Mode.RED),
        (Point(1, 2), (1, 2)),
        (frozenset({1, 2}), (1, 2)),
        (ID, ID.bytes),
        (timedelta(0), 0),
    ],
)
def test_unequal_keys_of_different_types_are_told_apart(a: Any, b: Any) -> None:
    assert a != b
    assert normalise_key(a) != normalise_key(b)


def test_partitions_are_the_same_in_a_process_with_another_hash_seed() -> None:
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    child = (
        "import importlib, json, sys; "
        "print(json.dumps(importlib.import_module(sys.argv[1]).partitions()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", child, __name__],
        cwd=os.path.dirname(os.path.abspath(__file__)),
        env={**os.environ, "PYTHONHASHSEED": seed},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == partitions()


@pytest.mark.parametrize(
    ("key", "type_name", "reason"),
    [
        (Plain(), "'Plain'", "knows no encoding"),
        (Box(1), "'Box'", "frozen=True"),
        ({1, 2}, "'set'", "a frozenset is accepted"),
        ({"a": 1}, "'dict'", "insertion order"),
        (("a", Box(1)), "'Box'", "frozen=True"),
        (frozenset({Plain()}), "'Plain'", "knows no encoding"),
        (Decimal("sNaN"), "'Decimal'", "signalling NaN"),
        (Fraction(1, 3 * 2**70), "'Fraction'", "64-bit range"),
        (Decimal("1e-999999"), "'Decimal'", "64-bit range"),
    ],
)
def test_other_types_are_refused_naming_the_type_and_the_fix(
    key: Any, type_name: str, reason: str
) -> None:
    with pytest.raises(UnpartitionableKeyError) as info:
        PARTITIONER.partition(key, 271)
    message = str(info.value)
    assert type_name in message and reason in message
    assert "a frozen dataclass" in message and "edge.partitioned(key_fn, partitioner)" in message


def test_grouping_on_three_members_counts_like_a_python_counter() -> None:
    items = [key for i, group in enumerate(EQUAL_GROUPS) for key in group * (i % 3 + 1)]
    dag = DAG("count by key")
    source = dag.new_vertex("source", lambda: ListSource("keys"), 1)
    accumulate = dag.new_vertex("accumulate", SumByKey, 2)
    combine = dag.new_vertex("combine", lambda: SumByKey(lambda e: e[0], lambda e: e[1]), 2)
    sink = dag.new_vertex("sink", lambda: MapSink("counts"), 1)
    dag.edge(between(source, accumulate))
    dag.edge(between(accumulate, combine).distributed().partitioned(lambda entry: entry[0]))
    dag.edge(between(combine, sink))
    engine = LocalEngine(members=3)
    engine.get_list("keys").extend(items)
    job = engine.new_job(dag)
    job.join(timeout=60)
    assert job.status is JobStatus.COMPLETED
    counts = engine.get_map("counts")
    assert counts == dict(Counter(items))
