"""Strangers on a continuous job's listeners (issue #33): a connect-and-close probe, a silent
connection, 100 MB of garbage, a replayed captured handshake and a forged frame of a valid
length, on the driver's coordinator and on every member's listener, leave the job running: it
completes exactly, with 0 restarts, the driver's memory does not grow with the garbage, and no
thread or connection of the job outlives it; with and without TLS.

The members' listeners are open only while the members connect to each other, so the test holds
the coordinator's answer to the members' hellos (they listen by then) until every attack has
connected; the members then let their members in past the strangers. The coordinator is
attacked again while the job runs (its source waits for a file the test writes at the end).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from spark_conf import configured, free_ports

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.spark.continuous.coordinator import ContinuousCoordinator
from jetspark.core.spark.continuous.frames import MAGIC, NONCE_BYTES
from jetspark.core.spark.continuous.security import (
    AUTHENTICATE,
    AUTHENTICATE_SECRET,
    NETWORK_CRYPTO,
)
from jetspark.core.spark.continuous.settings import COORDINATOR_PORT, MEMBER_PORT, PORT_RETRIES
from jetspark.edges import between
from jetspark.processors import write_list_p

pytestmark = pytest.mark.spark

ITEMS = 200
GARBAGE_BYTES = 100 << 20
RSS_GROWTH_BOUND = 64 << 20
"""The driver's peak memory may grow this much over the job (the garbage alone is 100 MiB)."""
WAIT = 120.0
"""A generous bound on any wait of the test (never reached unless something hangs)."""
_GREETING = struct.Struct(f"<{len(MAGIC)}s{NONCE_BYTES}si")
_PROOF_BYTES = 4 + 32


class GatedSource(AbstractProcessor):
    """Processor 0 emits 0 .. ITEMS - 1; every processor completes once the file `gate`
    exists."""

    def __init__(self, gate: str) -> None:
        super().__init__()
        self.gate = gate
        self.next = 0

    def complete(self) -> bool:
        if self.context.global_processor_index == 0 and self.next < ITEMS:
            while self.next < ITEMS and self.try_emit(self.next):
                self.next += 1
            return False
        if os.path.exists(self.gate):
            return True
        time.sleep(0.01)
        return False

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot(f"next-{self.context.global_processor_index}", self.next)

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if key == f"next-{self.context.global_processor_index}":
            self.next = value


def _number(item: int) -> int:
    return item


# ------------------------------------------------------------------------------ the attacks
# Each attack connects to `address`, calls `connected()` once its connection is made (to be
# let in once the listener accepts), and returns the connection. The listener may drop it at
# any point after that: the attacks never expect an answer.

Connected = Callable[[], None]


def _probe(address: tuple[str, int], connected: Connected, capture: bytes) -> socket.socket:
    connection = socket.create_connection(address)
    connected()
    connection.close()
    return connection


def _silent(address: tuple[str, int], connected: Connected, capture: bytes) -> socket.socket:
    connection = socket.create_connection(address)
    connected()
    return connection


def _garbage(address: tuple[str, int], connected: Connected, capture: bytes) -> socket.socket:
    connection = socket.create_connection(address)
    connected()
    chunk = secrets.token_bytes(1 << 20)
    with contextlib.suppress(OSError):  # dropped long before the end
        for _ in range(GARBAGE_BYTES // len(chunk)):
            connection.sendall(chunk)
    return connection


def _replayed(address: tuple[str, int], connected: Connected, capture: bytes) -> socket.socket:
    """What the coordinator sent on an earlier connection (its greeting and the frame proving
    the job's key), replayed."""
    connection = socket.create_connection(address)
    connected()
    with contextlib.suppress(OSError):
        connection.sendall(capture)
    return connection


def _forged(address: tuple[str, int], connected: Connected, capture: bytes) -> socket.socket:
    """A well-formed greeting, then a proof frame of the right length with a made-up tag."""
    connection = socket.create_connection(address)
    connected()
    with contextlib.suppress(OSError):
        connection.sendall(_greeting())
        _read(connection, _GREETING.size)
        connection.sendall(struct.pack("<I", 0) + secrets.token_bytes(32))
    return connection


ATTACKS = [_probe, _silent, _garbage, _replayed, _forged]


def _greeting() -> bytes:
    return _GREETING.pack(MAGIC, secrets.token_bytes(NONCE_BYTES), 0)


def _captured(address: tuple[str, int]) -> bytes:
    """The greeting and the proof a listener of the job sends a stranger that greeted it (over
    TLS: what it sends before it drops a stranger that does not speak TLS)."""
    with socket.create_connection(address) as connection:
        connection.sendall(_greeting())
        try:
            return _read(connection, _GREETING.size + _PROOF_BYTES)
        except ConnectionError:
            return b"jetspark"


def _read(connection: socket.socket, size: int) -> bytes:
    connection.settimeout(WAIT)
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError("closed")
        data += chunk
    return data


def _closed_by_peer(connection: socket.socket) -> bool:
    """True when the other end closed the connection (waits up to WAIT)."""
    if connection.fileno() < 0:
        return True  # the probe closed it itself
    connection.settimeout(WAIT)
    try:
        while connection.recv(1 << 16):
            pass  # what the listener said before it dropped us
    except TimeoutError:
        return False
    except OSError:
        pass  # reset
    connection.close()
    return True


class Attacker:
    """Runs every attack on every address, each on a thread of its own."""

    def __init__(self, capture: bytes) -> None:
        self.capture = capture
        self.connections: list[socket.socket] = []
        self.errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._connected = threading.Semaphore(0)
        self._lock = threading.Lock()

    def attack(self, addresses: list[tuple[str, int]]) -> None:
        """Starts the attacks; returns once each has made its connection."""
        for address in addresses:
            for attack in ATTACKS:
                thread = threading.Thread(target=self._run, args=(attack, address))
                thread.start()
                self._threads.append(thread)
        for _ in self._threads:
            assert self._connected.acquire(timeout=WAIT)

    def _run(self, attack: Any, address: tuple[str, int]) -> None:
        try:
            connection = attack(address, self._connected.release, self.capture)
        except BaseException as error:  # reported by `finish`
            with self._lock:
                self.errors.append(error)
            self._connected.release()
            return
        with self._lock:
            self.connections.append(connection)

    def finish(self) -> None:
        """Waits for every attack to end; fails on an attack that could not be made."""
        for thread in self._threads:
            thread.join(WAIT)
        assert not self.errors, self.errors


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(field)


def _job_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("jetspark-")}


@pytest.mark.parametrize(
    "security",
    [{}, {NETWORK_CRYPTO: "true", AUTHENTICATE: "true", AUTHENTICATE_SECRET: "spark's"}],
    ids=["authenticated", "encrypted"],
)
def test_strangers_on_every_listener_leave_the_job_running_exactly(
    security: dict[str, str],
    spark_engine: Any,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    coordinator_port, member_port = free_ports(1), free_ports(2)
    hellos = threading.Semaphore(0)
    answer = threading.Event()
    hello = ContinuousCoordinator._hello

    def held_hello(self: ContinuousCoordinator, *args: Any) -> Any:
        hellos.release()
        answer.wait(WAIT)
        return hello(self, *args)

    monkeypatch.setattr(ContinuousCoordinator, "_hello", held_hello)
    gate = str(tmp_path / "gate")
    dag = DAG("strangers")
    source = dag.new_vertex("source", lambda: GatedSource(gate)).local_parallelism(1)
    sink = dag.new_vertex("sink", write_list_p("out")).local_parallelism(1)
    dag.edge(between(source, sink).distributed().partitioned(_number))
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=200,
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    settings = {
        COORDINATOR_PORT: str(coordinator_port),
        MEMBER_PORT: str(member_port),
        PORT_RETRIES: "1",
        **security,
    }
    threads_before = _job_threads()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak RSS starts from here
    rss_before = _rss_kib("VmRSS")
    attacker: Attacker | None = None
    coordinator = ("127.0.0.1", coordinator_port)
    members = [("127.0.0.1", member_port), ("127.0.0.1", member_port + 1)]
    with (
        configured(engine.context, settings),
        caplog.at_level(logging.WARNING, "jetspark.spark"),
    ):
        job = engine.new_job(
            dag, config, snapshot_store=DirectorySnapshotStore(str(tmp_path / "snapshots"))
        )
        try:
            for _ in range(2):  # both members listen by the time they say hello
                assert hellos.acquire(timeout=WAIT)
            attacker = Attacker(_captured(coordinator))
            attacker.attack([coordinator, *members])
        finally:
            answer.set()
        attacker.finish()
        running = Attacker(_captured(coordinator))  # the coordinator again, while it runs
        running.attack([coordinator])
        running.finish()
        assert not job.status.is_terminal
        with open(gate, "w"):
            pass
        job.join(WAIT)
    assert sorted(engine.get_list("out")) == list(range(ITEMS))
    assert job.metrics.restarts == 0
    assert (_rss_kib("VmHWM") - rss_before) << 10 < RSS_GROWTH_BOUND
    assert attacker is not None
    for connection in attacker.connections + running.connections:
        assert _closed_by_peer(connection)
    deadline = time.monotonic() + WAIT
    while _job_threads() - threads_before and time.monotonic() < deadline:
        time.sleep(0.05)  # threads end right after the job (a join is not instant)
    assert not _job_threads() - threads_before
    dropped = [r.getMessage() for r in caplog.records if "unproven connection" in r.getMessage()]
    assert any("from 127.0.0.1 (" in line for line in dropped)
