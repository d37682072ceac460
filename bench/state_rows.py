"""Rows 22a-b (issue 45): a sliding window over a million distinct keys, exactly-once on
CONTINUOUS with 2 s snapshots, against the same job on STAGES without a guarantee; and how fast
its snapshots go, against writing the same bytes to the same disk.

The job is the window DAG of the streaming rows (source -> watermarks -> frame counts ->
distributed by key -> sliding windows -> `write_file_transactional_p`), counting per key in
windows of 10 s sliding by 5 s, over `KeyedEvents`: 3 x keys events, event n of key n mod keys,
at a rate that spreads the keys over two thirds of a window, so that the windows' state holds
about every key at once (15-40 MB of snapshot on two members). Before a run's time counts, its
windows are checked against the plain count (numpy, no engine): every window of every key once,
each count exact. A snapshot's bytes per second are its bytes over the time from its start to
its commit (barrier alignment included), summed over the run's snapshots; the baseline writes
a file of each snapshot's size into the snapshot store's directory, fsynced and renamed as the
store writes its files.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.report import Goal, Row
from bench.streaming_rows import START_MILLIS, window_dag, window_line
from bench.timing import Samples

WINDOW_MILLIS, SLIDE_MILLIS = 10_000, 5_000
SNAPSHOT_MILLIS = 2_000
JOIN_SECONDS = 1_800
"""How long a run may take before the row fails (a hang guard, not a speed check)."""
_MB = 1e6


@dataclass(frozen=True)
class KeyedEvents:
    """The events `(timestamp ms, key)`: event n of key n mod `keys`, `per_milli` a ms."""

    keys: int

    @property
    def count(self) -> int:
        """Three events of every key."""
        return 3 * self.keys

    @property
    def per_milli(self) -> int:
        """Events per ms of event time: `keys` events span two thirds of a window."""
        return max(1, 3 * self.keys // (2 * WINDOW_MILLIS))

    def __call__(self, n: int) -> tuple[int, int]:
        """Event `n`."""
        return (START_MILLIS + n // self.per_milli, n % self.keys)


def expected_windows(events: KeyedEvents) -> np.ndarray:
    """The plain count: rows `(window start, key, events)` of every window holding an event of
    the key, sorted by start, then key."""
    n = np.arange(events.count, dtype=np.int64)
    frames = (START_MILLIS + n // events.per_milli) // SLIDE_MILLIS + 1  # each one's end / slide
    per_frame, counts = np.unique(frames * events.keys + n % events.keys, return_counts=True)
    frame, key = np.divmod(per_frame, events.keys)
    # a frame is in the windows ending at its end and at each slide after, up to a window on
    first_start = frame - WINDOW_MILLIS // SLIDE_MILLIS
    starts = np.concatenate([first_start + j for j in range(WINDOW_MILLIS // SLIDE_MILLIS)])
    windows, where = np.unique(
        starts * events.keys + np.tile(key, WINDOW_MILLIS // SLIDE_MILLIS), return_inverse=True
    )
    totals = np.bincount(where, weights=np.tile(counts, WINDOW_MILLIS // SLIDE_MILLIS))
    start, key = np.divmod(windows, events.keys)
    return np.stack([start * SLIDE_MILLIS, key, totals.astype(np.int64)], axis=1)


def committed_windows(directory: Path) -> np.ndarray:
    """The windows a run's sink published (`start key count` lines), sorted as
    `expected_windows`."""
    parts = [
        np.fromstring(path.read_text(encoding="ascii"), dtype=np.int64, sep=" ")
        for path in sorted(directory.glob("part-*"))
    ]
    rows = np.concatenate(parts).reshape(-1, 3) if parts else np.empty((0, 3), np.int64)
    return rows[np.lexsort((rows[:, 1], rows[:, 0]))]


def check_windows(system: str, found: np.ndarray, expected: np.ndarray) -> None:
    """Fails, saying where, unless `found` are exactly `expected`'s windows."""
    if found.shape == expected.shape and np.array_equal(found, expected):
        return
    rows = min(len(found), len(expected))
    differ = np.flatnonzero((found[:rows] != expected[:rows]).any(axis=1))
    at = int(differ[0]) if len(differ) else rows
    raise AssertionError(
        f"{system}: {len(found):,} windows published, the plain count has {len(expected):,}; "
        f"the first difference at row {at:,}: published "
        f"{found[at].tolist() if at < len(found) else None}, counted "
        f"{expected[at].tolist() if at < len(expected) else None}"
    )


@dataclass(frozen=True)
class Run:
    """One checked run: its seconds from `new_job` to the end, and its snapshots."""

    seconds: float
    snapshots: list[Any]
    """The SnapshotReports the job's metrics kept (every one of a run this short)."""


def continuous_config() -> Any:
    """The subject's JobConfig: CONTINUOUS, exactly-once, 2 s snapshots."""
    from jetspark.core import ExecutionMode, JobConfig, ProcessingGuarantee

    return JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=SNAPSHOT_MILLIS,
        execution_mode=ExecutionMode.CONTINUOUS,
    )


def run_job(engine: Any, events: KeyedEvents, config: Any, root: Path, source: Any = None) -> Run:
    """Runs the window job over `events` with `config` (a snapshot store in `root` when it has
    a guarantee), its windows into `root`/out; the run's windows checked first. `source`: a
    processor supplier emitting `events` (default: a bounded journal of them)."""
    from jetspark.core import DirectorySnapshotStore, ProcessingGuarantee
    from jetspark.processors import read_journal_p, write_file_transactional_p

    out = root / "out"
    dag = window_dag(
        source or read_journal_p(events, count=events.count),
        write_file_transactional_p(str(out), window_line),
        window=(WINDOW_MILLIS, SLIDE_MILLIS),
    )
    store = {}
    if config.processing_guarantee is not ProcessingGuarantee.NONE:
        store["snapshot_store"] = DirectorySnapshotStore(root / "snapshots")
    started = time.perf_counter()
    job = engine.new_job(dag, config, **store)
    job.join(JOIN_SECONDS)
    seconds = time.perf_counter() - started
    check_windows(config.execution_mode.name, committed_windows(out), expected_windows(events))
    return Run(seconds, list(job.metrics.snapshots))


def disk_seconds(directory: Path, sizes: Iterable[int]) -> float:
    """Seconds to write a file of each of `sizes` bytes into `directory` as the snapshot store
    writes its files (a temporary file, fsynced, renamed)."""
    from jetspark.core.files import write_atomically

    sizes = list(sizes)
    data = np.random.default_rng(45).bytes(max(sizes, default=0))
    started = time.perf_counter()
    for number, size in enumerate(sizes):
        write_atomically(str(directory / f"file-{number}"), data[:size], 0o600)
    return time.perf_counter() - started


def large_state(spark: Any, keys: int, rounds: int) -> list[Row]:
    """Rows 22a-b over `keys` distinct keys, `rounds` times, the two modes alternating."""
    from jetspark.core import ExecutionMode, JobConfig

    events = KeyedEvents(keys)
    configs = {
        "stages": JobConfig(execution_mode=ExecutionMode.STAGES),
        "continuous": continuous_config(),
    }
    seconds: dict[str, list[float]] = {name: [] for name in configs}
    snapshot_rates, disk_rates, snapshots = [], [], []
    for round_index in range(rounds):
        order = list(configs)[round_index % 2 :] + list(configs)[: round_index % 2]
        for name in order:
            with tempfile.TemporaryDirectory(prefix="jetspark-bench-state-") as root:
                run = run_job(spark.engine, events, configs[name], Path(root))
                seconds[name].append(run.seconds)
                if name == "continuous":
                    sizes = [report.bytes for report in run.snapshots]
                    took = sum(report.duration_seconds for report in run.snapshots)
                    snapshot_rates.append(sum(sizes) / _MB / took)
                    disk_rates.append(sum(sizes) / _MB / disk_seconds(Path(root), sizes))
                    snapshots.append([(r.bytes, r.duration_seconds) for r in run.snapshots])
    shape = (
        f"sliding window (10 s by 5 s) counting over {keys:,} distinct keys, "
        f"{events.count:,} events, local[2]"
    )
    return [
        Row.compare(
            "22a",
            f"{shape}: CONTINUOUS exactly-once with 2 s snapshots vs STAGES without a guarantee",
            "s",
            Samples(tuple(seconds["continuous"])),
            Samples(tuple(seconds["stages"])),
            goal=Goal("<=", 1.5),
            extra={"keys": keys, "events": events.count, "snapshots_bytes_seconds": snapshots},
        ),
        Row.compare(
            "22b",
            f"{shape}: its snapshots' bytes per second, start to commit, vs writing the same "
            "bytes to the same disk (a file per snapshot, fsynced)",
            "MB/s",
            Samples(tuple(snapshot_rates)),
            Samples(tuple(disk_rates)),
        ),
    ]
