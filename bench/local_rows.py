"""The rows that need no Spark: LocalEngine word count (3) and the partitioner (4)."""

from __future__ import annotations

from pathlib import Path

from bench.bench_partitioner import KEY_COUNT, KEYS, route_default, route_hash
from bench.report import Goal, Row
from bench.timing import alternate
from bench.wordcount import count_on_local_engine, count_plainly


def local_word_count(directory: Path, megabytes: float, rounds: int) -> list[Row]:
    """Row 3: LocalEngine(members=1) vs one plain dict loop, both reading the same files."""
    times, counts = alternate(
        {
            "jetspark": lambda: count_on_local_engine(directory),
            "dict loop": lambda: count_plainly(directory),
        },
        rounds,
    )
    if counts["jetspark"] != counts["dict loop"]:
        raise AssertionError("LocalEngine's word counts differ from the dict loop's")
    title = f"word count {megabytes:.3g} MB: LocalEngine(1) vs a plain Python dict loop"
    row = Row.compare("3", title, "s", times["jetspark"], times["dict loop"], goal=Goal("<=", 2.0))
    return [row]


def partitioner(rounds: int) -> list[Row]:
    """Row 4: keys per second of the MurmurHash3 partitioner vs `hash()`, per kind of key."""
    rows = []
    for number, kind in zip("abc", ("str", "int", "tuple"), strict=True):
        keys = KEYS[kind]
        times, _ = alternate(
            {
                "murmur": lambda keys=keys: route_default(keys),
                "hash": lambda keys=keys: route_hash(keys),
            },
            rounds,
        )
        rate = {name: samples.map(lambda s: KEY_COUNT / s) for name, samples in times.items()}
        goal = Goal(">=", 1e6, "keys/s") if kind == "str" else None
        title = f"partitioner, {kind} keys: MurmurHash3 over msgpack vs hash()"
        rows.append(
            Row.compare(f"4{number}", title, "keys/s", rate["murmur"], rate["hash"], goal=goal)
        )
    return rows
