"""One member of a continuous job: a long-running task of a Spark barrier stage.

The task says who it is to the driver's coordinator (control.py) and learns what to restore;
the stage's tasks exchange their listening addresses with `allGather` and connect to each other
(one connection per pair of members, streams.py); then the task builds the member runtime for
every vertex of the DAG — the runtime LocalEngine and the stage tasks run — and drives it until
every processor completed, the driver stops it, or a processor fails.

Snapshots (`MemberSnapshots`): the driver asks for snapshot N; once no processor delays
snapshots (priorities, a restore under way), the member's sources save and emit barrier N, which
flow through queues and streams like any item; when every processor of the member saved N, the
member sends its sinks' writes so far, writes its part into the snapshot store and reports it; a
sink (a vertex without outbound edges) that saved N waits until those writes are sent, so that
the writes counted in N are all from before its barrier. The driver commits N once every
member's part is in and says so; only then do the processors learn of the commit
(`snapshot_committed`), which is when transactional sinks publish (Jet's second phase).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jetspark.core.errors import JobCancelledError, JobFailedError
from jetspark.core.runtime.build import build_member
from jetspark.core.runtime.closing import CloseStep
from jetspark.core.runtime.plan import JobPlan
from jetspark.core.runtime.restore import RestoredProcessor
from jetspark.core.runtime.snapshot import SnapshotCoordinator
from jetspark.core.snapshot_store import DirectorySnapshotStore, held_by
from jetspark.core.spark.continuous import control
from jetspark.core.spark.continuous.control import ControlConnection, SilentPeerError
from jetspark.core.spark.continuous.frames import CONTROL, DRIVER, ForgedFrameError, Frames
from jetspark.core.spark.continuous.security import ChannelSecurity
from jetspark.core.spark.continuous.settings import (
    COORDINATOR_PORT,
    MEMBER_PORT,
    ContinuousSettings,
)
from jetspark.core.spark.continuous.sockets import Gate, connect, listen
from jetspark.core.spark.continuous.streams import StreamExchange
from jetspark.core.spark.failures import failure_report, processor_failure_facts, task_failure
from jetspark.core.spark.shared_storage import SealingStores, task_host
from jetspark.core.spark.stages.task_stores import RESULT_BATCH
from jetspark.core.spark.task_restore import RestoreSpec

_log = logging.getLogger("jetspark.spark")

ACCEPT_SECONDS = 120.0
"""How long a member waits for the members before it to connect to it."""
METRICS_SECONDS = 0.5
"""How often a running member sends its metrics to the driver."""
RESULTS_SECONDS = 0.01
"""How long a running member lets its sinks' writes to named lists and maps gather before it
sends them to the driver (a batch of RESULT_BATCH items goes at once)."""


@dataclasses.dataclass(frozen=True)
class Welcome:
    """The driver's answer to a member that said who it is."""

    epoch: str
    """Names this attempt of the run (letters and digits): the member's part files carry it."""
    restore: RestoreSpec | None
    first_snapshot_id: int
    """Snapshots of this attempt have ids from here on."""


class ControlState:
    """What the driver told a member, kept by the control connection's reader thread."""

    def __init__(self, connection: ControlConnection, cancel: threading.Event) -> None:
        self.connection = connection
        self.requested_id = 0
        self.committed_id = 0
        self.completed = threading.Event()
        self.stop_reason: str | None = None
        self._cancel = cancel

    def read(self) -> None:
        """The reader thread: applies the driver's messages until the connection ends."""
        while True:
            try:
                message = self.connection.receive()
            except SilentPeerError as silence:
                self._stop(f"the driver's coordinator is gone or unreachable ({silence})")
                return
            except ForgedFrameError as forged:  # never decoded: the connection is dropped
                _log.warning("%s; the connection to the driver is dropped", forged)
                self._stop(f"the connection to the driver's coordinator broke: {forged}")
                return
            if message is None:
                self._stop("the driver's coordinator is gone")
                return
            kind, payload = message
            if kind == control.SNAPSHOT:
                self.requested_id = max(self.requested_id, payload)
            elif kind == control.COMMITTED:
                self.committed_id = max(self.committed_id, payload)
            elif kind == control.COMPLETED:
                self.completed.set()
            elif kind == control.STOP:
                self._stop(payload)
                return

    def _stop(self, reason: str) -> None:
        if self.stop_reason is None and not self.completed.is_set():
            self.stop_reason = reason
        self._cancel.set()
        self.completed.set()


class _NoIds:
    """The store a member's coordinator starts from: ids come from the driver."""

    def __init__(self, first_id: int) -> None:
        self._first = first_id

    def next_id(self) -> int:
        return self._first

    def latest(self) -> None:
        return None


class StagedWrites:
    """A member's count of the sink writes (encoded bytes) it sent that the driver holds, not
    applied yet: those since its last part, and those before it until that part commits. Over
    `share`, the member holds back its processors that saved the snapshot under way."""

    def __init__(self, share: int) -> None:
        self.share = share
        self.since_part = 0
        self.before_part = 0

    def sent(self, size: int) -> None:
        """The member sent `size` more bytes of writes."""
        self.since_part += size

    def part_reported(self) -> None:
        """The writes sent so far belong to the part just reported."""
        self.before_part, self.since_part = self.since_part, 0

    def committed(self) -> None:
        """The driver applied the writes of the committed part."""
        self.before_part = 0

    @property
    def over_share(self) -> bool:
        """True while the driver holds more of this member's writes than its share."""
        return self.before_part + self.since_part > self.share


class MemberSnapshots(SnapshotCoordinator):
    """The snapshot coordinator of one member: the driver starts and commits (module docstring)."""

    def __init__(
        self,
        plan: JobPlan,
        member: int,
        welcome: Welcome,
        store: DirectorySnapshotStore,
        state: ControlState,
        before_part: Callable[[], None],
        staged: StagedWrites,
    ) -> None:
        super().__init__(plan, _NoIds(welcome.first_snapshot_id))  # type: ignore[arg-type]
        self._member = member
        self._store = store
        self._stores = plan.stores
        assert isinstance(self._stores, SealingStores)
        self._state = state
        self._before_part = before_part
        self._staged = staged
        self._part_name = f"member{member}-{welcome.epoch}"
        self._awaiting_commit = False
        self._writes_sent_id = welcome.first_snapshot_id - 1
        """The last snapshot whose sink writes this member sent (just before its part)."""
        senders = {edge.source_name for edge in plan.edges}
        self._sinks = frozenset(name for name in plan.vertices if name not in senders)
        vertices = list(plan.vertices)
        restore = welcome.restore
        self._routed = restore.route(plan, member, vertices) if restore is not None else None

    def restored(self, vertex: str, index: int) -> RestoredProcessor | None:
        """What the processor restores (None when the run starts afresh)."""
        return None if self._routed is None else self._routed[(vertex, index)]

    def holds(self, key: tuple[str, int], snapshot_id: int) -> bool:
        """A sink that saved `snapshot_id` waits until the member sent the writes that snapshot
        counts: a write in between would be sent with them and come again after a restore."""
        return key[0] in self._sinks and self._writes_sent_id < snapshot_id

    def holds_sink(self, key: tuple[str, int]) -> bool:
        """Over its share with no snapshot under way, a member's sinks write nothing more: the
        driver, over the same share, starts the next snapshot at once (their writes before its
        barrier belong to it, so they take input again as soon as it starts here)."""
        return key[0] in self._sinks and not self._in_progress

    def tick(self) -> None:
        """Starts the snapshot the driver asked for, reports the member's part once every
        processor saved it, delivers the driver's commit, and holds back the processors that
        saved it while the driver holds more than this member's share of sink writes."""
        self.holding_back = self._staged.over_share
        if self._in_progress:
            if self._awaiting_commit:
                if self._state.committed_id >= self.requested_id:
                    self._committed()
                return
            with self._lock:
                complete = not self._outstanding
            if complete:
                self._report_part()
            return
        wanted = self._state.requested_id
        if wanted > self.requested_id:
            self.start(wanted)

    def _report_part(self) -> None:
        with self._lock:
            states = {**self._states, **self._finals}
        self._before_part()  # the sinks' writes before this part belong to this snapshot
        self._writes_sent_id = self.requested_id  # the held sinks' next ones to the next
        tag_ = self._store.write_part(self.requested_id, self._part_name, states)
        vertex_bytes: dict[str, int] = {}
        for (vertex, _), saved in states.items():
            vertex_bytes[vertex] = vertex_bytes.get(vertex, 0) + len(saved.data)
        self._state.connection.send(
            control.PART,
            (
                self.requested_id,
                self._part_name,
                tag_,
                held_by(states),
                vertex_bytes,
                task_host(),
                self._stores.take_sealed(),
            ),
        )
        self._staged.part_reported()
        self._awaiting_commit = True

    def _committed(self) -> None:
        self._tell_finals_committed(self._take_commit())

    def _take_commit(self) -> list[tuple[str, int]]:
        """Takes in the driver's commit of the snapshot under way; the processors whose final
        states it holds, to be told."""
        with self._lock:
            finals = sorted(self._final_uncommitted)
            self._final_uncommitted.clear()
            self._in_progress = False
            self._awaiting_commit = False
        self._staged.committed()
        self.holding_back = self._staged.over_share
        # last: a processor that sees the commit may save the next snapshot at once
        self.committed_id = self.requested_id
        return finals

    def owed_commits(self, excluding: set[int]) -> list[CloseStep]:
        """As SnapshotCoordinator's, counting a commit the driver announced that no `tick()`
        took in yet: a run stopped right after it still publishes what that snapshot holds."""
        steps: list[CloseStep] = []
        if self._awaiting_commit and self._state.committed_id >= self.requested_id:
            for key in self._take_commit():
                tasklet = self._tasklets[key]
                if id(tasklet) not in excluding:
                    steps.append((*key, "snapshot_committed", tasklet.final_state_committed))
        return steps + super().owed_commits(excluding)

    def pending(self) -> tuple[int, list[str]] | None:
        """(the snapshot under way, its processors here that have not saved it yet), or None
        when none is under way or every processor saved it."""
        with self._lock:
            if not self._in_progress or not self._outstanding:
                return None
            names = sorted(f"{vertex}#{index}" for vertex, index in self._outstanding)
        return self.requested_id, names

    def saved(self, key: tuple[str, int], snapshot_id: int, data: bytes) -> None:
        """A processor saved `snapshot_id`. Its barrier can come from another member before
        the driver's request reaches this one: the member then joins that snapshot."""
        with self._lock:
            if snapshot_id > self.requested_id and not self._in_progress:
                self._begin(snapshot_id)
        super().saved(key, snapshot_id, data)

    def job_completed(self) -> None:
        """Every processor of this member completed: the member goes on taking part in the
        job's snapshots (with its final states) until the driver says the whole job completed,
        then tells its processors their final states are committed."""
        self._before_part()  # the sinks' last writes reach the driver before the news
        self._state.connection.send(control.FINISHED)
        while not self._state.completed.wait(0.001):
            self.tick()
        if self._state.stop_reason is not None:
            raise JobCancelledError(self._state.stop_reason)
        super().job_completed()


@dataclasses.dataclass
class MemberTask:
    """The barrier stage's task function: partition index = member index."""

    plan: JobPlan
    driver: tuple[str, int]
    """The coordinator's address."""
    token: str
    """Names the run (a Spark stage attempt of it adds its number)."""
    security: ChannelSecurity = dataclasses.field(repr=False)
    """The job's secret and TLS material: secure control and the members' connections (never
    in the repr)."""
    store: DirectorySnapshotStore | None
    settings: ContinuousSettings
    """Heartbeats with the driver, ports (settings.py)."""
    shipped: Any = None

    def __call__(self, partition: Iterable[Any]) -> Iterator[Any]:
        """Runs the member; yields nothing (results go to the driver as they are produced)."""
        from pyspark import BarrierTaskContext

        for _ in partition:
            pass
        context = BarrierTaskContext.get()
        member = context.partitionId()
        host = member_host(context, member)
        settings = self.settings
        listener = listen(
            host,
            settings.member_ports,
            f"member {member}",
            "SPARK_LOCAL_IP, else its executor's host",
        )
        exchange: StreamExchange | None = None
        connection: ControlConnection | None = None
        try:
            # every task of this stage attempt learns the others' addresses and task ids; the
            # lowest task id names the attempt (a later attempt's tasks have higher ids)
            port = listener.getsockname()[1]
            gathered = [
                entry.split(" ", 1)
                for entry in context.allGather(f"{context.taskAttemptId()} {host}:{port}")
            ]
            attempt = min(int(task_id) for task_id, _ in gathered)
            who = f"member {member} on {host}"
            raw, frames = connect_proven(
                self.driver,
                settings.liveness.timeout,
                who,
                "the driver's coordinator",
                COORDINATOR_PORT,
                self.security,
                CONTROL,
                member,
                DRIVER,
            )
            connection = ControlConnection(raw, frames, settings.liveness)
            connection.send(control.HELLO, (self.token, member, attempt))
            welcome = _welcome(connection)
            cancel = threading.Event()
            state = ControlState(connection, cancel)
            threading.Thread(target=state.read, name="jetspark-control", daemon=True).start()
            addresses = [address for _, address in gathered]
            peers = connect_members(
                listener, addresses, member, self.security, welcome.epoch, settings.liveness.timeout
            )
            exchange = StreamExchange(member, peers, settings.links)
            self._run(member, welcome, state, exchange, cancel)
        finally:
            listener.close()
            if exchange is not None:
                exchange.close()
            if connection is not None:
                connection.close()
        return iter(())

    def _run(
        self,
        member: int,
        welcome: Welcome,
        state: ControlState,
        exchange: StreamExchange,
        cancel: threading.Event,
    ) -> None:
        shipped = self.shipped.value if self.shipped is not None else None
        stores = SealingStores(shipped)
        plan = dataclasses.replace(self.plan, stores=stores)
        send = state.connection.send

        staged = StagedWrites(self.settings.staged_bytes // plan.member_count)

        def ship_results(at_least: int = 1) -> None:
            records = [body[1:4] for _, body in stores.result_records(member, 0, at_least=at_least)]
            if records:
                send(control.RESULTS, records)
                staged.sent(sum(len(payload) for _, _, payload in records))

        snapshots = None
        if self.store is not None:
            snapshots = MemberSnapshots(
                plan, member, welcome, self.store, state, ship_results, staged
            )
        try:
            runtime = build_member(
                plan, [member], exchange=exchange, cancel_event=cancel, snapshots=snapshots
            )
            next_results = next_metrics = 0.0
            exchange.watch(runtime.wakeup)
            for _ in runtime.drive(exchange.wait_for_input):
                now = time.monotonic()
                if now >= next_results:  # a few writes wait a moment, a batch-full never
                    next_results = now + RESULTS_SECONDS
                    ship_results()
                else:
                    ship_results(RESULT_BATCH)
                if now >= next_metrics:
                    next_metrics = now + METRICS_SECONDS
                    send(control.METRICS, runtime.metrics())
                    pending = snapshots.pending() if snapshots is not None else None
                    if pending is not None:
                        send(control.PENDING, pending)
            ship_results()
            send(control.METRICS, runtime.metrics())
            if snapshots is None:
                send(control.FINISHED)
                state.completed.wait()
        except JobFailedError as failure:
            facts = processor_failure_facts(failure, member)
            send(control.FAILED, failure_report(failure, facts))
            raise task_failure(failure, facts) from failure
        except JobCancelledError:
            if state.stop_reason is None:
                raise
            raise JobCancelledError(f"member {member} stopped: {state.stop_reason}") from None


def _welcome(connection: ControlConnection) -> Welcome:
    message = connection.receive()
    if message is None:
        raise ConnectionError("the driver's coordinator closed the connection before the start")
    kind, payload = message
    if kind == control.STOP:
        raise JobCancelledError(f"this task may not run: {payload}")
    if kind != control.WELCOME:
        raise ConnectionError(f"expected the driver's welcome, got {kind!r}")
    return payload


def member_host(context: Any, member: int) -> str:
    """The address this member listens on: SPARK_LOCAL_IP when set, else its executor's host."""
    configured = os.environ.get("SPARK_LOCAL_IP")
    if configured:
        return configured
    address = context.getTaskInfos()[member].address
    return address.rsplit(":", 1)[0] if ":" in address else address


def connect_members(
    listener: socket.socket,
    addresses: list[str],
    member: int,
    security: ChannelSecurity,
    epoch: str,
    timeout: float,
) -> dict[int, tuple[socket.socket, Frames]]:
    """Connects this member to every other member of the stage attempt (`addresses`, by member
    index): it connects to the members after it and lets in the ones before it through
    `listener`. Each connection starts with a handshake (frames.py) for the stream of `epoch`,
    so only this attempt's members get in; any other connection is dropped, and start-up goes
    on."""
    connections: dict[int, tuple[socket.socket, Frames]] = {}
    arrived: queue.Queue[tuple[socket.socket, Frames]] = queue.Queue()
    purpose = f"stream {epoch}"
    gate = Gate(
        listener,
        f"member {member}",
        lambda connection: security.handshake(connection, purpose, member, initiator=False),
        lambda connection, frames: arrived.put((connection, frames)),
    )
    try:
        who = f"member {member} on {addresses[member].rsplit(':', 1)[0]}"
        for peer in range(member + 1, len(addresses)):
            peer_host, port = addresses[peer].rsplit(":", 1)
            connections[peer] = connect_proven(
                (peer_host, int(port)),
                timeout,
                who,
                f"member {peer}",
                MEMBER_PORT,
                security,
                purpose,
                member,
                peer,
            )
        deadline = time.monotonic() + ACCEPT_SECONDS
        while len(connections) < len(addresses) - 1:
            try:
                connection, frames = arrived.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                missing = sorted(set(range(member)) - set(connections))
                raise ConnectionError(
                    f"members {missing} did not connect to member {member} within "
                    f"{ACCEPT_SECONDS:g} s"
                ) from None
            peer = frames.peer_identity
            if peer in connections or not 0 <= peer < member:
                _log.warning("member %d: dropped a second connection of member %d", member, peer)
                connection.close()
                continue
            connections[peer] = (connection, frames)
    except BaseException:
        for connection, _ in connections.values():
            connection.close()
        raise
    finally:
        gate.close()
        gate.join(ACCEPT_SECONDS)
        while not arrived.empty():  # proven after the last member came: not needed
            arrived.get()[0].close()
    for connection, _ in connections.values():
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection.setblocking(False)
    return connections


def connect_proven(
    address: tuple[str, int],
    window: float,
    who: str,
    what: str,
    port_setting: str,
    security: ChannelSecurity,
    purpose: str,
    identity: int,
    expected: int,
) -> tuple[socket.socket, Frames]:
    """A connection from `who` to `what` at `address` whose handshake for `purpose` proved
    both ends hold the job's secret, and whose peer says it is `expected`; refused, reset or
    dropped, it is tried again for `window` seconds (sockets.connect)."""

    def prove(connection: socket.socket) -> Frames:
        frames = security.handshake(
            connection, purpose, identity, initiator=True, peer_host=address[0]
        )
        if frames.peer_identity != expected:
            raise ConnectionError(
                f"{who} expected {what} at {frames.peer}, which says it is {frames.peer_identity}"
            )
        return frames

    return connect(address, window, who, what, port_setting, prove)
