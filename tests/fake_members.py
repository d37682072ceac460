"""A continuous job's driver-side coordinator with fake members: sockets of the test's own
that say hello as member.py does, so a test reads what the coordinator tells each member and
answers in its place (no Spark). Its wait clock is the test's."""

from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jetspark.core import DAG, DirectorySnapshotStore, ExecutionMode, JobConfig
from jetspark.core import ProcessingGuarantee as Guarantee
from jetspark.core.runtime.plan import plan_job
from jetspark.core.spark.continuous import control, coordinator
from jetspark.core.spark.continuous.control import ControlConnection
from jetspark.core.spark.continuous.flow import DEFAULT_LIMITS
from jetspark.core.spark.continuous.frames import CONTROL
from jetspark.core.spark.continuous.security import ChannelSecurity
from jetspark.core.spark.continuous.settings import (
    COORDINATOR_PORT,
    MEMBER_PORT,
    ContinuousSettings,
    Liveness,
    PortRange,
)
from jetspark.core.stores import Stores
from jetspark.edges import between
from jetspark.processors import read_list_p, write_list_p

LIVENESS = Liveness(interval=1.0, timeout=120.0)
WAIT_LOG = 60.0
"""spark.jetspark.snapshot.waitLogInterval, in seconds of the test's clock."""


class WaitClock:
    """The coordinator's wait clock, moved on by the test; counts how often it was read."""

    def __init__(self) -> None:
        self.now = 0.0
        self.reads = 0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            self.reads += 1
            return self.now

    def read_again(self, times: int) -> None:
        """Returns once the clock was read `times` more times (bounded, never a speed check)."""
        target = self.reads + times
        deadline = time.monotonic() + 60
        while self.reads < target:
            assert time.monotonic() < deadline, "the coordinator stopped reading its clock"
            time.sleep(0.01)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> WaitClock:
    clock = WaitClock()
    monkeypatch.setattr(coordinator, "wait_clock", clock)
    return clock


@pytest.fixture
def two_members(tmp_path: Path) -> Iterator[tuple[coordinator.ContinuousCoordinator, Any]]:
    """A coordinator of two members with a snapshot store, and how to connect a member."""
    dag = DAG("waiting")
    numbers = dag.new_vertex("numbers", read_list_p("numbers"))
    dag.edge(between(numbers, dag.new_vertex("sink", write_list_p("out"))))
    config = JobConfig(
        processing_guarantee=Guarantee.EXACTLY_ONCE,
        snapshot_interval_millis=10,
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    plan = plan_job(dag, config, 2, 1)
    settings = ContinuousSettings(
        LIVENESS,
        PortRange(0, 0, COORDINATOR_PORT),
        PortRange(0, 0, MEMBER_PORT),
        driver_bind="127.0.0.1",
        driver_host="127.0.0.1",
        slot_wait=60.0,
        links=DEFAULT_LIMITS,
        staged_bytes=1 << 20,
        wait_log_seconds=WAIT_LOG,
    )
    security = ChannelSecurity(secrets.token_bytes(32))
    store = DirectorySnapshotStore(str(tmp_path / "snapshots"))
    the_coordinator = coordinator.ContinuousCoordinator(
        "job-44", plan, config, Stores(), store, None, settings, security, 3
    )

    def connect(token: str, member: int, attempt: int) -> ControlConnection:
        """Member `member` of `attempt` says hello, as member.py does, and is welcomed."""
        raw = socket.create_connection(the_coordinator.address)
        frames = security.handshake(raw, CONTROL, member, initiator=True)
        connection = ControlConnection(raw, frames, LIVENESS)
        connection.send(control.HELLO, (token, member, attempt))
        assert connection.receive()[0] == control.WELCOME  # type: ignore[index]
        return connection

    try:
        yield the_coordinator, connect
    finally:
        the_coordinator.close()
        plan.close(None)


def snapshot_asked(connection: ControlConnection) -> int:
    """The id of the snapshot the coordinator asks `connection`'s member for."""
    kind, snapshot_id = connection.receive()  # type: ignore[misc]
    assert kind == control.SNAPSHOT, kind
    return int(snapshot_id)
