"""When snapshots start (core/runtime/snapshot.py, core/spark/continuous/coordinator.py).

A snapshot never starts before the previous one committed, however long that one takes: on
LocalEngine's coordinator and on a continuous job's driver (MICRO_BATCH runs its batches one
after another, each ending with its snapshot; STAGES takes none). One that took longer than the
interval is followed by the next a whole interval after its commit, not at once, so the job
runs between snapshots, and it is warned of with its time and bytes, at most once every
SLOW_WARNING_PERIOD. Saves and restores run with the garbage collector paused (gc_pause.py).
Every clock here is the test's; the continuous driver's members are fakes (fake_members.py), so
no Spark runs.
"""

from __future__ import annotations

import gc
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_members import WaitClock, clock, snapshot_asked, two_members  # noqa: F401

from jetspark.core import DAG, AbstractProcessor, JobConfig, ProcessingGuarantee
from jetspark.core.runtime.build import build_member
from jetspark.core.runtime.plan import plan_job
from jetspark.core.runtime.snapshot import SLOW_WARNING_PERIOD, SnapshotCoordinator
from jetspark.core.serialization import encode_batch
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.core.snapshot_store import (
    DirectorySnapshotStore,
    InMemorySnapshotStore,
    ProcessorSnapshot,
    Snapshot,
    held_by,
)
from jetspark.core.spark.continuous import control
from jetspark.core.stores import Stores

INTERVAL = 2.0
STATE_BYTES = 2_000_000


class HeldSave(AbstractProcessor):
    """A source that never completes; its saves wait until `release["save"]`. It notes in
    `collector` whether the garbage collector ran during each save and restore call."""

    def __init__(self, release: dict[str, bool], collector: list[bool]) -> None:
        super().__init__()
        self.release = release
        self.collector = collector

    def complete(self) -> bool:
        return False

    def save_to_snapshot(self) -> bool:
        self.collector.append(gc.isenabled())
        if not self.release["save"]:
            return False
        return self.try_emit_to_snapshot(broadcast_key("state"), b"s" * STATE_BYTES)

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        self.collector.append(gc.isenabled())


class HeldJob:
    """A HeldSave job on LocalEngine's coordinator, driven a few rounds at a time at a time of
    the test's choosing."""

    def __init__(self, restore_from: Snapshot | None = None) -> None:
        self.release = {"save": False}
        self.collector: list[bool] = []
        dag = DAG("held")
        dag.new_vertex("held", lambda: HeldSave(self.release, self.collector)).local_parallelism(1)
        config = JobConfig(
            processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
            snapshot_interval_millis=int(INTERVAL * 1000),
        )
        self.plan = plan_job(dag, config, 1, 1, stores=Stores())
        self.store = InMemorySnapshotStore()
        self.now = 0.0
        self.coordinator = SnapshotCoordinator(
            self.plan,
            self.store,
            clock=lambda: self.now,
            restore_from=restore_from,
            job_name="held-job",
        )
        self._rounds = build_member(self.plan, snapshots=self.coordinator).run_iter()

    def at(self, now: float) -> None:
        """Ten rounds at time `now`."""
        self.now = now
        for _ in range(10):
            next(self._rounds)

    @property
    def started(self) -> int:
        """The last snapshot started."""
        return self.coordinator.requested_id

    @property
    def committed(self) -> int | None:
        """The last snapshot committed."""
        latest = self.store.latest()
        return None if latest is None else latest.snapshot_id

    def take(self, started: float, committed: float) -> None:
        """Lets the snapshot started at `started` commit at `committed` (then holds saves)."""
        self.at(started)
        self.release["save"] = True
        self.at(committed)
        self.release["save"] = False

    def close(self) -> None:
        self._rounds.close()
        self.plan.close(None)


@pytest.fixture
def held_job() -> Iterator[HeldJob]:
    job = HeldJob()
    try:
        yield job
    finally:
        job.close()


def test_a_snapshot_starts_only_after_the_last_one_committed_and_a_slow_one_leaves_an_interval(
    held_job: HeldJob,
) -> None:
    held_job.at(0.0)
    assert held_job.started == 0, "the first snapshot is one interval after the first round"
    held_job.at(INTERVAL)
    assert held_job.started == 1
    for now in (2 * INTERVAL, 10 * INTERVAL, 300 * INTERVAL):
        held_job.at(now)
        assert (held_job.started, held_job.committed) == (1, None), f"at {now} s"
    held_job.release["save"] = True
    held_job.at(300 * INTERVAL)
    assert held_job.committed == 1
    held_job.release["save"] = False
    held_job.at(301 * INTERVAL - 0.1)
    assert held_job.started == 1, "it took longer than the interval: the next is one after it"
    held_job.at(301 * INTERVAL)
    assert held_job.started == 2


def test_a_snapshot_longer_than_the_interval_is_warned_of_with_its_time_and_bytes(
    held_job: HeldJob, caplog: pytest.LogCaptureFixture
) -> None:
    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if "longer than the" in r.getMessage()]

    with caplog.at_level(logging.WARNING, logger="jetspark.snapshots"):
        held_job.at(0.0)
        held_job.take(INTERVAL, 100.0)  # snapshot 1: 98 s
        [first] = warnings()
        assert first.startswith(
            "snapshot 1 of job held-job took 98.0 s and wrote 2.0 MB, longer than the 2 s "
            "snapshot interval: the next snapshot starts one interval after this one committed"
        ), first
        assert "Raise JobConfig.snapshot_interval_millis" in first
        assert "vertex 'held' saved 2.0 MB of it" in first
        held_job.take(100.0 + INTERVAL, 150.0)  # snapshot 2: slow again, within the period
        held_job.take(150.0 + INTERVAL, 150.0 + INTERVAL)  # snapshot 3: within the interval
        assert (held_job.committed, len(warnings())) == (3, 1)
        later = 100.0 + SLOW_WARNING_PERIOD
        held_job.take(152.0 + INTERVAL, later)  # snapshot 4: slow, once the period is over
        assert held_job.committed == 4
        assert len(warnings()) == 2
        assert warnings()[1].startswith(f"snapshot 4 of job held-job took {later - 154.0:.1f} s")
        assert "(1 more took longer since the last warning)" in warnings()[1]


def test_the_driver_of_a_continuous_job_asks_for_no_snapshot_before_the_last_one_committed(
    two_members: Any,  # noqa: F811
    clock: WaitClock,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    the_coordinator, connect = two_members
    the_coordinator.begin_run("run1")
    members = [connect("run1", member, 1) for member in (0, 1)]
    snapshot_id = snapshot_asked(members[0])
    assert snapshot_asked(members[1]) == snapshot_id
    clock.now = 5.0
    clock.read_again(20)  # 20 rounds of the driver's schedule, each a 10 ms interval or more
    store = DirectorySnapshotStore(tmp_path / "snapshots")  # the store two_members made
    with caplog.at_level(logging.WARNING, logger="jetspark.snapshots"):
        for member, connection in enumerate(members):
            states = {
                (vertex, member): ProcessorSnapshot(encode_batch([(member, "x" * 100)]))
                for vertex in ("numbers", "sink")
            }
            name = f"member{member}-run1"
            tag = store.write_part(snapshot_id, name, states)
            sizes = {vertex: len(saved.data) for (vertex, _), saved in states.items()}
            part = (snapshot_id, name, tag, held_by(states), sizes, "here", [])
            connection.send(control.PART, part)
        for connection in members:
            assert connection.receive() == (control.COMMITTED, snapshot_id)
            assert connection.receive() == (control.SNAPSHOT, snapshot_id + 1)
    [warning] = [r.getMessage() for r in caplog.records if "longer than the" in r.getMessage()]
    assert re.match(
        rf"snapshot {snapshot_id} of job job-44 took 5\.0 s and wrote \d+ bytes, longer than the "
        r"0\.01 s snapshot interval",
        warning,
    ), warning
    for connection in members:
        connection.close()


def test_saves_and_restores_run_with_the_collector_paused(held_job: HeldJob) -> None:
    assert gc.isenabled()
    held_job.at(0.0)
    held_job.take(INTERVAL, INTERVAL)
    assert held_job.collector and not any(held_job.collector), "every save call, paused"
    restored = HeldJob(restore_from=held_job.store.latest())
    try:
        restored.at(0.0)
        assert restored.collector == [False]
    finally:
        restored.close()
    assert gc.isenabled(), "and runs again after"
