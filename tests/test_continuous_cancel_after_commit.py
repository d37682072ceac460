"""A continuous job cancelled at any point of a snapshot's life publishes every committed line
exactly once: at once when the commit had reached the members before the cancel, else when a
later run restores the snapshot (issue #32: one member's files of a snapshot committed right
before a cancel stayed `.part-*.tmp` until a later run restored it).

Each point is reached by a hook, not by timing: the processors or the store wait there (for a
file the test writes once `job.cancel()` returned), and the test cancels when every member
waits. The points, in a snapshot's life:

- barrier: the barrier reached the sinks, which have not saved yet;
- part: each member wrote its part, and has not reported it yet;
- manifest: the driver wrote the manifest (the commit) and cancels before it tells the members;
- committed: the driver told the members of the commit (COMMITTED), which their loops have
  not taken in yet (the sources hold each member's loop from before the commit);
- published: the sinks published their files.

Then the test runs the job again, from the store's last snapshot, to its end.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
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
    ProcessingGuarantee,
)
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.core.snapshot_store import Held
from jetspark.edges import between
from jetspark.processors.sinks import WriteFileTransactionalP

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]  # two runs of a job

ITEMS = 100
MEMBERS = 2
PATIENCE_SECONDS = 120.0
"""How long a hook waits for the test before it fails the job (so a broken test never hangs)."""
POINTS = ("barrier", "part", "manifest", "committed", "published")
PUBLISHED_AT_CANCEL = {"committed", "published"}
"""The points after which the cancelled run itself has published the snapshot."""


def _wait_for(holds: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not holds():
        if time.monotonic() > deadline:
            raise RuntimeError(f"waited {PATIENCE_SECONDS:g} s for {what}")
        time.sleep(0.001)


class Hooks:
    """The files through which hooks and test meet, in the directory `work`."""

    def __init__(self, work: str, point: str) -> None:
        self.work, self.point = work, point

    def path(self, name: str) -> str:
        return os.path.join(self.work, name)

    def cancelled(self) -> bool:
        return os.path.exists(self.path("cancelled"))

    def wait_here(self, point: str, member: int) -> None:
        """At `point`, when it is the test's and the test did not cancel yet: says that this
        member waits, and waits until the test cancelled."""
        if point == self.point and not self.cancelled():
            Path(self.path(f"waiting-{member}")).touch()
            _wait_for(self.cancelled, "the test's cancel")

    def all_waiting(self) -> bool:
        return all(os.path.exists(self.path(f"waiting-{m}")) for m in range(MEMBERS))


class EmitsThenWaits(AbstractProcessor):
    """Processor 0 emits 0 .. ITEMS - 1; every processor then completes once the file `release`
    exists. At the point "committed" it holds its member's loop once the driver is committing."""

    def __init__(self, hooks: Hooks) -> None:
        super().__init__()
        self.hooks = hooks
        self.next = 0

    def complete(self) -> bool:
        first = self.context.global_processor_index == 0
        while first and self.next < ITEMS and self.try_emit(self.next):
            self.next += 1
        if os.path.exists(self.hooks.path("committing")):
            self.hooks.wait_here("committed", self.context.member_index)
        return (self.next == ITEMS or not first) and os.path.exists(self.hooks.path("release"))

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot(
            broadcast_key(self.context.global_processor_index), self.next
        )

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if key == broadcast_key(self.context.global_processor_index):
            self.next = value


class HookedFiles(WriteFileTransactionalP):
    """The transactional file sink, waiting at the points "barrier" and "published"."""

    def __init__(self, directory: str, hooks: Hooks) -> None:
        super().__init__(directory, str, "utf-8")
        self.hooks = hooks

    def save_to_snapshot(self) -> bool:
        self.hooks.wait_here("barrier", self.context.member_index)
        return super().save_to_snapshot()

    def snapshot_committed(self) -> None:
        super().snapshot_committed()
        self.hooks.wait_here("published", self.context.member_index)


class HookedStore(DirectorySnapshotStore):
    """The store, waiting at the point "part" (on the members) and, on the driver, calling
    `on_commit` when committing ("manifest": after the manifest, "committed": before it, once
    every member's loop is held)."""

    def __init__(self, directory: str, hooks: Hooks) -> None:
        super().__init__(directory)
        self.hooks = hooks
        self.on_commit: Callable[[], None] = lambda: None
        """Driver side only (not pickled)."""

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "hooks": self.hooks}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.hooks = state["hooks"]

    def write_part(self, snapshot_id: int, name: str, processors: Mapping[Any, Any]) -> bytes:
        tag = super().write_part(snapshot_id, name, processors)
        member = int(name.removeprefix("member").split("-", 1)[0])
        self.hooks.wait_here("part", member)
        return tag

    def commit(
        self,
        snapshot_id: int,
        member_count: int,
        local_parallelism: Mapping[str, int],
        parts: Mapping[str, tuple[bytes, Held]],
        routing: Any = None,
        definitions: Any = None,
    ) -> None:
        hooks = self.hooks
        first = not hooks.cancelled()
        if first and hooks.point == "committed":
            Path(hooks.path("committing")).touch()
            _wait_for(hooks.all_waiting, "every member's loop held")
        super().commit(snapshot_id, member_count, local_parallelism, parts, routing, definitions)
        if first and hooks.point in ("manifest", "committed"):
            self.on_commit()


@pytest.mark.parametrize("point", POINTS)
def test_a_cancel_at_any_point_of_a_snapshot_publishes_each_line_once(
    spark_engine: Any, tmp_path: Any, point: str
) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=MEMBERS)
    hooks = Hooks(str(tmp_path), point)
    out = str(tmp_path / "out")
    dag = DAG("cancel in a snapshot")
    source = dag.new_vertex("source", lambda: EmitsThenWaits(hooks)).local_parallelism(1)
    sink = dag.new_vertex("sink", lambda: HookedFiles(out, hooks)).local_parallelism(1)
    dag.edge(between(source, sink).distributed().partitioned(_number))
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=1000,
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    store = HookedStore(str(tmp_path / "snapshots"), hooks)
    job = engine.new_job(dag, config, snapshot_store=store)

    def cancel() -> None:
        job.cancel()
        Path(hooks.path("cancelled")).touch()

    cancelling: threading.Thread | None = None
    if point == "manifest":
        store.on_commit = cancel  # on the coordinator's thread: the members are not told
    elif point == "committed":
        # another thread's cancel waits for the coordinator, which tells the members first
        cancelling = threading.Thread(target=cancel)
        store.on_commit = cancelling.start
    else:
        _wait_for(lambda: hooks.all_waiting() or job.status.is_terminal, "every member")
        cancel()
    with contextlib.suppress(JobCancelledError):
        job.join(PATIENCE_SECONDS)
    if cancelling is not None:
        cancelling.join()
    everything = sorted(str(n) for n in range(ITEMS))
    assert hooks.cancelled()
    assert jobs.committed_lines(out) == (everything if point in PUBLISHED_AT_CANCEL else [])
    latest = store.latest()
    assert (latest is not None) == (point not in ("barrier", "part"))

    Path(hooks.path("release")).touch()
    plain = DirectorySnapshotStore(str(tmp_path / "snapshots"))  # the members get it by value
    again = engine.new_job(dag, config, snapshot_store=plain, restore_from=plain.latest())
    again.join(PATIENCE_SECONDS)
    assert jobs.committed_lines(out) == everything


def _number(item: int) -> int:
    return item
