"""Liveness of CONTINUOUS jobs: the driver and every member exchange heartbeats, so a quiet job
runs on for as long as it likes (no guarantee, a snapshot interval longer than the run, a save
longer than the heartbeat timeout), while a member that stops answering is lost and the job
restarts from its snapshot, and a member whose driver stops answering stops by itself.

Most tests shorten the heartbeat timeout (`spark.jetspark.heartbeat.timeout`) so that a run
several times as long stays short; one runs 150 s at the defaults. They assert on items,
restarts and snapshots: a slow machine makes them last longer, never fail.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from hang_report import join_or_report
from proven_sockets import proven_pair

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    ExecutionMode,
    JobCancelledError,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.job import JobStatus
from jetspark.core.spark.continuous import control
from jetspark.core.spark.continuous.control import ControlConnection
from jetspark.core.spark.continuous.frames import Frames
from jetspark.core.spark.continuous.member import ControlState
from jetspark.core.spark.continuous.settings import (
    HEARTBEAT_INTERVAL,
    HEARTBEAT_TIMEOUT,
    Liveness,
)
from jetspark.edges import between

EXACTLY_ONCE = ProcessingGuarantee.EXACTLY_ONCE
TIMEOUT_SECONDS = 2.0
"""The heartbeat timeout of the short tests; each stays quiet several times as long."""


@pytest.fixture
def engine(spark_engine: Any) -> Any:
    from jetspark.core.spark import SparkEngine

    return SparkEngine(spark_engine.context, members=2)


@pytest.fixture
def short_heartbeats(spark_engine: Any) -> Iterator[None]:
    """The session's context with a heartbeat timeout of TIMEOUT_SECONDS for one test."""
    conf = spark_engine.context._jsc.sc().conf()
    conf.set(HEARTBEAT_INTERVAL, "100ms")
    conf.set(HEARTBEAT_TIMEOUT, f"{TIMEOUT_SECONDS:g}s")
    try:
        yield
    finally:
        conf.remove(HEARTBEAT_INTERVAL)
        conf.remove(HEARTBEAT_TIMEOUT)


class Ticking(AbstractProcessor):
    """An unbounded source: processor 0 emits 0, 1, ... `count` - 1, one every `every` seconds,
    then stays idle for good; it saves how far it got."""

    def __init__(self, count: int, every: float) -> None:
        super().__init__()
        self.count, self.every = count, every
        self.next = 0
        self.started: float | None = None

    def complete(self) -> bool:
        if self.context.global_processor_index != 0 or self.next >= self.count:
            return False
        now = time.monotonic()
        if self.started is None:
            self.started = now
        if now >= self.started + self.next * self.every and self.try_emit(self.next):
            self.next += 1
        return False

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot("next", self.next)

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        self.next = max(self.next, value)


class AppendingSink(AbstractProcessor):
    """Appends each item as a line to a file of its own in `directory`, at once; its first save
    takes `first_save` seconds."""

    def __init__(self, directory: str, first_save: float = 0.0) -> None:
        super().__init__()
        self.directory, self.first_save = directory, first_save

    def try_process0(self, item: Any) -> bool:
        name = f"sink-{self.context.global_processor_index}-{os.getpid()}"
        with open(os.path.join(self.directory, name), "a") as file:
            file.write(f"{item}\n")
        return True

    def save_to_snapshot(self) -> bool:
        time.sleep(self.first_save)
        self.first_save = 0.0
        return True


def _ticking_dag(directory: str, count: int, every: float, first_save: float = 0.0) -> DAG:
    dag = DAG("ticking")
    source = dag.new_vertex("source", lambda: Ticking(count, every)).local_parallelism(1)
    sink = dag.new_vertex("sink", lambda: AppendingSink(directory, first_save))
    dag.edge(between(source, sink).distributed().partitioned(lambda item: item))
    return dag


def _delivered(directory: str) -> list[int]:
    items = []
    for path in glob.glob(os.path.join(directory, "sink-*")):
        with open(path) as file:
            items.extend(int(line) for line in file if line.strip())
    return sorted(items)


def _continuous(guarantee: ProcessingGuarantee, interval_millis: int) -> JobConfig:
    return JobConfig(
        processing_guarantee=guarantee,
        snapshot_interval_millis=interval_millis,
        execution_mode=ExecutionMode.CONTINUOUS,
    )


def _wait_for(condition: Any, job: Any, timeout: float) -> None:
    """Waits until `condition()` holds while `job` runs; bounded, never a speed check."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert not job.status.is_terminal, f"{job.name} ended: {job.status}"
        assert time.monotonic() < deadline, f"{job.name}: condition not met in {timeout} s"
        time.sleep(0.1)


def _runs_quietly_and_delivers(
    engine: Any, work: Any, config: JobConfig, count: int, every: float, first_save: float = 0.0
) -> Any:
    """Runs the ticking job (its sink's files in `work`/out, its snapshots in `work`/snapshots
    when it has a guarantee) until every item reached the sink; asserts it still runs, never
    restarted and delivered each item once; returns the job (cancelled)."""
    directory = str(work / "out")
    os.mkdir(directory)
    guaranteed = config.processing_guarantee is not ProcessingGuarantee.NONE
    snapshots = DirectorySnapshotStore(str(work / "snapshots")) if guaranteed else None
    dag = _ticking_dag(directory, count, every, first_save)
    job = engine.new_job(dag, config, snapshot_store=snapshots)
    try:
        _wait_for(lambda: len(_delivered(directory)) >= count, job, timeout=count * every + 240)
        assert job.status is JobStatus.RUNNING
        assert job.metrics.restarts == 0
        assert _delivered(directory) == list(range(count))
        return job
    finally:
        job.cancel()
        with contextlib.suppress(JobCancelledError):
            job.join(240)


# ------------------------------------------------------------- a quiet job is a healthy job


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_a_job_without_a_guarantee_runs_150_s_at_one_item_a_second(
    engine: Any, tmp_path: Any
) -> None:
    """At the default heartbeat settings: the driver has nothing to say to such a job."""
    config = _continuous(ProcessingGuarantee.NONE, 1000)
    _runs_quietly_and_delivers(engine, tmp_path, config, count=150, every=1.0)


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_a_guaranteed_job_runs_on_while_its_first_snapshot_is_minutes_away(
    engine: Any, short_heartbeats: None, tmp_path: Any
) -> None:
    config = _continuous(EXACTLY_ONCE, 300_000)
    count, every = 10, TIMEOUT_SECONDS / 2  # the run lasts five heartbeat timeouts
    job = _runs_quietly_and_delivers(engine, tmp_path, config, count, every)
    assert job.metrics.snapshot_count == 0


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_a_first_save_longer_than_the_heartbeat_timeout_is_waited_for(
    engine: Any, short_heartbeats: None, tmp_path: Any
) -> None:
    config = _continuous(EXACTLY_ONCE, 100)
    job = _runs_quietly_and_delivers(
        engine, tmp_path, config, 6, 0.5, first_save=3 * TIMEOUT_SECONDS
    )
    assert job.metrics.snapshot_count >= 1


# ----------------------------------------------------------- a silent member is a lost member


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_a_member_that_stops_answering_is_lost_and_the_job_restarts_from_its_snapshot(
    engine: Any, short_heartbeats: None, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    items = jobs.events(3000)
    engine.get_list("events").extend(items)
    snapshots, marker = str(tmp_path / "snapshots"), tmp_path / "stopped"
    job = engine.new_job(
        jobs.windowed_dag(jobs.SignalOnce(signal.SIGSTOP, 400, snapshots, str(marker))),
        _continuous(EXACTLY_ONCE, 5),
        snapshot_store=DirectorySnapshotStore(snapshots),
    )
    try:
        with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
            join_or_report(job, 240, engine.context)
    finally:
        if marker.exists():  # Spark kills the stopped worker; if not, this test does
            pid = int(marker.read_text())
            if os.path.exists(f"/proc/{pid}"):
                os.kill(pid, signal.SIGKILL)
    assert marker.exists()
    assert job.metrics.restarts == 1
    assert engine.get_map("windows") == jobs.expected_windows(items)
    lost = [r.getMessage() for r in caplog.records if "is lost" in r.getMessage()]
    assert lost and f"not even a heartbeat, for {TIMEOUT_SECONDS:g} s" in lost[0]
    [restart] = [r.getMessage() for r in caplog.records if "a member was lost" in r.getMessage()]
    assert re.search(
        r"a member was lost: member \d on host \S+, executor driver \(\S+ sent nothing, "
        rf"not even a heartbeat, for {TIMEOUT_SECONDS:g} s\); restart 1 of",
        restart,
    ), restart


# ------------------------------------------------------- a member whose driver stops answering


def _connected_pair(
    liveness: Liveness | None,
) -> tuple[tuple[socket.socket, Frames], ControlConnection]:
    """(the driver's end, raw after its handshake, and its frames; a member's ControlConnection
    with `liveness`) over loopback."""
    (member_end, member_frames), driver_end = proven_pair()
    return driver_end, ControlConnection(member_end, member_frames, liveness)


def test_a_member_whose_driver_goes_silent_stops_by_itself() -> None:
    (driver, _), connection = _connected_pair(Liveness(interval=0.05, timeout=0.5))
    cancel = threading.Event()
    state = ControlState(connection, cancel)
    reader = threading.Thread(target=state.read)
    try:
        reader.start()
        reader.join(60)  # the driver's end never writes: not even a heartbeat
        assert not reader.is_alive()
        assert cancel.is_set() and state.completed.is_set()
        assert state.stop_reason is not None
        assert "sent nothing, not even a heartbeat, for 0.5 s" in state.stop_reason
    finally:
        connection.close()
        driver.close()


def test_a_member_whose_driver_only_sends_heartbeats_runs_on() -> None:
    (raw_driver, frames), connection = _connected_pair(Liveness(interval=0.05, timeout=0.5))
    driver = ControlConnection(raw_driver, frames, Liveness(interval=0.05, timeout=0.5))
    cancel = threading.Event()
    state = ControlState(connection, cancel)
    reader = threading.Thread(target=state.read)
    try:
        reader.start()
        reader.join(5)  # ten timeouts of heartbeats and nothing else
        assert reader.is_alive() and not cancel.is_set()
        driver.send(control.COMMITTED, 7)
        driver.send(control.STOP, "the job was cancelled")
        reader.join(60)
        assert state.committed_id == 7
        assert state.stop_reason == "the job was cancelled"
    finally:
        connection.close()
        driver.close()
