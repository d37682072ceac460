"""Fault tolerance on LocalEngine: a processor fails at a chosen item, the job restarts from its
last snapshot, and the result equals the failure-free run (manual §3.5, §7.5, §7.8)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from fault_tolerance_jobs import (
    AT_LEAST_ONCE,
    EXACTLY_ONCE,
    FailOnce,
    InjectedFault,
    committed_lines,
    config,
    counting_dag,
    engine,
    events,
    expected_counts,
    expected_windows,
    file_dag,
    run_to_completion,
    windowed_dag,
    words,
)

from jetspark.core import (
    DAG,
    JobCancelledError,
    JobConfig,
    JobFailedError,
    JobStatus,
    LocalEngine,
    SnapshotError,
)
from jetspark.edges import between
from jetspark.processors import (
    aggregate_to_sliding_window_p,
    insert_watermarks_p,
    map_p,
    stream_journal_p,
    write_map_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.windowing import TimestampKind, limiting_lag, sliding_window_policy

pytestmark = pytest.mark.timeout(60)

WORDS = words(1200)
EVENTS = events(450)


@pytest.mark.parametrize("members", [1, 2])
@pytest.mark.parametrize("fail_at", [1, 300, 900, 1200])
def test_exactly_once_counts_equal_the_failure_free_run(members, fail_at):
    local = engine(members)
    local.get_list("words").extend(WORDS)
    job = local.new_job(counting_dag(FailOnce(fail_at)), config(EXACTLY_ONCE))
    assert run_to_completion(job) == 1
    assert local.get_map("counts") == expected_counts(WORDS)


@pytest.mark.parametrize("fail_at", [40, 200, 449])
def test_exactly_once_windowed_counts_equal_the_failure_free_run(fail_at):
    local = engine(2)
    local.get_list("events").extend(EVENTS)
    job = local.new_job(windowed_dag(FailOnce(fail_at)), config(EXACTLY_ONCE))
    assert run_to_completion(job) == 1
    assert job.snapshot_store is not None and job.snapshot_store.latest() is not None
    assert local.get_map("windows") == expected_windows(EVENTS)


def test_several_failures_in_one_job_still_give_the_exact_result():
    local = engine(2)
    local.get_list("words").extend(WORDS)
    faults = [FailOnce(200), FailOnce(500)]

    def fail_twice(item: Any) -> Any:
        return faults[1](faults[0](item))

    job = local.new_job(counting_dag(fail_twice), config(EXACTLY_ONCE))
    assert run_to_completion(job) == 2
    assert local.get_map("counts") == expected_counts(WORDS)


def test_at_least_once_loses_nothing():
    local = engine(2)
    local.get_list("words").extend(WORDS)
    job = local.new_job(counting_dag(FailOnce(700)), config(AT_LEAST_ONCE))
    assert run_to_completion(job) == 1
    counts, exact = local.get_map("counts"), expected_counts(WORDS)
    assert counts.keys() == exact.keys()
    assert all(counts[word] >= exact[word] for word in exact)


def failed_run(dag: DAG, members: int, name: str, items: list[Any]) -> tuple[Any, LocalEngine]:
    """Runs `dag` until its injected failure; returns the job's last snapshot and the engine."""
    local = engine(members)
    local.get_list(name).extend(items)
    job = local.new_job(dag, config(EXACTLY_ONCE))
    with pytest.raises(JobFailedError):
        job.join(30)
    assert job.snapshot_store is not None
    snapshot = job.snapshot_store.latest()
    assert snapshot is not None
    return snapshot, local


@pytest.mark.parametrize(
    ("before", "after"), [((2, 2, 2), (3, 1, 3)), ((1, 3, 1), (2, 2, 2)), ((2, 1, 3), (1, 4, 1))]
)
def test_keyed_state_and_source_positions_restore_at_another_parallelism(before, after):
    members, source_lp, counter_lp = before
    dag = counting_dag(FailOnce(700), source_lp=source_lp, counter_lp=counter_lp)
    snapshot, _ = failed_run(dag, members, "words", WORDS)
    members, source_lp, counter_lp = after
    local = engine(members)
    local.get_list("words").extend(WORDS)
    rescaled = counting_dag(lambda w: w, source_lp=source_lp, counter_lp=counter_lp)
    local.new_job(rescaled, config(EXACTLY_ONCE), restore_from=snapshot).join(30)
    assert local.get_map("counts") == expected_counts(WORDS)


def test_windows_restore_at_another_parallelism_and_member_count():
    snapshot, failed = failed_run(windowed_dag(FailOnce(250)), 2, "events", EVENTS)
    local = engine(3)
    local.get_list("events").extend(EVENTS)
    # the windows emitted before the failure are in the sink's map, which outlives the job
    local.get_map("windows").update(failed.get_map("windows"))
    dag = windowed_dag(lambda e: e, source_lp=1, window_lp=3)
    local.new_job(dag, config(EXACTLY_ONCE), restore_from=snapshot).join(30)
    assert local.get_map("windows") == expected_windows(EVENTS)


@pytest.mark.parametrize("guarantee", [EXACTLY_ONCE, AT_LEAST_ONCE])
def test_the_transactional_file_sink_holds_every_line_once_or_at_least_once(tmp_path, guarantee):
    local = engine()
    local.get_list("numbers").extend(range(800))
    job = local.new_job(file_dag(FailOnce(500), str(tmp_path)), config(guarantee))
    assert run_to_completion(job) == 1
    lines, exact = committed_lines(str(tmp_path)), sorted(map(str, range(800)))
    if guarantee is EXACTLY_ONCE:
        assert lines == exact
    else:
        assert sorted(set(lines)) == exact


# ---------------------------------------------------------------- job API


def test_restart_of_a_job_without_a_guarantee_starts_afresh():
    local = engine()
    local.get_list("words").extend(WORDS)
    job = local.new_job(counting_dag(FailOnce(600)), JobConfig())
    assert job.snapshot_store is None
    assert run_to_completion(job) == 1
    assert local.get_map("counts") == expected_counts(WORDS)


def test_restart_needs_an_unfinished_job_and_stores_need_a_guarantee():
    local = engine()
    local.get_list("words").extend(WORDS)
    job = local.new_job(counting_dag(lambda w: w), config())
    job.join(30)
    with pytest.raises(RuntimeError, match="completed"):
        job.restart()
    with pytest.raises(ValueError, match="need a processing guarantee"):
        local.new_job(counting_dag(lambda w: w), JobConfig(), snapshot_store=job.snapshot_store)


def test_restoring_another_dags_snapshot_fails_the_submission():
    snapshot, _ = failed_run(counting_dag(FailOnce(300)), 1, "words", WORDS)
    local = engine()
    dag = DAG()
    dag.new_vertex("unrelated", map_p(lambda x: x))
    with pytest.raises(SnapshotError, match="another DAG"):
        local.new_job(dag, config(), restore_from=snapshot)


class UntilWindow:
    """Passes window results on; sets `reached` once a window ends at or after `end`.

    `expect(end)` moves the target while the job runs: under the lock, so a window the job
    thread is checking against the old target cannot set `reached` for the new one.
    """

    def __init__(self, end: int) -> None:
        self.end = end
        self.reached = threading.Event()
        self._lock = threading.Lock()

    def expect(self, end: int) -> None:
        """From now on, `reached` means a window ended at or after `end`."""
        with self._lock:
            self.end = end
            self.reached.clear()

    def __call__(self, result: Any) -> Any:
        with self._lock:
            if result.end >= self.end:
                self.reached.set()
        return ((result.start, result.end, result.key), result.value)


def streaming_dag(until: UntilWindow) -> DAG:
    dag = DAG()
    source = dag.new_vertex("source", stream_journal_p("events")).local_parallelism(2)
    watermarks = dag.new_vertex(
        "watermarks", insert_watermarks_p(lambda e: e[0], limiting_lag(0))
    ).local_parallelism(2)
    window = dag.new_vertex(
        "window",
        aggregate_to_sliding_window_p(
            lambda e: e[1],
            lambda e: e[0],
            TimestampKind.EVENT,
            sliding_window_policy(12, 4),
            counting(),
        ),
    )
    until_vertex = dag.new_vertex("until", map_p(until)).local_parallelism(1)
    sink = dag.new_vertex("sink", write_map_p("windows")).local_parallelism(1)
    dag.edge(between(source, watermarks).isolated())
    dag.edge(between(watermarks, window).distributed().partitioned(lambda e: e[1]))
    dag.edge(between(window, until_vertex).distributed().all_to_one())
    dag.edge(between(until_vertex, sink))
    return dag


def test_an_unbounded_job_runs_until_cancelled_and_resumes_from_its_snapshot():
    local = engine(2)
    log = local.get_list("events")
    log.extend(events(300))
    first = UntilWindow(end=90)
    job = local.new_job(streaming_dag(first), config(EXACTLY_ONCE, interval=2))
    assert first.reached.wait(30)
    store = job.snapshot_store
    assert store is not None
    # Whether a snapshot was committed by the time this thread cancels the job depends on
    # scheduling: wait for one (the module's timeout bounds the wait).
    while store.latest() is None:
        time.sleep(0.01)
    assert job.status is JobStatus.RUNNING
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(30)
    log.extend(events(600)[300:])
    second = UntilWindow(end=190)
    resumed = local.new_job(
        streaming_dag(second),
        config(EXACTLY_ONCE, interval=2),
        snapshot_store=store,
        restore_from=store.latest(),
    )
    assert second.reached.wait(30)
    resumed.cancel()
    with pytest.raises(JobCancelledError):
        resumed.join(30)
    windows = local.get_map("windows")
    expected = expected_windows(events(600))
    closed = {key: count for key, count in expected.items() if key[1] <= 190}
    assert {key: windows[key] for key in closed} == closed


def test_a_failure_inside_a_callback_names_it_and_keeps_the_cause():
    local = engine()
    local.get_list("words").extend(WORDS)
    job = local.new_job(counting_dag(FailOnce(10)), config())
    with pytest.raises(JobFailedError, match="vertex 'fault'") as failure:
        job.join(30)
    assert isinstance(failure.value.__cause__, InjectedFault)


def test_restart_of_a_running_job_cancels_it_and_continues_from_its_snapshot():
    local = engine()
    log = local.get_list("events")
    log.extend(events(300))
    until = UntilWindow(end=90)
    job = local.new_job(streaming_dag(until), config(EXACTLY_ONCE, interval=2))
    assert until.reached.wait(30)
    until.expect(190)
    log.extend(events(600)[300:])
    resumed = job.restart()
    assert job.status is JobStatus.CANCELLED
    assert until.reached.wait(30)
    resumed.cancel()
    with pytest.raises(JobCancelledError):
        resumed.join(30)
    windows = local.get_map("windows")
    closed = {key: n for key, n in expected_windows(events(600)).items() if key[1] <= 190}
    assert {key: windows[key] for key in closed} == closed
