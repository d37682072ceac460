"""A snapshot store under two jobs, with a damaged newest snapshot, and copied to a process that
may not write it (issue 28 item 4 and its POOR note on `latest()`; issue 25 item 15).

A store takes the snapshots of one job at a time: a second job is refused when it is submitted,
naming the job, process and host that hold the store, and the holder goes on undisturbed.
`latest()` refuses to fall back silently when the newest snapshot is damaged.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_snapshots_store import half_write, snapshot

from jetspark.core import (
    DAG,
    DirectorySnapshotStore,
    InMemorySnapshotStore,
    JobCancelledError,
    JobConfig,
    LocalEngine,
    ProcessingGuarantee,
    SnapshotError,
)
from jetspark.core.job import Job, JobStatus
from jetspark.edges import between
from jetspark.processors import filter_p, stream_journal_p

pytestmark = pytest.mark.timeout(120)

HOST = socket.gethostname()
STREAMING = JobConfig(
    name="first", processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=1
)


def endless_dag() -> DAG:
    """An unbounded journal into a filter that keeps nothing: runs and snapshots until cancelled."""
    dag = DAG("endless")
    source = dag.new_vertex("numbers", stream_journal_p(lambda offset: offset), local_parallelism=1)
    sink = dag.new_vertex("drop", filter_p(lambda n: False), local_parallelism=1)
    dag.edge(between(source, sink))
    return dag


def snapshots_taken(job: Job, more_than: int = 0, timeout: float = 60) -> int:
    """Waits until the job's store holds a snapshot newer than `more_than`; returns its id."""
    deadline = time.monotonic() + timeout
    while True:
        assert job.status is JobStatus.RUNNING, job.status
        latest = job.snapshot_store.latest() if job.snapshot_store is not None else None
        if latest is not None and latest.snapshot_id > more_than:
            return latest.snapshot_id
        assert time.monotonic() < deadline, "the job took no snapshot"
        time.sleep(0.01)


def cancelled(job: Job) -> None:
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(60)


@pytest.mark.parametrize("kind", ["memory", "directory"])
def test_a_second_job_on_a_running_jobs_store_is_refused_at_once_and_the_first_goes_on(
    tmp_path: Path, kind: str
) -> None:
    store: Any = (
        InMemorySnapshotStore() if kind == "memory" else DirectorySnapshotStore(tmp_path / "s")
    )
    engine = LocalEngine()
    first = engine.new_job(endless_dag(), STREAMING, snapshot_store=store)
    before = snapshots_taken(first)
    second_config = replace(STREAMING, name="second")
    with pytest.raises(SnapshotError) as refused:
        engine.new_job(endless_dag(), second_config, snapshot_store=store)
    message = str(refused.value)
    assert f"in use by job 'first' (process {os.getpid()} on {HOST})" in message
    assert snapshots_taken(first, more_than=before + 2) > before + 2  # undisturbed
    assert first.status is JobStatus.RUNNING
    cancelled(first)
    # the store is free once the first job has ended: the second continues from it
    second = engine.new_job(
        endless_dag(), second_config, snapshot_store=store, restore_from=store.latest()
    )
    snapshots_taken(second, more_than=store.latest().snapshot_id)
    cancelled(second)


def test_two_store_objects_on_one_directory_are_one_store_and_a_restart_takes_it_over(
    tmp_path: Path,
) -> None:
    engine = LocalEngine()
    first = engine.new_job(
        endless_dag(), STREAMING, snapshot_store=DirectorySnapshotStore(tmp_path)
    )
    taken = snapshots_taken(first)
    with pytest.raises(SnapshotError, match="in use by job 'first'"):
        engine.new_job(endless_dag(), STREAMING, snapshot_store=DirectorySnapshotStore(tmp_path))
    again = first.restart()  # waits for the first job to end, then takes the store
    assert first.status is JobStatus.CANCELLED
    snapshots_taken(again, more_than=taken)
    cancelled(again)


def test_a_lease_is_released_once_and_names_its_holder(tmp_path: Path) -> None:
    for store in (InMemorySnapshotStore(), DirectorySnapshotStore(tmp_path)):
        lease = store.acquire("mine")
        assert (lease.holder.job, lease.holder.pid, lease.holder.host) == (
            "mine",
            os.getpid(),
            HOST,
        )
        lease.release()
        lease.release()  # idempotent
        store.acquire("next").release()
    assert os.listdir(tmp_path) == ["KEY"], "a released lease leaves no lock file behind"


HOLDER = """
import sys
from jetspark.core import DirectorySnapshotStore
store = DirectorySnapshotStore(sys.argv[1])
lease = store.acquire("held-elsewhere")
print("held", flush=True)
for command in sys.stdin:
    if command.strip() == "check":
        with open(sys.argv[1] + "/LOCK") as lock:
            print("still mine" if '"held-elsewhere"' in lock.read() else "lost", flush=True)
    elif command.strip() == "release":
        lease.release()
        print("released", flush=True)
"""


def holder_process(directory: Path) -> subprocess.Popen[str]:
    """A Python process holding the store's lease, driven through its stdin."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def ask(child: subprocess.Popen[str], command: str) -> str:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(command + "\n")
    child.stdin.flush()
    return child.stdout.readline().strip()


def test_a_store_held_by_another_process_is_refused_naming_it(tmp_path: Path) -> None:
    store = DirectorySnapshotStore(tmp_path)
    child = holder_process(tmp_path)
    try:
        expected = f"in use by job 'held-elsewhere' (process {child.pid} on {HOST})"
        with pytest.raises(SnapshotError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            LocalEngine().new_job(endless_dag(), STREAMING, snapshot_store=store)
        assert ask(child, "check") == "still mine"
        assert ask(child, "release") == "released"
        first = LocalEngine().new_job(endless_dag(), STREAMING, snapshot_store=store)
        snapshots_taken(first)
        cancelled(first)
    finally:
        child.kill()
        child.wait()


def test_a_lock_whose_process_is_gone_is_taken_over_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = DirectorySnapshotStore(tmp_path)
    child = holder_process(tmp_path)
    child.send_signal(signal.SIGKILL)
    child.wait()
    with caplog.at_level(logging.WARNING, logger="jetspark.snapshots"):
        lease = store.acquire("successor")
    lease.release()
    assert (
        f"taking it over from job 'held-elsewhere' (process {child.pid} on {HOST}), which ended "
        "without giving it back" in caplog.text
    )


def with_second_snapshot(directory: Path, *, committed: bool) -> DirectorySnapshotStore:
    """A store holding snapshot 1, and snapshot 2 whole (`committed`) or without a manifest."""
    store = DirectorySnapshotStore(directory)
    store.save(snapshot(1))
    half_write(store, 2, parts=2 if committed else 1, manifest=committed)
    return store


def test_a_damaged_newest_snapshot_is_an_error_unless_the_newest_intact_one_is_asked_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = with_second_snapshot(tmp_path, committed=True)
    manifest = tmp_path / "snapshot-0000000002" / "MANIFEST"
    manifest.write_bytes(b"\0" + manifest.read_bytes()[1:])
    with pytest.raises(SnapshotError, match=r"snapshot 2, the newest, is damaged \(MANIFEST fails"):
        store.latest()
    with caplog.at_level(logging.ERROR, logger="jetspark.snapshots"):
        assert store.latest(skip_damaged=True) == snapshot(1)
    assert "snapshot 2 is damaged (MANIFEST fails authentication" in caplog.text


def test_a_snapshot_never_committed_is_skipped_without_a_warning_and_noted_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = with_second_snapshot(tmp_path, committed=False)
    with caplog.at_level(logging.DEBUG, logger="jetspark.snapshots"):
        assert store.latest() == snapshot(1)
        assert DirectorySnapshotStore(tmp_path).latest() == snapshot(1)
    records = [r for r in caplog.records if r.name == "jetspark.snapshots"]
    assert [(r.levelname, r.getMessage()) for r in records] == [
        ("DEBUG", f"{store}: snapshot 2 was never committed (no manifest)")
    ]


def test_an_unpickled_copy_refuses_a_directory_the_constructor_would_refuse(
    tmp_path: Path,
) -> None:
    store = DirectorySnapshotStore(tmp_path / "store")
    shipped = pickle.dumps(store)
    assert pickle.loads(shipped).latest() is None
    (tmp_path / "store").chmod(0o777)  # what an executor finds: a directory others can write
    with pytest.raises(SnapshotError, match=r"writable by other users \(mode 777\)"):
        pickle.loads(shipped)
    (tmp_path / "store").chmod(0o700)
    (tmp_path / "store").rename(tmp_path / "elsewhere")
    with pytest.raises(SnapshotError, match=f"does not exist on {HOST}: the driver and every"):
        pickle.loads(shipped)


def test_an_executor_running_as_another_user_is_told_how_to_set_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = pickle.dumps(DirectorySnapshotStore(tmp_path))
    owner = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: owner + 185)  # a Kubernetes executor's uid
    with pytest.raises(SnapshotError) as refused:
        pickle.loads(shipped)
    assert f"belongs to uid {owner}, but this process runs as uid {owner + 185}" in str(
        refused.value
    )
    assert "Executors running as another user' in docs/fault_tolerance.md" in str(refused.value)
