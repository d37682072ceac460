"""Restarting a job in another process from a DirectorySnapshotStore, after its first process
was killed (SIGKILL) at an item or while writing a snapshot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from fault_tolerance_jobs import NUMBERS, committed_lines, config, engine, file_dag

from jetspark.core import DirectorySnapshotStore

pytestmark = pytest.mark.timeout(120)

CHILD = os.path.join(os.path.dirname(__file__), "fault_tolerance_jobs.py")


def killed_child(work: str, mode: str, n: int) -> None:
    """Runs the file job in a child process that kills itself as `mode` and `n` say."""
    child = subprocess.run(
        [sys.executable, CHILD, work, mode, str(n)], capture_output=True, text=True, timeout=100
    )
    assert child.returncode == -signal.SIGKILL, child.stderr


def finish_here(work: str) -> DirectorySnapshotStore:
    """Restores the job from the store's latest snapshot in this process and runs it to the end."""
    store = DirectorySnapshotStore(os.path.join(work, "snapshots"))
    local = engine()
    local.get_list("numbers").extend(range(NUMBERS))
    dag = file_dag(lambda n: n, os.path.join(work, "out"))
    local.new_job(dag, config(interval=2), snapshot_store=store, restore_from=store.latest()).join(
        60
    )
    return store


def test_a_job_killed_at_an_item_continues_in_another_process_exactly_once(tmp_path):
    work = str(tmp_path)
    killed_child(work, "item", 2000)
    store = DirectorySnapshotStore(os.path.join(work, "snapshots"))
    assert store.latest() is not None, "the child committed snapshots before it died"
    finish_here(work)
    assert committed_lines(os.path.join(work, "out")) == sorted(map(str, range(NUMBERS)))


def test_a_snapshot_half_written_when_the_process_died_is_never_used(tmp_path):
    work = str(tmp_path)
    killed_child(work, "manifest", 5)
    store = DirectorySnapshotStore(os.path.join(work, "snapshots"))
    half = os.path.join(store.directory, "snapshot-0000000005")
    assert os.listdir(half) and "MANIFEST" not in os.listdir(half)
    latest = store.latest()
    assert latest is not None and latest.snapshot_id == 4
    finish_here(work)
    assert committed_lines(os.path.join(work, "out")) == sorted(map(str, range(NUMBERS)))
    assert not os.path.exists(half), "the half-written snapshot is cleared once a newer one exists"
