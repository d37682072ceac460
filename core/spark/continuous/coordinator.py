"""The driver's coordinator of a continuous job: Jet's job coordinator, on the Spark driver.

It serves the members' control connections (control.py). Each launch of the job's barrier stage
is a run named by a token; each Spark attempt of that stage is an epoch. The first member of a
newer epoch fences the older one: its members are told to stop, nothing they report counts, and
their part files are never named by a manifest, so a zombie attempt can neither commit nor
publish. Members of the current epoch learn what to restore (the last committed snapshot) and
where snapshot ids continue.

Snapshots: every `snapshot_interval_millis` the coordinator asks the members for snapshot N,
never before N-1 committed, and a whole interval after N-1's commit when N-1 took longer than
the interval (core/runtime/snapshot.py: Jet's rule, with `SlowSnapshots`' warning); when every
member reported its part, it writes the manifest (the commit), applies the sinks' writes the
members sent before their parts, and tells the members, whose processors then learn of the
commit. When every member reported that its processors finished, a job with a snapshot
store takes one more snapshot, of the final states only, and has completed when it commits;
only then do the members publish their final states. A member lost while they publish restarts
the job from that final snapshot: every processor is restored as completed, the transactional
sinks publish what it holds, and nothing runs or is written again.

Before the manifest the coordinator checks that it reads every part of N and sees every file
the members' transactional sinks sealed for N (shared_storage.py): a store or sink directory
that is not shared fails the job at once, before anything of N counts.

The sinks' writes a member sends wait on the driver until the snapshot they belong to commits.
They are bounded (`spark.jetspark.staged.maxSize`): once the driver holds more than a
member's share of them, the member holds back its processors that saved the snapshot under way
and, between two snapshots, its sinks (member.py), while the driver starts the next snapshot at
once rather than at the interval. A snapshot under way is logged every
`spark.jetspark.snapshot.waitLogInterval` with the processors it waits on.

A member of the current epoch that sends nothing, not even a heartbeat, for the liveness timeout
is lost: the coordinator stops the epoch's members, so that the stage fails and the run loop
restarts the job (`lost` says why).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from jetspark.core.config import JobConfig
from jetspark.core.errors import JobFailedError
from jetspark.core.runtime.metrics import RECENT_SNAPSHOTS, JobMetrics, SnapshotReport
from jetspark.core.runtime.plan import JobPlan
from jetspark.core.runtime.snapshot import SlowSnapshots, next_start_after_commit
from jetspark.core.snapshot_store import DirectorySnapshotStore, Held, Snapshot
from jetspark.core.spark.continuous import control
from jetspark.core.spark.continuous.control import (
    ControlConnection,
    RefusedMessageError,
    SilentPeerError,
)
from jetspark.core.spark.continuous.frames import (
    CONTROL,
    DRIVER,
    ForgedFrameError,
    Frames,
)
from jetspark.core.spark.continuous.member import Welcome
from jetspark.core.spark.continuous.security import ChannelSecurity
from jetspark.core.spark.continuous.settings import STAGED_MAX_SIZE, ContinuousSettings
from jetspark.core.spark.continuous.sockets import Gate, listen
from jetspark.core.spark.metrics import merge_metrics
from jetspark.core.spark.shared_storage import SealedFiles, check_parts, check_sealed
from jetspark.core.spark.stages.records import LIST, MAP
from jetspark.core.spark.task_restore import restore_spec
from jetspark.core.stores import Stores

_log = logging.getLogger("jetspark.spark")

wait_clock: Callable[[], float] = time.monotonic
"""The clock of how long a snapshot has waited, and took (tests advance one of their own)."""
SETTLE_SECONDS = 5.0
"""After a failed stage, how long the coordinator waits for the members' last messages (a
processor's failure report races with the stage's failure)."""
CONNECTIONS_PER_MEMBER = 4
"""Connections that proved the key the coordinator serves at once, per member: a member's of
this attempt, of one being fenced, and room for reconnects; past them one is dropped, logged."""


@dataclasses.dataclass(frozen=True)
class _Part:
    """What a member reported of its part of the snapshot under way."""

    name: str
    tag: bytes
    held: Held
    vertex_bytes: dict[str, int]
    host: str
    """Where the member wrote it."""
    sealed: list[SealedFiles]
    """The files its transactional sinks sealed for the snapshot."""


@dataclasses.dataclass
class _Epoch:
    """One Spark attempt of one run of the barrier stage."""

    name: str
    attempt: int
    welcome: Welcome
    members: dict[int, ControlConnection] = dataclasses.field(default_factory=dict)
    finished: set[int] = dataclasses.field(default_factory=set)
    snapshot_id: int | None = None
    """The snapshot under way, or None."""
    final_snapshot_id: int | None = None
    """The snapshot of the final states, once every member finished and it started."""
    parts: dict[int, _Part] = dataclasses.field(default_factory=dict)
    staged: dict[int, list[Any]] = dataclasses.field(default_factory=dict)
    """Member -> sink writes it sent since its last part (applied at the next commit)."""
    reported: dict[int, list[Any]] = dataclasses.field(default_factory=dict)
    """Member -> sink writes it sent before its part of the snapshot under way."""
    staged_size: dict[int, int] = dataclasses.field(default_factory=dict)
    """Member -> encoded bytes of its `staged` writes."""
    reported_size: dict[int, int] = dataclasses.field(default_factory=dict)
    """Member -> encoded bytes of its `reported` writes."""
    waiting_since: float = 0.0
    """When the snapshot under way started, by `wait_clock`."""
    next_wait_log: float = 0.0
    """How long it may wait before it is logged (again)."""
    pending: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    """Member -> its processors that have not saved the snapshot under way (as it said)."""

    def held_bytes(self, member: int) -> int:
        """The bytes of `member`'s writes the driver holds."""
        return self.staged_size.get(member, 0) + self.reported_size.get(member, 0)

    def staged_bytes(self) -> int:
        """The bytes of every member's writes the driver holds."""
        return sum(self.staged_size.values()) + sum(self.reported_size.values())


class ContinuousCoordinator:
    """Coordinates the members of one continuous job (module docstring)."""

    def __init__(
        self,
        job_name: str,
        plan: JobPlan,
        config: JobConfig,
        stores: Stores,
        store: DirectorySnapshotStore | None,
        restore_from: Snapshot | None,
        settings: ContinuousSettings,
        security: ChannelSecurity,
        max_restarts: int,
    ) -> None:
        self._job_name = job_name
        self._plan = plan
        self._members = plan.member_count
        self._stores = stores
        self._store = store
        self._liveness = settings.liveness
        self._security = security
        self._staged_bound = settings.staged_bytes
        self._wait_log_seconds = settings.wait_log_seconds
        self._staged_peak = 0
        self._interval = config.snapshot_interval_millis / 1000
        self._slow = SlowSnapshots(job_name, self._interval, lambda: wait_clock())  # read late
        self._max_restarts = max_restarts
        self.last_committed = restore_from
        """The snapshot a new epoch restores."""
        self.restarts = 0
        self.processor_failure: dict[str, Any] | None = None
        """The facts of the processor failure a member reported, if any."""
        self.fatal: BaseException | None = None
        """A failure of the coordinator itself (a commit that failed): the job must fail."""
        self.lost: str | None = None
        """Which member of the current run the coordinator found silent, and for how long."""
        self.lost_member: tuple[int, str] | None = None
        """That member's index, and what the coordinator heard of it (the silence)."""
        self.on_member_lost: Callable[[], None] | None = None
        """Called (on the coordinator's thread) once a member is found silent: the run loop
        ends the members' stage then, without waiting for Spark to notice the lost host."""
        self.rescales = 0
        """How many restarts ran on fewer members than the run before."""
        self.refused_messages = 0
        """How many messages the coordinator refused to decode (control.decode_from_member),
        each dropping its connection."""
        self.completed = threading.Event()
        self._lock = threading.RLock()
        self._token: str | None = None
        self._epoch: _Epoch | None = None
        self._metrics: dict[int, JobMetrics] = {}
        self._snapshots: list[SnapshotReport] = []
        self._snapshot_count = 0
        self._next_start = 0.0
        self._closed = threading.Event()
        self._cancelled = False
        self._connections: set[ControlConnection] = set()
        server = listen(
            settings.driver_bind,
            settings.coordinator_ports,
            f"{job_name}'s coordinator",
            "spark.driver.bindAddress",
        )
        self.address: tuple[str, int] = (settings.driver_host, server.getsockname()[1])
        """Where the members connect to the coordinator."""
        _log.info(
            "%s: the coordinator listens on %s:%d, members connect to %s:%d",
            job_name,
            settings.driver_bind,
            self.address[1],
            *self.address,
        )
        self._gate = Gate(
            server,
            f"{job_name}'s coordinator",
            lambda connection: security.handshake(connection, CONTROL, DRIVER, initiator=False),
            self._admitted,
            lambda: CONNECTIONS_PER_MEMBER * self._members,
        )
        if store is not None:
            threading.Thread(target=self._schedule, name="jetspark-snapshots", daemon=True).start()

    # ------------------------------------------------------------- the run loop's side

    def begin_run(self, token: str) -> None:
        """A new launch of the barrier stage named `token`: earlier runs are fenced."""
        with self._lock:
            self._fence(f"a newer run of {self._job_name} started")
            self._token = token
            self.lost = None
            self.lost_member = None
            self.completed.clear()

    def rescale(self, plan: JobPlan) -> None:
        """The next run has `plan`'s members, fewer than before: its restore rescales."""
        with self._lock:
            self._plan = plan
            self._members = plan.member_count
            self.rescales += 1

    def metrics(self) -> JobMetrics:
        """The job's live metrics: every member's latest, merged, with the snapshots."""
        with self._lock:
            merged = merge_metrics(list(self._metrics.values()))
            merged.snapshots = list(self._snapshots)
            merged.snapshot_count = self._snapshot_count
            merged.restarts = self.restarts
            merged.rescales = self.rescales
            merged.staged_bytes = self._epoch.staged_bytes() if self._epoch is not None else 0
            merged.staged_bytes_peak = self._staged_peak
        merged.execution_mode = "continuous"
        return merged

    def cancel(self) -> None:
        """The job was cancelled: members stop at once, and nothing commits or completes."""
        with self._lock:
            self._cancelled = True
            self._fence("the job was cancelled")

    def count_restart(self) -> bool:
        """Counts a restart after a failed stage; False when that exceeds the bound."""
        with self._lock:
            self.restarts += 1
            return self.restarts <= self._max_restarts

    def settle(self) -> None:
        """Waits (a few seconds at most) until the current epoch's members disconnected, so
        that a processor's failure report is in before the run loop decides what failed."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline and self.processor_failure is None:
            with self._lock:
                epoch = self._epoch
                live = (
                    [c for c in epoch.members.values() if c in self._connections] if epoch else []
                )
            if not live:
                return
            time.sleep(0.01)

    def close(self) -> None:
        """Stops serving; members still connected are told to stop."""
        self._closed.set()
        self._gate.close()
        with self._lock:
            self._fence(f"{self._job_name} ended")
            connections = list(self._connections)
        for connection in connections:
            connection.close()
        self._gate.join(SETTLE_SECONDS)

    # ------------------------------------------------------------------ serving

    def _admitted(self, raw: socket.socket, frames: Frames) -> None:
        """Serves a connection whose peer proved the key, on the gate's thread."""
        connection = ControlConnection(raw, frames, self._liveness, control.decode_from_member)
        with self._lock:
            if self._closed.is_set():
                connection.close()
                return
            self._connections.add(connection)
        self._serve(connection)

    def _serve(self, connection: ControlConnection) -> None:
        member: int | None = None
        try:
            while True:
                message = connection.receive()
                if message is None:
                    return
                kind, payload = message
                if kind == control.HELLO:
                    member = self._hello(connection, *payload)
                    if member is None:
                        return
                elif member is not None:
                    self._handle(connection, member, kind, payload)
        except ForgedFrameError as error:
            _log.warning("%s: %s; connection closed", self._job_name, error)
        except RefusedMessageError as error:
            with self._lock:
                self.refused_messages += 1
            _log.warning(
                "%s: refused a message from %s: %s; connection closed",
                self._job_name,
                connection.peer,
                error,
            )
        except SilentPeerError as silence:
            if member is not None:
                self._lose(connection, member, silence)
        except OSError:
            pass  # the member is gone; the stage's failure tells the run loop
        finally:
            with self._lock:
                self._connections.discard(connection)
            connection.close()

    def _hello(
        self, connection: ControlConnection, token: str, member: int, attempt: int
    ) -> int | None:
        """Registers a member of the run `token`'s stage attempt `attempt` (the lowest task
        attempt id of its tasks: a later attempt has a higher one)."""
        with self._lock:
            epoch = self._epoch
            fenced = token != self._token or (epoch is not None and attempt < epoch.attempt)
            if fenced or not 0 <= member < self._members:
                connection.send(control.STOP, "fenced: a newer attempt of the job is running")
                return None
            if epoch is None or attempt > epoch.attempt:
                if epoch is not None:  # Spark retried the barrier stage after a lost task
                    if not self.count_restart():
                        connection.send(control.STOP, "the job has failed too often")
                        return None
                    _log.warning(
                        "%s: Spark restarted the job's stage (attempt %d): restarting from "
                        "snapshot %s",
                        self._job_name,
                        attempt,
                        self.last_committed.snapshot_id if self.last_committed else "none",
                    )
                epoch = self._new_epoch(token, attempt)
            epoch.members[member] = connection
            connection.send(control.WELCOME, epoch.welcome)
            if len(epoch.members) == self._members:
                self._next_start = time.monotonic() + self._interval
            return member

    def _lose(self, connection: ControlConnection, member: int, silence: SilentPeerError) -> None:
        """A member that went silent is lost: the epoch it belongs to stops."""
        with self._lock:
            epoch = self._epoch
            if epoch is None or epoch.members.get(member) is not connection:
                return
            self.lost = f"member {member} is lost: {silence}"
            self.lost_member = (member, str(silence))
            _log.warning("%s: %s", self._job_name, self.lost)
            self._fence(self.lost)
        if self.on_member_lost is not None:
            self.on_member_lost()

    def _new_epoch(self, token: str, attempt: int) -> _Epoch:
        self._fence("fenced: a newer attempt of the job is running")
        last = self.last_committed
        first = 1
        restore = None
        if self._store is not None:
            first = max(self._store.next_id(), (last.snapshot_id + 1) if last else 1)
            restore = restore_spec(last, self._plan) if last is not None else None
        epoch = _Epoch(f"{token}a{attempt}", attempt, Welcome(f"{token}a{attempt}", restore, first))
        self._epoch = epoch
        self.completed.clear()
        self._metrics.clear()
        return epoch

    def _fence(self, reason: str) -> None:
        epoch, self._epoch = self._epoch, None
        if epoch is None:
            return
        for connection in epoch.members.values():
            with contextlib.suppress(OSError):
                connection.send(control.STOP, reason)
            connection.close()

    def _handle(self, connection: ControlConnection, member: int, kind: str, payload: Any) -> None:
        with self._lock:
            epoch = self._epoch
            if epoch is None or epoch.members.get(member) is not connection or self._cancelled:
                return  # a fenced member, or a cancelled job: nothing it says counts
            if kind == control.RESULTS:
                try:
                    records = control.decode_results(payload, self._security.readable)
                except JobFailedError as refused:  # an item of a class the driver refuses
                    self.fatal = refused
                    self._fence(f"the job failed: {refused}")
                    return
                if self._store is None:
                    self._apply(records)
                else:
                    self._stage(epoch, member, records, sum(len(r[2]) for r in payload))
            elif kind == control.METRICS:
                self._metrics[member] = payload
            elif kind == control.PART:
                snapshot_id, *part = payload
                self._part(epoch, member, snapshot_id, _Part(*part))
            elif kind == control.FINISHED:
                epoch.finished.add(member)
                if len(epoch.finished) == self._members:
                    self._all_finished(epoch)
            elif kind == control.FAILED:
                self.processor_failure = self.processor_failure or payload
            elif kind == control.PENDING and payload[0] == epoch.snapshot_id:
                epoch.pending[member] = payload[1]

    def _stage(self, epoch: _Epoch, member: int, records: list[Any], size: int) -> None:
        """Holds `member`'s sink writes (`size` encoded bytes) until their snapshot commits;
        past the member's share of the bound, the next snapshot starts at once."""
        epoch.staged.setdefault(member, []).extend(records)
        epoch.staged_size[member] = epoch.staged_size.get(member, 0) + size
        self._staged_peak = max(self._staged_peak, epoch.staged_bytes())
        self._start_at_once_over_share(epoch)

    def _start_at_once_over_share(self, epoch: _Epoch) -> None:
        """With no snapshot under way, a member over its share of the staged-writes bound has
        its sinks wait (member.py): the next snapshot, which lets them go on, starts at once."""
        share = self._staged_bound // self._members
        if epoch.snapshot_id is None and any(epoch.held_bytes(m) > share for m in epoch.members):
            self._next_start = 0.0

    # ---------------------------------------------------------------- snapshots

    def _schedule(self) -> None:
        """Starts a snapshot every interval while an epoch runs with all its members."""
        tick = min(self._interval, 0.05)
        while not self._closed.wait(tick):
            with self._lock:
                epoch = self._epoch
                if epoch is not None and epoch.snapshot_id is not None:
                    self._log_wait(epoch, epoch.snapshot_id)
                if (
                    epoch is None
                    or epoch.snapshot_id is not None
                    or len(epoch.members) < self._members
                    or len(epoch.finished) == self._members
                    or self.completed.is_set()
                    or time.monotonic() < self._next_start
                ):
                    continue
                self._try_to_start_snapshot(epoch)

    def _log_wait(self, epoch: _Epoch, snapshot_id: int) -> None:
        """Logs, every `spark.jetspark.snapshot.waitLogInterval`, how long the snapshot under
        way has waited, on which processors, and what the driver holds for it meanwhile; not
        once a member of its attempt is gone (that attempt ends, and the snapshot with it,
        while the run loop restarts the job, waiting for task slots)."""
        waited = wait_clock() - epoch.waiting_since
        gone = any(connection not in self._connections for connection in epoch.members.values())
        if waited < epoch.next_wait_log or gone:
            return
        epoch.next_wait_log = waited + self._wait_log_seconds
        waiting_on = []
        for member in range(self._members):
            if member not in epoch.parts:
                names = epoch.pending.get(member)
                where = f"member {member}"
                waiting_on.append(f"{', '.join(names)} on {where}" if names else where)
        share = self._staged_bound // self._members
        held = [m for m in sorted(epoch.members) if epoch.held_bytes(m) > share]
        _log.warning(
            "%s: snapshot %d has waited %.0f s on %s, which did not save it yet; the driver "
            "holds %d bytes of sink writes until it commits (%s %d)%s",
            self._job_name,
            snapshot_id,
            waited,
            "; ".join(waiting_on) or "the driver's commit",
            epoch.staged_bytes(),
            STAGED_MAX_SIZE,
            self._staged_bound,
            f"; members {', '.join(map(str, held))} are held back over their share" if held else "",
        )

    def _all_finished(self, epoch: _Epoch) -> None:
        """Every member finished: without a store the job completed; with one, the snapshot of
        the final states starts (once the one under way, if any, committed)."""
        if self._store is None:
            self._complete(epoch)
        elif epoch.snapshot_id is None:
            self._start_final_snapshot(epoch)

    def _start_final_snapshot(self, epoch: _Epoch) -> None:
        if self._try_to_start_snapshot(epoch):
            epoch.final_snapshot_id = epoch.snapshot_id

    def _try_to_start_snapshot(self, epoch: _Epoch) -> bool:
        """Starts a snapshot; False when the store failed, which fails the job."""
        try:
            self._start_snapshot(epoch)
        except Exception as error:
            self.fatal = error
            self._fence(f"starting a snapshot failed: {error}")
            return False
        return True

    def _start_snapshot(self, epoch: _Epoch) -> None:
        assert self._store is not None
        last = self.last_committed
        snapshot_id = max(
            epoch.welcome.first_snapshot_id,
            (last.snapshot_id + 1) if last else 1,
            self._store.next_id(),
        )
        epoch.snapshot_id, epoch.parts = snapshot_id, {}
        epoch.waiting_since, epoch.next_wait_log = wait_clock(), self._wait_log_seconds
        epoch.pending = {}
        self._next_start = max(time.monotonic(), self._next_start) + self._interval
        _tell_all(epoch, control.SNAPSHOT, snapshot_id)

    def _part(self, epoch: _Epoch, member: int, snapshot_id: int, part: _Part) -> None:
        if snapshot_id != epoch.snapshot_id:
            return
        epoch.parts[member] = part
        epoch.reported[member] = epoch.staged.pop(member, [])
        epoch.reported_size[member] = epoch.staged_size.pop(member, 0)
        if len(epoch.parts) == self._members:
            self._commit(epoch, snapshot_id)

    def _commit(self, epoch: _Epoch, snapshot_id: int) -> None:
        assert self._store is not None
        plan = self._plan
        parts = {part.name: (part.tag, part.held) for part in epoch.parts.values()}
        writers = {part.name: (member, part.host) for member, part in epoch.parts.items()}
        try:
            check_parts(self._store, snapshot_id, parts, writers)
            check_sealed([s for part in epoch.parts.values() for s in part.sealed], snapshot_id)
            self._store.commit(
                snapshot_id,
                plan.member_count,
                {name: v.local_parallelism for name, v in plan.vertices.items()},
                parts,
                plan.routing(),
                plan.state_definitions(),
            )
            self.last_committed = self._store.committed(snapshot_id)
        except Exception as error:
            self.fatal = error
            self._fence(f"committing snapshot {snapshot_id} failed: {error}")
            return
        for member in sorted(epoch.reported):
            self._apply(epoch.reported[member])
        epoch.reported.clear()
        epoch.reported_size.clear()
        vertex_bytes: dict[str, int] = {}
        for part in epoch.parts.values():
            for vertex, size in part.vertex_bytes.items():
                vertex_bytes[vertex] = vertex_bytes.get(vertex, 0) + size
        took = wait_clock() - epoch.waiting_since
        self._snapshots.append(
            SnapshotReport(snapshot_id, time.time(), took, sum(vertex_bytes.values()), vertex_bytes)
        )
        del self._snapshots[:-RECENT_SNAPSHOTS]
        self._snapshot_count += 1
        epoch.snapshot_id = None
        self._slow.committed(snapshot_id, took, vertex_bytes)
        self._next_start = next_start_after_commit(
            self._next_start, time.monotonic(), self._interval
        )
        _log.info("%s: snapshot %d committed", self._job_name, snapshot_id)
        _tell_all(epoch, control.COMMITTED, snapshot_id)
        if snapshot_id == epoch.final_snapshot_id:
            self._complete(epoch)
        elif len(epoch.finished) == self._members:
            self._start_final_snapshot(epoch)
        else:
            self._start_at_once_over_share(epoch)

    def _complete(self, epoch: _Epoch) -> None:
        """Every member finished: their remaining writes count, the job completed."""
        for member in sorted(set(epoch.reported) | set(epoch.staged)):
            self._apply(epoch.reported.get(member, []) + epoch.staged.get(member, []))
        epoch.reported.clear()
        epoch.staged.clear()
        epoch.reported_size.clear()
        epoch.staged_size.clear()
        self.completed.set()
        _tell_all(epoch, control.COMPLETED)

    def _apply(self, records: list[Any]) -> None:
        """Sink writes, decoded, into the driver's stores, in the order the member sent them."""
        for kind, name, items in records:
            if kind == LIST:
                self._stores.get_list(name).extend(items)
            elif kind == MAP:
                self._stores.get_map(name).update(items)


def _tell_all(epoch: _Epoch, kind: str, payload: Any = None) -> None:
    """Sends a message to every member of `epoch`; a member that is gone is not an error here
    (its task's failure fails the stage, and the run loop restarts the job)."""
    for connection in list(epoch.members.values()):
        with contextlib.suppress(OSError):
            connection.send(kind, payload)
