"""The snapshot coordinator: when a job takes a snapshot, and when a snapshot is complete.

Jet's coordinator raises a job-wide flag at each snapshot interval (manual §7.8); here it is
`requested_id`, a number the tasklets read. A processor that has no input left (a source, or a
processor whose inbound edges are all done) sees it rise, saves its state and emits
`SnapshotBarrier(requested_id)`; every other processor saves when the barrier has come in on all
its input queues (see barrier.py and snapshot_tasklet.py). Each one reports its serialized
entries here; a processor that completes reports its final state once, which stands for it in
every later snapshot. When every processor of the job has reported for the current snapshot,
it is complete: it goes to the store, `committed_id` rises, and the processors learn of the
commit through `Processor.snapshot_committed()`.

When: the first snapshot one interval after the first `tick()`, then one interval after the
previous one started, and never before it committed. A snapshot that took longer than the
interval is followed by the next one a whole interval after its commit (Jet's rule), so the
job runs between snapshots however slow they are, and `SlowSnapshots` warns. Never while a
tasklet is restoring, and never while a processor still has to exhaust an inbound edge of a
lower priority number than its last: a barrier could not be aligned without consuming the
lower-priority edges early (manual §8.1.6), so such a job takes its first snapshot once every
prioritized edge is done.

`tick()` runs on the driver thread once per round; `saved()` and `completed()` may be called
from non-cooperative tasklets' threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from jetspark.core.config import ProcessingGuarantee
from jetspark.core.errors import JobFailedError
from jetspark.core.runtime.closing import CloseStep
from jetspark.core.runtime.coalescer import CarriedWatermarks
from jetspark.core.runtime.metrics import RECENT_SNAPSHOTS, SnapshotReport
from jetspark.core.runtime.restore import RestoredProcessor, route_snapshot
from jetspark.core.snapshot_store import ProcessorKey, ProcessorSnapshot, Snapshot, SnapshotStore

if TYPE_CHECKING:
    from jetspark.core.runtime.plan import JobPlan
    from jetspark.core.runtime.snapshot_tasklet import SnapshottingTasklet

_log = logging.getLogger("jetspark.snapshots")

Clock = Callable[[], float]
"""Seconds from any fixed origin (time.monotonic); tests pass a clock they advance."""

SLOW_WARNING_PERIOD = 300.0
"""Seconds between two warnings of a job's snapshots taking longer than its interval."""


class SlowSnapshots:
    """Warns that a job's snapshots take longer than its snapshot interval: at the first such
    snapshot, then at most once every `period` seconds of `clock`, counting those in between."""

    def __init__(
        self,
        job_name: str,
        interval: float,
        clock: Clock = time.monotonic,
        period: float = SLOW_WARNING_PERIOD,
    ) -> None:
        self._job_name = job_name
        self._interval = interval
        self._clock = clock
        self._period = period
        self._quiet_until: float | None = None
        self._unreported = 0
        """Snapshots longer than the interval since the last warning, not warned of."""

    def committed(self, snapshot_id: int, seconds: float, vertex_bytes: Mapping[str, int]) -> None:
        """Snapshot `snapshot_id` committed `seconds` after it started, holding `vertex_bytes`
        (vertex -> bytes of its processors' state); warns if it is due."""
        if seconds <= self._interval:
            return
        now = self._clock()
        if self._quiet_until is not None and now < self._quiet_until:
            self._unreported += 1
            return
        self._quiet_until = now + self._period
        size = sum(vertex_bytes.values())
        largest = max(vertex_bytes, key=vertex_bytes.__getitem__, default=None)
        since = (
            f" ({self._unreported} more took longer since the last warning)"
            if self._unreported
            else ""
        )
        self._unreported = 0
        _log.warning(
            "snapshot %d of job %s took %.1f s and wrote %s, longer than the %g s snapshot "
            "interval%s: the next snapshot starts one interval after this one committed, so "
            "the job runs between snapshots but takes them less often than asked. Raise "
            "JobConfig.snapshot_interval_millis above the time a snapshot takes, or keep less "
            "state%s",
            snapshot_id,
            self._job_name,
            seconds,
            _size(size),
            self._interval,
            since,
            f" (vertex '{largest}' saved {_size(vertex_bytes[largest])} of it)"
            if largest is not None
            else "",
        )


def next_start_after_commit(next_start: float, now: float, interval: float) -> float:
    """When the next snapshot starts, given that the last one committed at `now`: as planned
    (`next_start`), unless it was due already; then a whole interval after the commit (Jet's
    rule for a snapshot that took longer than the interval)."""
    return now + interval if now > next_start else next_start


def _size(size: int) -> str:
    """`size` bytes in the unit that reads best: bytes, kB, MB or GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size} bytes"


class SnapshotCoordinator:
    """Starts the snapshots of one job run, collects the processors' states and commits them.

    `restore_from` is the snapshot the run starts from (its entries are routed to the new
    processors by `restored()`); snapshot ids continue above it and above every snapshot in
    `store`.
    """

    batch_snapshot_id: int | None = None
    """Micro-batch runs (SparkEngine): the one snapshot the run takes; every processor stops
    once it saved it (see jetspark.core.spark.microbatch.batch). None: a continuous run."""
    source_item_budget: int | None = None
    """Micro-batch runs: the items each source processor may emit before it saves."""
    sources_read_to_the_end: frozenset[str] = frozenset()
    """Micro-batch runs: source vertices feeding a prioritized edge; they save only when they
    complete, since a barrier cannot be aligned before the prioritized edges are done."""
    unbudgeted_sources: frozenset[str] = frozenset()
    """Micro-batch runs: source vertices that read all their batch's input (a Spark stream's
    batch), with no item budget."""
    replayed_input: Mapping[ProcessorKey, int] = MappingProxyType({})
    """Micro-batch runs of a task that ran before: the items each of its source processors
    emitted then, which it must emit again, exactly."""
    carried_watermarks: Mapping[ProcessorKey, CarriedWatermarks] = MappingProxyType({})
    """Micro-batch runs: each processor's coalescer state at the end of the previous batch."""
    holding_back: bool = False
    """True while a continuous member's sink writes that the driver holds are over its share:
    processors that saved the snapshot under way wait for its commit (their further output
    belongs to a later snapshot, so the one under way never waits for them), and between two
    snapshots the sinks wait for the next one to start (`holds_sink`)."""

    def __init__(
        self,
        plan: JobPlan,
        store: SnapshotStore,
        *,
        clock: Clock = time.monotonic,
        restore_from: Snapshot | None = None,
        job_name: str = "job",
    ) -> None:
        config = plan.config
        if config.processing_guarantee is ProcessingGuarantee.NONE:
            raise ValueError("a job with ProcessingGuarantee.NONE takes no snapshots")
        self.exactly_once = config.processing_guarantee is ProcessingGuarantee.EXACTLY_ONCE
        self.store = store
        self._plan = plan
        self._job_name = job_name
        self._clock = clock
        self._interval = config.snapshot_interval_millis / 1000
        first = store.next_id()
        if restore_from is not None:
            first = max(first, restore_from.snapshot_id + 1)
        self.requested_id = first - 1
        """The snapshot processors are to save; rises by one when a snapshot starts."""
        self.committed_id = first - 1
        """The last snapshot in the store."""
        self._restored = route_snapshot(restore_from, plan) if restore_from is not None else {}
        self._tasklets: dict[ProcessorKey, SnapshottingTasklet] = {}
        self._gates: list[SnapshottingTasklet] = []
        self._states: dict[ProcessorKey, ProcessorSnapshot] = {}
        """The latest state each running processor saved."""
        self._finals: dict[ProcessorKey, ProcessorSnapshot] = {}
        """The final states of the processors that completed."""
        self._final_uncommitted: set[ProcessorKey] = set()
        self._outstanding: set[ProcessorKey] = set()
        """The processors yet to save the snapshot under way."""
        self._in_progress = False
        self._next_start: float | None = None
        self._lock = threading.Lock()
        self._started_at = 0.0
        """When the snapshot under way was requested (by the clock)."""
        self._slow = SlowSnapshots(job_name, self._interval, clock)
        self.reports: deque[SnapshotReport] = deque(maxlen=RECENT_SNAPSHOTS)
        """The newest commits of this run, oldest first, for the job's metrics."""
        self.committed_count = 0
        """How many snapshots this run committed."""

    # ----------------------------------------------------------------- building

    def restored(self, vertex: str, index: int) -> RestoredProcessor | None:
        """What processor `index` of `vertex` restores, or None when the run starts afresh."""
        if not self._restored:
            return None
        return self._restored[(vertex, index)]

    def register(self, tasklet: SnapshottingTasklet) -> None:
        """Adds a processor's tasklet; every registered one takes part in every snapshot."""
        self._tasklets[tasklet.key] = tasklet
        self._gates.append(tasklet)

    # ------------------------------------------------------ the tasklets' side

    def saved(self, key: ProcessorKey, snapshot_id: int, data: bytes) -> None:
        """A processor saved its state for `snapshot_id` (serialized entries)."""
        with self._lock:
            if snapshot_id != self.requested_id or key not in self._outstanding:
                raise RuntimeError(
                    f"{key[0]}#{key[1]} saved snapshot {snapshot_id}, but snapshot "
                    f"{self.requested_id} is {'under way' if self._in_progress else 'done'}"
                )
            self._states[key] = ProcessorSnapshot(data)
            self._outstanding.discard(key)

    def completed(self, key: ProcessorKey, data: bytes) -> None:
        """A processor completed; `data` is its final state, which stands for it from the
        snapshot under way (if it has not saved that one) on.

        A processor reports completion only once its earlier saves are committed. From this
        call on the coordinator tells it when its final state is committed.
        """
        with self._lock:
            self._outstanding.discard(key)
            self._finals[key] = ProcessorSnapshot(data, completed=True)
            self._final_uncommitted.add(key)

    def holds(self, key: ProcessorKey, snapshot_id: int) -> bool:
        """Whether processor `key`, which saved `snapshot_id`, must wait before it goes on:
        never here (a continuous member holds its sinks until it sent their writes for it)."""
        return False

    def holds_sink(self, key: ProcessorKey) -> bool:
        """Whether processor `key`, a sink, must take no input while `holding_back` and no
        snapshot is under way: never here (a continuous member's sinks wait for the next
        snapshot to start, which the driver starts at once)."""
        return False

    # --------------------------------------------------------- the driver side

    def request_snapshot(self) -> None:
        """Starts a snapshot at the next `tick()` that is allowed to, whatever the interval."""
        self._next_start = float("-inf")

    def tick(self) -> None:
        """Commits the snapshot under way once complete, or starts one when it is due."""
        if self._in_progress:
            with self._lock:
                complete = not self._outstanding
            if complete:
                self._commit()
            return
        now = self._clock()
        if self._next_start is None:
            self._next_start = now + self._interval
        if now < self._next_start or len(self._finals) == len(self._tasklets):
            return
        if not self.start(self.requested_id + 1):
            return
        self._next_start = max(now, self._next_start) + self._interval

    def start(self, snapshot_id: int) -> bool:
        """Starts snapshot `snapshot_id` unless a processor delays snapshots (a restore under
        way, a prioritized edge not exhausted); True when it started."""
        self._gates = [t for t in self._gates if t.delays_snapshots()]
        if self._gates:
            return False
        with self._lock:
            self._begin(snapshot_id)
        return True

    def _begin(self, snapshot_id: int) -> None:
        """Snapshot `snapshot_id` is under way: every running processor owes its state (the
        caller holds the lock)."""
        self._outstanding = set(self._tasklets) - set(self._finals)
        self._in_progress = True
        self.requested_id = snapshot_id
        self._started_at = self._clock()

    def job_completed(self) -> None:
        """The job ended successfully: every final state counts as committed (the job will not
        be restored from anything older)."""
        with self._lock:
            finals = sorted(self._final_uncommitted)
            self._final_uncommitted.clear()
        self._tell_finals_committed(finals)

    def _commit(self) -> None:
        with self._lock:
            processors = {**self._states, **self._finals}
            finals = sorted(self._final_uncommitted)
            self._final_uncommitted.clear()
            snapshot_id = self.requested_id
        plan = self._plan
        snapshot = Snapshot(
            snapshot_id,
            plan.member_count,
            {name: v.local_parallelism for name, v in plan.vertices.items()},
            processors,
            routing=plan.routing(),
            definitions=plan.state_definitions(),
        )
        try:
            self.store.save(snapshot)
        except Exception as error:
            raise JobFailedError.caused_by(
                error, vertex_name=None, callback=f"saving snapshot {snapshot_id} to {self.store}"
            ) from error
        self.committed_id = snapshot_id
        self.committed_count += 1
        self._in_progress = False
        now = self._clock()
        if self._next_start is not None:
            self._next_start = next_start_after_commit(self._next_start, now, self._interval)
        size = snapshot.size()
        vertex_bytes: dict[str, int] = {}
        for (vertex, _), saved in processors.items():
            vertex_bytes[vertex] = vertex_bytes.get(vertex, 0) + len(saved.data)
        self.reports.append(
            SnapshotReport(
                snapshot_id,
                committed_at=time.time(),
                duration_seconds=now - self._started_at,
                bytes=size,
                vertex_bytes=vertex_bytes,
            )
        )
        self._slow.committed(snapshot_id, now - self._started_at, vertex_bytes)
        _log.info(
            "%s: snapshot %d committed (%d processors, %d bytes)",
            self._job_name,
            snapshot_id,
            len(processors),
            size,
        )
        self._tell_finals_committed(finals)

    def owed_commits(self, excluding: set[int]) -> list[CloseStep]:
        """The `snapshot_committed()` calls a stopping run owes its processors (those whose
        tasklets' ids are not in `excluding`, the ones stuck in a callback): a commit they had
        not seen yet when the run was cancelled or failed. Transactional sinks publish there."""
        steps: list[CloseStep] = []
        for (vertex, index), tasklet in self._tasklets.items():
            if id(tasklet) not in excluding and (call := tasklet.owed_commit()) is not None:
                steps.append((vertex, index, "snapshot_committed", call))
        return steps

    def _tell_finals_committed(self, keys: list[ProcessorKey]) -> None:
        for key in keys:
            self._tasklets[key].final_state_committed()
