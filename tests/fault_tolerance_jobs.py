"""Jobs and fault injection for the snapshot and fault-tolerance tests (no tests here).

Also a script: `python fault_tolerance_jobs.py <work directory> <kill mode> <n>` runs the file
job with a DirectorySnapshotStore in `<work directory>/snapshots` and kills its own process
with SIGKILL, either at item n (`item`) or while writing the manifest of snapshot n
(`manifest`), so the parent test can restart the job in another process.
"""

from __future__ import annotations

import glob
import os
import random
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from jetspark.core import (
    DAG,
    DirectorySnapshotStore,
    JobConfig,
    JobFailedError,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.job import Job
from jetspark.core.store_lease import StoreLease
from jetspark.edges import EdgeConfig, between
from jetspark.processors import (
    aggregate_by_key_p,
    aggregate_to_sliding_window_p,
    insert_watermarks_p,
    map_p,
    read_journal_p,
    read_list_p,
    stream_journal_p,
    write_file_transactional_p,
    write_list_p,
    write_map_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.windowing import TimestampKind, limiting_lag, sliding_window_policy

EXACTLY_ONCE = ProcessingGuarantee.EXACTLY_ONCE
AT_LEAST_ONCE = ProcessingGuarantee.AT_LEAST_ONCE
SMALL_QUEUES = EdgeConfig(queue_size=16)
"""Small queues make a job take many rounds, so snapshots fall between its items."""


class TickClock:
    """A snapshot clock that advances one millisecond each time it is read (once per round)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


class InjectedFault(Exception):
    """The failure a test injects."""


class FailOnce:
    """A map function that raises at the `at`-th item its processors see, in one run only."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.seen = 0
        self.armed = True
        self._lock = threading.Lock()

    def __call__(self, item: Any) -> Any:
        with self._lock:
            self.seen += 1
            hit = self.armed and self.seen == self.at
            if hit:
                self.armed = False
        if hit:
            raise InjectedFault(f"injected at item {self.at}")
        return item


class KillAt:
    """A map function that kills this process with SIGKILL at its `at`-th item, or at the first
    item after it once `committed_in` (a snapshot directory) holds a committed snapshot: the
    sink saves on a thread of its own, so under load the first commit may come later."""

    def __init__(self, at: int, committed_in: str | None = None) -> None:
        self.at = at
        self.seen = 0
        self.committed_in = committed_in

    def __call__(self, item: Any) -> Any:
        self.seen += 1
        if self.seen >= self.at and self._committed():
            os.kill(os.getpid(), signal.SIGKILL)
        return item

    def _committed(self) -> bool:
        if self.committed_in is None:
            return True
        return bool(glob.glob(os.path.join(self.committed_in, "snapshot-*", "MANIFEST")))


class SignalOnce:
    """A map function that sends `signum` to its own Python worker at its `at`-th item once a
    snapshot is committed in the store directory `snapshots`, in the first run only (the
    marker file remembers, holding the worker's pid)."""

    def __init__(self, signum: int, at: int, snapshots: str, marker: str) -> None:
        self.signum, self.at, self.snapshots, self.marker = signum, at, snapshots, marker
        self.seen = 0

    def __call__(self, item: Any) -> Any:
        self.seen += 1
        if (
            self.seen >= self.at
            and not os.path.exists(self.marker)
            and glob.glob(os.path.join(self.snapshots, "snapshot-*", "MANIFEST"))
        ):
            with open(self.marker, "w") as marker:
                marker.write(str(os.getpid()))
            os.kill(os.getpid(), self.signum)
        return item


class UnmountedOnRelease(DirectorySnapshotStore):
    """A store whose lease gives the directory back, then fails as a share that went away."""

    def acquire(self, job_name: str) -> StoreLease:
        lease = super().acquire(job_name)

        def release() -> None:
            lease.release()
            raise OSError("the share went away")

        return StoreLease(lease.holder, release)


def config(guarantee: ProcessingGuarantee = EXACTLY_ONCE, interval: int = 3) -> JobConfig:
    """A job config taking a snapshot every `interval` ticks of a TickClock."""
    return JobConfig(processing_guarantee=guarantee, snapshot_interval_millis=interval)


def engine(members: int = 1, **kwargs: Any) -> LocalEngine:
    """A LocalEngine whose snapshot clock is a TickClock."""
    return LocalEngine(members, snapshot_clock=TickClock(), **kwargs)


def run_to_completion(job: Job, timeout: float = 30) -> int:
    """Joins `job`, restarting it after each JobFailedError; returns how many times it failed."""
    failures = 0
    while True:
        try:
            job.join(timeout)
            return failures
        except JobFailedError as failure:
            assert isinstance(failure.__cause__, InjectedFault), failure
            failures += 1
            job = job.restart()


# ------------------------------------------------------------------ keyed counts


def copy_dag(name: str = "copy", out: str = "out") -> DAG:
    """list "in" -> list `out`, over a distributed edge."""
    dag = DAG(name)
    source = dag.new_vertex("source", read_list_p("in"))
    sink = dag.new_vertex("sink", write_list_p(out))
    dag.edge(between(source, sink).distributed())
    return dag


def words(count: int, keys: int = 7, seed: int = 1) -> list[str]:
    """`count` words drawn from `keys` distinct ones."""
    rng = random.Random(seed)
    return [f"w{rng.randrange(keys)}" for _ in range(count)]


def counting_dag(
    fault: Callable[[Any], Any], *, source_lp: int = 2, counter_lp: int = 2, sink: str = "counts"
) -> DAG:
    """journal("words") -> map(fault) -> count per word (distributed partitioned) -> map sink."""
    dag = DAG()
    source = dag.new_vertex("source", read_journal_p("words")).local_parallelism(source_lp)
    faulty = dag.new_vertex("fault", map_p(fault)).local_parallelism(source_lp)
    count = dag.new_vertex("count", aggregate_by_key_p(_whole, counting())).local_parallelism(
        counter_lp
    )
    out = dag.new_vertex("sink", write_map_p(sink)).local_parallelism(1)
    dag.edge(between(source, faulty).set_config(SMALL_QUEUES))
    dag.edge(between(faulty, count).distributed().partitioned(_whole).set_config(SMALL_QUEUES))
    dag.edge(between(count, out))
    return dag


def _whole(item: Any) -> Any:
    return item


def expected_counts(items: list[str]) -> dict[str, int]:
    """The counts a failure-free run puts into the map."""
    return dict(Counter(items))


# -------------------------------------------------------------- windowed counts


def events(count: int, keys: int = 4, seed: int = 2) -> list[tuple[int, str]]:
    """`(timestamp, key)` events whose timestamps never decrease with the offset, so no event
    is ever late whichever way the journal partitions interleave."""
    rng = random.Random(seed)
    return [(offset // 3, f"k{rng.randrange(keys)}") for offset in range(count)]


def windowed_dag(fault: Callable[[Any], Any], *, source_lp: int = 2, window_lp: int = 2) -> DAG:
    """journal("events") -> watermarks -> map(fault) -> sliding-window count per key ->
    ((start, end, key), count) -> map sink "windows"."""
    dag = DAG()
    source = dag.new_vertex("source", read_journal_p("events")).local_parallelism(source_lp)
    watermarks = dag.new_vertex(
        "watermarks", insert_watermarks_p(_timestamp, limiting_lag(0))
    ).local_parallelism(source_lp)
    faulty = dag.new_vertex("fault", map_p(fault)).local_parallelism(source_lp)
    window = dag.new_vertex(
        "window",
        aggregate_to_sliding_window_p(
            _key, _timestamp, TimestampKind.EVENT, sliding_window_policy(12, 4), counting()
        ),
    ).local_parallelism(window_lp)
    entries = dag.new_vertex("entries", map_p(_window_entry)).local_parallelism(1)
    out = dag.new_vertex("sink", write_map_p("windows")).local_parallelism(1)
    dag.edge(between(source, watermarks).isolated().set_config(SMALL_QUEUES))
    dag.edge(between(watermarks, faulty).set_config(SMALL_QUEUES))
    dag.edge(between(faulty, window).distributed().partitioned(_key).set_config(SMALL_QUEUES))
    dag.edge(between(window, entries).distributed().all_to_one())
    dag.edge(between(entries, out))
    return dag


def _timestamp(event: tuple[int, str]) -> int:
    return event[0]


def _key(event: tuple[int, str]) -> str:
    return event[1]


def _window_entry(result: Any) -> tuple[tuple[int, int, str], int]:
    return ((result.start, result.end, result.key), result.value)


def expected_windows(items: list[tuple[int, str]]) -> dict[tuple[int, int, str], int]:
    """Sliding windows of 12 sliding by 4: the counts per (start, end, key)."""
    counts: Counter[tuple[int, int, str]] = Counter()
    for timestamp, key in items:
        first_end = (timestamp // 4 + 1) * 4
        for end in range(first_end, first_end + 12, 4):
            counts[(end - 12, end, key)] += 1
    return dict(counts)


# ----------------------------------------------------------------- the file job


def file_dag(
    fault: Callable[[Any], Any], out: str, *, source_lp: int = 2, endless: bool = False
) -> DAG:
    """journal("numbers") -> map(fault) -> transactional file sink in `out` (2 processors);
    `endless`: the journal followed for ever (the same snapshot state as the bounded one)."""
    dag = DAG()
    journal = stream_journal_p("numbers") if endless else read_journal_p("numbers")
    source = dag.new_vertex("source", journal).local_parallelism(source_lp)
    faulty = dag.new_vertex("fault", map_p(fault)).local_parallelism(source_lp)
    sink = dag.new_vertex("sink", write_file_transactional_p(out)).local_parallelism(2)
    dag.edge(between(source, faulty).set_config(SMALL_QUEUES))
    dag.edge(between(faulty, sink).set_config(SMALL_QUEUES))
    return dag


def committed_lines(out: str) -> list[str]:
    """The lines of the published `part-*` files, sorted."""
    lines: list[str] = []
    for name in sorted(os.listdir(out)):
        if name.startswith("part-"):
            with open(os.path.join(out, name), encoding="utf-8") as file:
                lines.extend(file.read().splitlines())
    return sorted(lines)


NUMBERS = 3000


def _run_child(work: str, mode: str, n: int) -> None:
    """Runs the file job until this process kills itself (see the module docstring)."""
    if mode == "manifest":
        import jetspark.core.snapshot_store as snapshot_store

        write = snapshot_store.write_atomically

        def write_or_die(path: str, data: bytes, *args: Any) -> None:
            if path.endswith(os.path.join(f"snapshot-{n:010d}", "MANIFEST")):
                os.kill(os.getpid(), signal.SIGKILL)
            write(path, data, *args)

        snapshot_store.write_atomically = write_or_die  # type: ignore[assignment]
    snapshots = os.path.join(work, "snapshots")
    fault = KillAt(n, committed_in=snapshots) if mode == "item" else _whole
    local = engine()
    local.get_list("numbers").extend(range(NUMBERS))
    store = DirectorySnapshotStore(snapshots)
    # dying at a manifest, the job must not end first: however slowly its snapshots commit
    # (the sink saves on a thread of its own), it runs until snapshot n's manifest is written
    endless = mode == "manifest"
    dag = file_dag(fault, os.path.join(work, "out"), endless=endless)
    job = local.new_job(dag, config(interval=2), snapshot_store=store)
    job.join(60)


if __name__ == "__main__":
    _run_child(sys.argv[1], sys.argv[2], int(sys.argv[3]))
