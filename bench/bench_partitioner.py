"""Keys per second of the DEFAULT partitioner against Python's hash(), over the same 100k keys.

Run by explicit path: ``pytest bench/bench_partitioner.py --benchmark-only``. Each round routes
all keys once; keys/s = KEY_COUNT / mean (also stored as ``extra_info["keys_per_s"]``).
Goal: >= 1M str keys/s for DEFAULT.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jetspark.partitioning import DEFAULT, DEFAULT_PARTITION_COUNT

KEY_COUNT = 100_000
KEYS: dict[str, list[object]] = {
    "str": [f"word-{i}" for i in range(KEY_COUNT)],
    "int": list(range(-KEY_COUNT // 2, KEY_COUNT // 2)),
    "tuple": [(f"user-{i % 1000}", i) for i in range(KEY_COUNT)],
}


def route_default(keys: list[object]) -> None:
    """Route every key with DEFAULT, as the edge routing code does per item."""
    partition = DEFAULT.partition
    for key in keys:
        partition(key, DEFAULT_PARTITION_COUNT)


def route_hash(keys: list[object]) -> None:
    """Route every key with Python's hash(), the baseline."""
    for key in keys:
        hash(key) % DEFAULT_PARTITION_COUNT


def _measure(benchmark, route: Callable[[list[object]], None], kind: str) -> None:
    """Benchmark one routing function over one kind of key and record its keys/s."""
    benchmark.group = kind
    benchmark(route, KEYS[kind])
    benchmark.extra_info["keys_per_s"] = round(KEY_COUNT / benchmark.stats.stats.mean)


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_default_partitioner(benchmark, kind: str) -> None:
    _measure(benchmark, route_default, kind)


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_python_hash(benchmark, kind: str) -> None:
    _measure(benchmark, route_hash, kind)
