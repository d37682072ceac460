"""Jobs with a processing guarantee give the same committed output on LocalEngine(2) and on
SparkEngine (local[2]) in both its streaming modes: micro-batches of a few hundred items per
source processor, and continuous execution (every member a long-running task, snapshots
in-band).

Every assertion is on items and snapshots: how many batches a run takes before a cancel
depends on the machine's speed, the committed output never does.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from typing import Any

import fault_tolerance_jobs as jobs
import pytest

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    ExecutionMode,
    JobCancelledError,
    JobConfig,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.job import Job, JobStatus
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.edges import between, from_
from jetspark.processors import (
    aggregate_to_sliding_window_p,
    insert_watermarks_p,
    map_p,
    read_journal_p,
    stream_journal_p,
    write_file_transactional_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.windowing import TimestampKind, limiting_lag, sliding_window_policy

pytestmark = pytest.mark.spark

EXACTLY_ONCE = ProcessingGuarantee.EXACTLY_ONCE
BATCH_ITEMS = 250
"""Items per source processor and micro-batch on Spark: a few batches per job."""


SPARK_MODES = [ExecutionMode.MICRO_BATCH, ExecutionMode.CONTINUOUS]
MODE = ExecutionMode.AUTO
"""The execution mode `guaranteed()` asks for: set by the `engine` fixture per test."""


ENGINES = ["local", "micro_batch", "continuous"]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """LocalEngine(2) with a ticking snapshot clock, or SparkEngine on the session's local[2]
    in one of its streaming modes."""
    return engine_for(request, monkeypatch)


def engine_for(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The engine of the `engine` fixture for `request.param` (one of ENGINES); on Spark it
    also sets the MODE that `guaranteed()` asks for (other suites share it)."""
    if request.param == "local":
        return LocalEngine(2, snapshot_clock=jobs.TickClock())
    from jetspark.core.spark import SparkEngine

    monkeypatch.setattr(sys.modules[__name__], "MODE", ExecutionMode(request.param), raising=True)
    context = request.getfixturevalue("spark_engine").context
    return SparkEngine(context, members=2, batch_items=BATCH_ITEMS)


def guaranteed(guarantee: ProcessingGuarantee = EXACTLY_ONCE) -> JobConfig:
    return JobConfig(
        processing_guarantee=guarantee, snapshot_interval_millis=3, execution_mode=MODE
    )


def unguaranteed() -> JobConfig:
    """No guarantee: CONTINUOUS as asked, else RDD stages (micro-batches need a guarantee)."""
    continuous = MODE is ExecutionMode.CONTINUOUS
    return JobConfig(execution_mode=MODE if continuous else ExecutionMode.AUTO)


def batches(job: Job) -> int:
    """Snapshots committed so far (each micro-batch commits one)."""
    return job.metrics.snapshot_count


@pytest.mark.parametrize("guarantee", list(ProcessingGuarantee))
def test_keyed_counts_equal_the_run_without_a_guarantee(
    engine: Any, guarantee: ProcessingGuarantee
) -> None:
    items = jobs.words(3000)
    engine.get_list("words").extend(items)
    config = guaranteed(guarantee) if guarantee is not ProcessingGuarantee.NONE else unguaranteed()
    engine.new_job(jobs.counting_dag(_identity, sink=f"counts-{guarantee.name}"), config).join(120)
    assert engine.get_map(f"counts-{guarantee.name}") == jobs.expected_counts(items)


def test_sliding_windows_are_exact(engine: Any) -> None:
    items = jobs.events(2400)
    engine.get_list("events").extend(items)
    job = engine.new_job(jobs.windowed_dag(_identity), guaranteed())
    job.join(120)
    assert engine.get_map("windows") == jobs.expected_windows(items)
    if MODE is ExecutionMode.MICRO_BATCH:
        assert batches(job) > 2  # the windows' state passed through snapshots


def test_transactional_files_hold_every_line_once(engine: Any, tmp_path: Any) -> None:
    engine.get_list("numbers").extend(range(jobs.NUMBERS))
    out = str(tmp_path / "out")
    engine.new_job(jobs.file_dag(_identity, out), guaranteed()).join(120)
    assert jobs.committed_lines(out) == sorted(str(n) for n in range(jobs.NUMBERS))


class HashJoinP(AbstractProcessor):
    """Ordinal 0 (priority -1): (key, name) rows of a lookup table; ordinal 1: (key, amount)
    orders, emitted as (name, amount). The table is the state, saved under broadcast keys."""

    def __init__(self) -> None:
        super().__init__()
        self.table: dict[str, str] = {}

    def try_process0(self, row: Any) -> bool:
        self.table[row[0]] = row[1]
        return True

    def try_process1(self, order: Any) -> bool:
        return self.try_emit((self.table[order[0]], order[1]))

    def save_to_snapshot(self) -> bool:
        for key, name in self.table.items():
            if not self.try_emit_to_snapshot(broadcast_key(key), name):
                return False
        return True

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        self.table[key.key] = value


def _customer(offset: int) -> tuple[str, str]:
    return (f"c{offset}", f"name{offset}")


def _order(offset: int) -> tuple[str, int]:
    return (f"c{offset % 40}", offset)


def hash_join_dag(out: str) -> DAG:
    dag = DAG()
    table = dag.new_vertex("table", read_journal_p(_customer, count=40, partition_count=2))
    orders = dag.new_vertex("orders", read_journal_p(_order, count=2000, partition_count=4))
    join = dag.new_vertex("join", HashJoinP).local_parallelism(2)
    sink = dag.new_vertex("sink", write_file_transactional_p(out))
    dag.edge(between(table, join).distributed().broadcast().priority(-1))
    dag.edge(from_(orders).to(join, 1).distributed().partitioned(_first))
    dag.edge(between(join, sink))
    return dag


def _first(item: Any) -> Any:
    return item[0]


def test_a_hash_join_over_a_priority_edge_joins_every_order_once(
    engine: Any, tmp_path: Any
) -> None:
    out = str(tmp_path / "joined")
    engine.new_job(hash_join_dag(out), guaranteed()).join(120)
    expected = sorted(str((f"name{n % 40}", n)) for n in range(2000))
    assert jobs.committed_lines(out) == expected


@pytest.mark.parametrize(
    ("mode", "member_counts"),
    [(ExecutionMode.MICRO_BATCH, (2, 3, 1)), (ExecutionMode.CONTINUOUS, (2, 1, 2))],
)
def test_cancel_and_continue_at_other_member_counts(
    spark_engine: Any, tmp_path: Any, mode: ExecutionMode, member_counts: tuple[int, int, int]
) -> None:
    """Continuous execution needs a task slot per member: 2 -> 3 -> 1 on three slots is
    test_continuous_rescale.py's."""
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    continue_at_member_counts(spark_engine.context, mode, member_counts, store)


def continue_at_member_counts(
    context: Any,
    mode: ExecutionMode,
    member_counts: tuple[int, int, int],
    store: DirectorySnapshotStore,
) -> list[Job]:
    """Rescale across runs of one job on `context` in `mode`, cancelling each of the first two
    runs once it committed a snapshot into `store`: the counts are exact, and every run ran in
    `mode`. Returns the three runs."""
    from jetspark.core.spark import SparkEngine

    config = JobConfig(
        processing_guarantee=EXACTLY_ONCE, snapshot_interval_millis=3, execution_mode=mode
    )
    items = jobs.words(3000, seed=5)
    runs: list[Job] = []
    for members in member_counts[:2]:
        engine = SparkEngine(context, members=members, batch_items=100)
        engine.get_list("words").extend(items)
        job = engine.new_job(
            jobs.counting_dag(_unhurried, sink="rescaled"),
            config,
            snapshot_store=store,
            restore_from=store.latest(),
        )
        _wait_for_batches(job, 1)
        cancel(job)
        runs.append(job)
    last = SparkEngine(context, members=member_counts[2], batch_items=100)
    last.get_list("words").extend(items)
    job = last.new_job(
        jobs.counting_dag(_identity, sink="rescaled"),
        config,
        snapshot_store=store,
        restore_from=store.latest(),
    )
    job.join(120)
    runs.append(job)
    assert last.get_map("rescaled") == jobs.expected_counts(items)
    assert all(batches(run) >= 1 for run in runs[:2])
    assert {run.metrics.execution_mode for run in runs} == {mode.value}
    return runs


def _trade(offset: int) -> tuple[int, str]:
    """An endless stream of events, the same on every replay: event time offset // 4."""
    return (offset // 4, f"t{offset * 7 % 5}")


def unbounded_windows_dag(out: str) -> DAG:
    dag = DAG()
    source = dag.new_vertex("trades", stream_journal_p(_trade, partition_count=4))
    watermarks = dag.new_vertex("watermarks", insert_watermarks_p(_time, limiting_lag(0)))
    window = dag.new_vertex(
        "window",
        aggregate_to_sliding_window_p(
            _ticker, _time, TimestampKind.EVENT, sliding_window_policy(8, 4), counting()
        ),
    ).local_parallelism(2)
    lines = dag.new_vertex("lines", map_p(_window_line))
    sink = dag.new_vertex("sink", write_file_transactional_p(out))
    dag.edge(between(source, watermarks).isolated())
    dag.edge(between(watermarks, window).distributed().partitioned(_ticker))
    dag.edge(between(window, lines))
    dag.edge(between(lines, sink))
    return dag


def _time(event: tuple[int, str]) -> int:
    return event[0]


def _ticker(event: tuple[int, str]) -> str:
    return event[1]


def _window_line(result: Any) -> str:
    return f"{result.start} {result.end} {result.key} {result.value}"


def expected_window(start: int, end: int, key: str) -> int:
    return sum(1 for offset in range(max(0, start * 4), end * 4) if _trade(offset)[1] == key)


@pytest.mark.parametrize("mode", SPARK_MODES)
def test_an_unbounded_job_continues_from_its_snapshot_and_commits_exact_windows(
    spark_engine: Any, tmp_path: Any, mode: ExecutionMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jetspark.core.spark import SparkEngine

    monkeypatch.setattr(sys.modules[__name__], "MODE", mode, raising=True)
    out = str(tmp_path / "windows")
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    engine = SparkEngine(spark_engine.context, members=2, batch_items=200)
    for _run in range(2):
        job = engine.new_job(
            unbounded_windows_dag(out),
            guaranteed(),
            snapshot_store=store,
            restore_from=store.latest(),
        )
        _wait_for_batches(job, 2)
        cancel(job)
    committed = Counter()
    for line in jobs.committed_lines(out):
        start, end, key, count = line.split()
        committed[(int(start), int(end), key)] += 1
        assert int(count) == expected_window(int(start), int(end), key), line
    assert committed and max(committed.values()) == 1  # each window committed once
    assert store.latest() is not None and store.latest().snapshot_id >= 4


def cancel(job: Job) -> None:
    """Cancels `job` and waits for it to end: cancelled, or completed when a bounded job
    finished before the cancel reached it."""
    job.cancel()
    try:
        job.join(120)
    except JobCancelledError:
        return
    assert job.status is JobStatus.COMPLETED


def _wait_for_batches(job: Job, count: int, timeout: float = 120) -> None:
    """Waits until `job` committed `count` batches (or ended); bounded, never a speed check."""
    deadline = time.monotonic() + timeout
    while batches(job) < count and not job.status.is_terminal:
        assert time.monotonic() < deadline, f"{job.name}: no batch committed in {timeout} s"
        time.sleep(0.05)


def _identity(item: Any) -> Any:
    return item


def _unhurried(item: Any) -> Any:
    """The identity, a millisecond per item: a run of a bounded job lasts long enough for a
    continuous job's snapshots (one every 3 ms) to fall inside it."""
    time.sleep(0.001)
    return item


def test_the_store_must_be_one_the_executors_write(spark_engine: Any, tmp_path: Any) -> None:
    from jetspark.core import InMemorySnapshotStore, SnapshotError

    dag = jobs.counting_dag(_identity)
    with pytest.raises(TypeError, match="DirectorySnapshotStore"):
        spark_engine.new_job(dag, guaranteed(), snapshot_store=InMemorySnapshotStore())
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    os.chmod(read_only, 0o500)
    if os.access(read_only, os.W_OK):  # root writes anywhere: use a path under a file instead
        blocker = tmp_path / "file"
        blocker.write_text("")
        read_only = blocker / "snapshots"
    with pytest.raises((SnapshotError, OSError)):
        spark_engine.new_job(dag, guaranteed(), snapshot_store=DirectorySnapshotStore(read_only))


def test_restoring_a_snapshot_of_another_dag_is_refused(spark_engine: Any, tmp_path: Any) -> None:
    from jetspark.core import SnapshotError

    local = LocalEngine(1, snapshot_clock=jobs.TickClock())
    local.get_list("words").extend(jobs.words(200))
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    local.new_job(jobs.counting_dag(_identity), guaranteed(), snapshot_store=store).join(60)
    other = DAG()
    other.new_vertex("unrelated", read_journal_p("words"))
    with pytest.raises(SnapshotError, match="another DAG"):
        spark_engine.new_job(other, guaranteed(), restore_from=store.latest())
