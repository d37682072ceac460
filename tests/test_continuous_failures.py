"""Failures told apart (issue #32): a configuration error fails a job at once, naming the host,
while a lost member restarts it from its snapshot, on fewer members when the cluster has no
slot left for each, and the console names the lost member's index, host, executor and Spark's
reason (issue #35). Spark's own failures are made on local[2]: a Python the workers cannot run,
a snapshot store they cannot see (a private mount over its directory), a barrier stage Spark
refuses, a Python worker killed. The tests assert on errors, restarts and items, never on
timing; the wait for free slots runs on an injected clock."""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fault_tolerance_jobs as jobs
import pytest

from jetspark.core import (
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    JobFailedError,
    ProcessingGuarantee,
)
from jetspark.core.spark.continuous.restarts import POLL_SECONDS, members_for_restart
from jetspark.core.spark.failed_tasks import first_failed, spark_reason
from jetspark.core.spark.failures import configuration_error

EXACTLY_ONCE = ProcessingGuarantee.EXACTLY_ONCE
MAX_RESTARTS = 3


# ------------------------------------------------------------- the wait for free slots


class FakeClock:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_restart_keeps_its_members_once_the_slots_are_back() -> None:
    clock = FakeClock()
    free = iter([1, 1, 1, 2])
    members = members_for_restart(2, lambda: next(free), 30.0, clock=clock, sleep=clock.sleep)
    assert members == 2 and clock.now == pytest.approx(3 * POLL_SECONDS)


def test_a_restart_takes_the_slots_it_has_once_the_wait_is_over() -> None:
    clock = FakeClock()
    members = members_for_restart(3, lambda: 1, 5.0, clock=clock, sleep=clock.sleep)
    assert members == 1 and clock.now == pytest.approx(5.0)


def test_a_job_cancelled_during_the_wait_stops_waiting() -> None:
    clock = FakeClock()
    cancelled = iter([False, True])
    members = members_for_restart(
        2, lambda: 1, 60.0, lambda: next(cancelled), clock=clock, sleep=clock.sleep
    )
    assert members == 1 and clock.now == pytest.approx(POLL_SECONDS)


def test_a_cluster_without_slots_gives_no_members() -> None:
    clock = FakeClock()
    assert members_for_restart(2, lambda: -1, 1.0, clock=clock, sleep=clock.sleep) == 0


# ---------------------------------------------------------- what Spark's texts say

BARRIER_FAILURE = (
    "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Could not recover "
    "from a failed barrier ResultStage. Most recent failure reason: Stage failed because "
    "barrier task ResultTask(7, 1) finished unsuccessfully.\n{reason}\n"
    "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler)\n"
)
STORE_ERROR = (
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
    '  File "/x/member.py", line 3, in __setstate__\n'
    "jetspark.core.errors.SnapshotError: snapshot store '/s' does not exist on host-b: the "
    "driver and every executor must reach it at the same path (shared storage)\n"
)

COORDINATOR_UNREACHABLE = (
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
    '  File "/x/member.py", line 3, in __call__\n'
    "jetspark.core.spark.continuous.sockets.UnreachableError: member 1 on 10.0.0.3 cannot "
    "reach the driver's coordinator at 10.0.0.1:7077 (no answer): spark.jetspark.coordinator"
    ".port must accept connections from every executor\n"
)


def test_a_coordinator_no_member_reaches_fails_the_job_naming_address_port_and_setting() -> None:
    """Not a lost member: the job would fail the same way at every restart."""
    from py4j.protocol import Py4JError

    from jetspark.core.spark.failures import spark_job_error

    failure = Py4JError(BARRIER_FAILURE.format(reason=COORDINATOR_UNREACHABLE))
    error = spark_job_error(failure, "job", {}, "python3")
    assert str(error) == (
        "job failed on Spark: member 1 on 10.0.0.3 cannot reach the driver's coordinator at "
        "10.0.0.1:7077 (no answer): spark.jetspark.coordinator.port must accept connections "
        "from every executor"
    )


@pytest.mark.parametrize(
    ("reason", "configuration"),
    [
        (STORE_ERROR, True),
        ('java.io.IOException: Cannot run program "/no/python": error=2, No such file', True),
        (
            "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            "ModuleNotFoundError: No module named 'missing_one'\n",
            True,
        ),
        (
            "org.apache.spark.scheduler.BarrierJobRunWithDynamicAllocationException: [SPARK-24942]"
            ": Barrier execution mode does not support dynamic resource allocation",
            True,
        ),
        (
            "ExecutorLostFailure (executor 1 exited caused by one of the running tasks) Reason: "
            "Command exited with code 137",
            False,
        ),
        ("org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)", False),
        ("TaskKilled (Stage cancelled: Job 3 cancelled)", False),
        (
            "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            "jetspark.core.spark.continuous.streams.PeerLostError: member 0 is gone\n",
            False,
        ),
        (COORDINATOR_UNREACHABLE, True),
        (
            "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            "jetspark.core.spark.continuous.sockets.UnreachableError: member 0 on h cannot "
            "reach member 1 at 10.0.0.2:7078 (no answer): ...\n",
            False,
        ),
    ],
)
def test_configuration_errors_are_told_from_lost_members(reason: str, configuration: bool) -> None:
    text = BARRIER_FAILURE.format(reason=reason)
    assert configuration_error(text) is configuration
    assert first_failed(text) == (7, 1)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (
            "ExecutorLostFailure (executor 1 exited caused by one of the running tasks) Reason: "
            "Command exited with code 137\n",
            "ExecutorLostFailure (executor 1 exited caused by one of the running tasks) Reason: "
            "Command exited with code 137",
        ),
        (
            "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). "
            "Consider setting 'spark.python.worker.faulthandler.enabled'\n"
            "Caused by: java.io.EOFException\n\t... 22 more",
            "Python worker exited unexpectedly (crashed)",
        ),
        (
            "TaskKilled (Stage cancelled: Job 3 cancelled)",
            "task killed: Stage cancelled: Job 3 cancelled",
        ),
        (
            STORE_ERROR,
            "jetspark.core.errors.SnapshotError: snapshot store '/s' does not exist on "
            "host-b: the driver and every executor must reach it at the same path (shared "
            "storage)",
        ),
    ],
)
def test_sparks_reason_in_one_line(message: str, reason: str) -> None:
    assert spark_reason(message) == reason


# ------------------------------------------------------------ on Spark, local[2]


@pytest.fixture
def engine(spark_engine: Any) -> Any:
    from jetspark.core.spark import SparkEngine

    return SparkEngine(spark_engine.context, members=2)


@pytest.fixture
def worker_python(spark_engine: Any) -> Iterator[Any]:
    """Sets the Python the executors run for the jobs started in one test."""
    context = spark_engine.context
    before = context.pythonExec

    def use(python: str) -> None:
        context.pythonExec = python

    yield use
    context.pythonExec = before


def _config(mode: ExecutionMode) -> JobConfig:
    return JobConfig(
        processing_guarantee=EXACTLY_ONCE,
        snapshot_interval_millis=50,
        execution_mode=mode,
        max_restarts=MAX_RESTARTS,
    )


def _failure_of(
    engine: Any, mode: ExecutionMode, store: Any, dag: Any = None
) -> tuple[JobFailedError, Any]:
    """The error the job of `dag` (default: counting words) fails with, and the job."""
    engine.get_list("words").extend(jobs.words(200))
    engine.get_list("numbers").extend(range(200))
    job = engine.new_job(dag or jobs.counting_dag(_same), _config(mode), snapshot_store=store)
    with pytest.raises(JobFailedError) as failure:
        job.join(240)
    return failure.value, job


def _same(item: Any) -> Any:
    return item


@pytest.mark.spark
@pytest.mark.parametrize("mode", [ExecutionMode.CONTINUOUS, ExecutionMode.MICRO_BATCH])
def test_a_python_the_workers_cannot_run_fails_at_once_naming_the_host(
    engine: Any, worker_python: Any, tmp_path: Path, mode: ExecutionMode
) -> None:
    worker_python("/nonexistent/python3")
    error, job = _failure_of(engine, mode, DirectorySnapshotStore(tmp_path / "snapshots"))
    message = str(error)
    assert "the executors cannot run their Python '/nonexistent/python3'" in message, message
    assert re.search(r"\(on (member \d on )?host \S+, executor \S+\)", message), message
    assert job.metrics.restarts == 0


def _private_mounts_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs none /mnt"], capture_output=True
    )
    return probe.returncode == 0


def _python_seeing_a_mount(tmp_path: Path, directory: Path, options: str) -> str:
    """A Python for the executors that runs in a mount namespace of its own, where a tmpfs
    mounted with `options` covers `directory`: as on a worker whose /tmp is its own."""
    wrapper = tmp_path / "python-on-another-host"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'exec unshare -m sh -c \'mount -t tmpfs -o {options} none "$0" && exec "$@"\' '
        f'{directory} {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


needs_private_mounts = pytest.mark.skipif(
    not _private_mounts_work(), reason="needs unshare -m and mount (root) to hide a directory"
)


@pytest.mark.spark
@needs_private_mounts
def test_a_snapshot_store_the_executors_cannot_see_fails_at_once_naming_the_host(
    engine: Any, worker_python: Any, tmp_path: Path
) -> None:
    """An empty tmpfs hides the store's directory from the executors."""
    shared = tmp_path / "shared"
    store = DirectorySnapshotStore(shared / "snapshots")
    worker_python(_python_seeing_a_mount(tmp_path, shared, "rw"))
    error, job = _failure_of(engine, ExecutionMode.CONTINUOUS, store)
    message = str(error)
    assert f"snapshot store '{shared / 'snapshots'}' does not exist on " in message, message
    assert re.search(r"\(on member \d on host \S+, executor \S+\)", message), message
    assert job.metrics.restarts == 0


@pytest.mark.spark
@needs_private_mounts
def test_a_sink_directory_the_executors_cannot_write_fails_at_once_naming_the_host(
    engine: Any, worker_python: Any, tmp_path: Path
) -> None:
    """A read-only tmpfs covers the transactional sink's parent directory on the executors."""
    shared = tmp_path / "shared"
    shared.mkdir()
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    worker_python(_python_seeing_a_mount(tmp_path, shared, "ro"))
    dag = jobs.file_dag(_same, str(shared / "out"))
    error, job = _failure_of(engine, ExecutionMode.CONTINUOUS, store, dag)
    message = str(error)
    assert error.vertex_name == "sink" and "Read-only file system" in message, message
    assert re.search(r"\(on member \d on host \S+\)", message), message
    assert job.metrics.restarts == 0


@pytest.mark.spark
def test_a_barrier_stage_spark_refuses_fails_at_once_naming_the_setting(
    engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dynamic allocation turned on after the job was accepted: Spark refuses each launch of
    the members' barrier stage, which no restart can change."""
    from jetspark.core.spark import modes

    monkeypatch.setattr(modes, "barrier_refusal", lambda context: None)
    conf = engine.context._jsc.sc().conf()
    keys = ("spark.dynamicAllocation.enabled", "spark.dynamicAllocation.testing")
    for key in keys:
        conf.set(key, "true")
    try:
        error, job = _failure_of(
            engine, ExecutionMode.CONTINUOUS, DirectorySnapshotStore(tmp_path / "snapshots")
        )
    finally:
        for key in keys:
            conf.remove(key)
    message = str(error)
    assert "Spark refuses the job's barrier stage" in message, message
    assert "spark.dynamicAllocation.enabled" in message, message
    assert job.metrics.restarts == 0


@pytest.mark.spark
def test_a_lost_member_is_named_with_its_host_executor_and_sparks_reason(
    engine: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    items = jobs.events(3000)
    engine.get_list("events").extend(items)
    snapshots = str(tmp_path / "snapshots")
    kill = jobs.SignalOnce(signal.SIGKILL, 400, snapshots, str(tmp_path / "killed"))
    config = JobConfig(
        processing_guarantee=EXACTLY_ONCE,
        snapshot_interval_millis=5,
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
        job = engine.new_job(
            jobs.windowed_dag(kill), config, snapshot_store=DirectorySnapshotStore(snapshots)
        )
        job.join(240)
    assert engine.get_map("windows") == jobs.expected_windows(items)
    assert job.metrics.restarts == 1 and job.metrics.rescales == 0
    [lost] = [r.getMessage() for r in caplog.records if "a member was lost" in r.getMessage()]
    assert re.search(
        r"a member was lost: member [01] on host \S+, executor driver \(Python worker exited "
        r"unexpectedly \(crashed\)\); restart 1 of at most \d+, from snapshot \d+",
        lost,
    ), lost
    assert os.path.exists(tmp_path / "killed")
