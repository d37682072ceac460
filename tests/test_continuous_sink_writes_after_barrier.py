"""A sink's writes after it saved snapshot N, while another sink of its member still aligns,
belong to the snapshot after N: a restore from N gives every item once (issue #32: they were
shipped as part of N and came again after the restore).

Two list sinks at local parallelism 2 on 2 members, fed by the same sources. Nothing is timed:
each source emits its first half, waits until it saved, then emits the rest right behind its
barrier; sink "b" on each member saves snapshot 1 only once sink "a" of its member wrote an item
after its own save (or after SAVE_CALLS calls: a sink made to wait for its member's part never
writes); after snapshot 1 commits, sink "b" of member 1 kills its Python worker (SIGKILL), so
the job restarts from snapshot 1.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.inbox import Inbox
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.edges import from_
from jetspark.processors.sinks import WriteListP

pytestmark = pytest.mark.spark

HALF = 500
"""Items each source processor emits before its first save, and after it."""
SOURCES = 4
SAVE_CALLS = 200


class HalfBeforeItsSave(AbstractProcessor):
    """Processor i emits its range of 2 * HALF numbers: the first half, then the rest once it
    saved a snapshot (or was restored from one)."""

    def __init__(self) -> None:
        super().__init__()
        self.next = 0
        self.saved = False

    def complete(self) -> bool:
        first = self.context.global_processor_index * 2 * HALF
        end = HALF if not self.saved else 2 * HALF
        while self.next < end and self.try_emit(first + self.next):
            self.next += 1
        return self.next == 2 * HALF

    def save_to_snapshot(self) -> bool:
        self.saved = True
        return self.try_emit_to_snapshot(
            broadcast_key(self.context.global_processor_index), self.next
        )

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if key == broadcast_key(self.context.global_processor_index):
            self.next, self.saved = value, True


class NotesWritesAfterItsSave(WriteListP):
    """List sink "a": notes (a file per member) when it writes after its first save."""

    def __init__(self, flags: str) -> None:
        super().__init__("a")
        self.flags = flags
        self.saved = False

    def process(self, ordinal: int, inbox: Inbox) -> None:
        if self.saved:
            Path(self.flags, f"a-wrote-after-save-{self.context.member_index}").touch()
        super().process(ordinal, inbox)

    def save_to_snapshot(self) -> bool:
        self.saved = True
        return True


class SavesAfterTheOtherSinkWrote(WriteListP):
    """List sink "b": saves once sink "a" of its member wrote after its save (or after
    SAVE_CALLS calls); after the first commit, processor 3 kills its Python worker once."""

    def __init__(self, flags: str) -> None:
        super().__init__("b")
        self.flags = flags
        self.calls = 0

    def save_to_snapshot(self) -> bool:
        self.calls += 1
        member = self.context.member_index
        wrote = os.path.join(self.flags, f"a-wrote-after-save-{member}")
        return os.path.exists(wrote) or self.calls >= SAVE_CALLS

    def snapshot_committed(self) -> None:
        marker = os.path.join(self.flags, "killed")
        if self.context.global_processor_index == 3 and not os.path.exists(marker):
            Path(marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)


def test_writes_after_a_sinks_barrier_count_once_across_a_restore(
    spark_engine: Any, tmp_path: Any
) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    flags = str(tmp_path)
    dag = DAG("two sinks")
    source = dag.new_vertex("source", HalfBeforeItsSave).local_parallelism(2)
    a = dag.new_vertex("a", lambda: NotesWritesAfterItsSave(flags)).local_parallelism(2)
    b = dag.new_vertex("b", lambda: SavesAfterTheOtherSinkWrote(flags)).local_parallelism(2)
    dag.edge(from_(source, 0).to(a))
    dag.edge(from_(source, 1).to(b))
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=200,
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    job = engine.new_job(dag, config, snapshot_store=DirectorySnapshotStore(tmp_path / "snaps"))
    job.join(240)
    assert os.path.exists(tmp_path / "killed")
    assert job.metrics.restarts == 1
    everything = list(range(SOURCES * 2 * HALF))
    assert sorted(engine.get_list("b")) == everything
    assert sorted(engine.get_list("a")) == everything
