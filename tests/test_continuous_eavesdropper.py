"""A passive observer of Spark's traffic cannot run code on a continuous job's driver (issue #44).

The review's reproduction: a member task's bytes, as cloudpickle makes them for Spark to ship,
hold the job's secret; whoever reads them proves the key to the driver's coordinator and used
to have the driver `pickle.loads` whatever they sent. Now the driver decodes a member's messages
with an allow-list (control.py): a malicious pickle is refused and counted, nothing runs, and a
user's object written to a named list fails the job naming list and class. Where Spark
authenticates without encrypting, the task carries no secret at all: members derive it from
Spark's, which standalone executors' Python workers hold in their environment (shown on
`local-cluster`), or CONTINUOUS refuses to run (secret_source.py).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
import pickle
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from proven_sockets import proven_pair
from pyspark import cloudpickle
from spark_conf import configured

from jetspark.core import ExecutionMode, JobConfig, ProcessingGuarantee
from jetspark.core.errors import JobFailedError
from jetspark.core.runtime.metrics import JobMetrics, ProcessorMetrics
from jetspark.core.runtime.plan import plan_job
from jetspark.core.serialization import encode_batch
from jetspark.core.spark.continuous import control
from jetspark.core.spark.continuous.control import ControlConnection, RefusedMessageError
from jetspark.core.spark.continuous.coordinator import ContinuousCoordinator
from jetspark.core.spark.continuous.flow import DEFAULT_LIMITS
from jetspark.core.spark.continuous.frames import CONTROL, DRIVER
from jetspark.core.spark.continuous.member import MemberTask
from jetspark.core.spark.continuous.secret_source import (
    ENV_AUTH_SECRET,
    EXECUTOR_SECRET_FILE,
    PLAINTEXT_SECRET,
    ExecutorSecret,
    MemberSecretError,
    job_secret,
    members_secret,
    plaintext_refusal,
)
from jetspark.core.spark.continuous.security import (
    AUTHENTICATE,
    AUTHENTICATE_SECRET,
    ChannelSecurity,
)
from jetspark.core.spark.continuous.settings import ContinuousSettings, Liveness, PortRange
from jetspark.core.spark.failures import failure_report, processor_error, processor_failure_facts
from jetspark.core.spark.shared_storage import SealedFiles
from jetspark.core.spark.stages.records import LIST, MAP
from jetspark.core.stores import Stores
from jetspark.processors.windowing import KeyedWindowResult

SPARK_SECRET = b"spark's own secret"
WAIT = 60.0
"""A generous bound on any wait (never reached unless something hangs)."""


class Exploit:
    """Unpickled with `pickle.loads`, runs `touch marker`: what an attacker sends."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return os.system, (f"touch {self.marker}",)


@dataclasses.dataclass(frozen=True)
class Point:
    """A user's class, as a sink might write it to a named list."""

    x: int
    y: int


def _settings() -> ContinuousSettings:
    return ContinuousSettings(
        Liveness(interval=1.0, timeout=WAIT),
        PortRange(0, 0, "coordinator"),
        PortRange(0, 0, "member"),
        driver_bind="127.0.0.1",
        driver_host="127.0.0.1",
        slot_wait=1.0,
        links=DEFAULT_LIMITS,
        staged_bytes=1 << 20,
        wait_log_seconds=60.0,
    )


def _task(security: ChannelSecurity, address: tuple[str, int] = ("127.0.0.1", 1)) -> bytes:
    """A member task's bytes, as the driver hands them to Spark."""
    plan = plan_job(jobs.copy_dag(), JobConfig(), 1, 1)
    task = MemberTask(plan, address, "run1", security, None, _settings())
    return cloudpickle.dumps(task, protocol=5)  # type: ignore[no-any-return]


def _coordinator(secret: bytes, stores: Stores, readable: bool = True) -> ContinuousCoordinator:
    """A coordinator of a job whose `secret` is `readable` on the wire, or known only to
    processes Spark trusts."""
    coordinator = ContinuousCoordinator(
        "eavesdropped",
        plan_job(jobs.copy_dag(), JobConfig(), 1, 1),
        JobConfig(),
        stores,
        None,
        None,
        _settings(),
        ChannelSecurity(secret, readable=readable),
        0,
    )
    coordinator.begin_run("run1")
    return coordinator


def _impersonate(coordinator: ContinuousCoordinator, secret: bytes) -> ControlConnection:
    """A connection to the coordinator, as member 0, proven with `secret` (read off the
    wire), welcomed."""
    raw = socket.create_connection(coordinator.address, timeout=WAIT)
    frames = ChannelSecurity(secret).handshake(raw, CONTROL, 0, initiator=True)
    connection = ControlConnection(raw, frames)
    connection.send(control.HELLO, ("run1", 0, 1))
    welcome = connection.receive()
    assert welcome is not None and welcome[0] == control.WELCOME
    return connection


def _until(condition: Any) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


# ---------------------------------------------------------------- the review's reproduction


def test_a_task_that_carries_the_secret_gives_an_eavesdropper_the_key_but_no_code_on_the_driver(
    tmp_path: Path,
) -> None:
    secret = job_secret(SPARK_SECRET, os.urandom(32))
    task_bytes = _task(ChannelSecurity(secret))
    assert secret in task_bytes  # what Spark sends readable when it does not encrypt
    read = pickle.loads(task_bytes).security.secret  # the eavesdropper, on their machine
    assert read == secret
    old_driver = tmp_path / "old-driver"
    pickle.loads(cloudpickle.dumps((control.METRICS, Exploit(old_driver))))  # as it decoded
    assert old_driver.exists()

    stores = Stores()
    coordinator = _coordinator(secret, stores)
    connection = _impersonate(coordinator, read)
    try:
        marker = tmp_path / "driver-ran-code"
        connection.send(control.METRICS, Exploit(marker))
        assert connection.receive() is None  # the driver dropped the connection
        _until(lambda: coordinator.refused_messages == 1)
        assert not marker.exists()
        assert coordinator.fatal is None and coordinator.processor_failure is None
    finally:
        connection.close()
        coordinator.close()


def test_a_task_under_authentication_without_encryption_carries_no_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nonce = os.urandom(32)
    secret = job_secret(SPARK_SECRET, nonce)
    driver = ChannelSecurity(secret, None, ExecutorSecret(nonce))
    task_bytes = _task(driver)
    assert secret not in task_bytes and SPARK_SECRET not in task_bytes
    member = pickle.loads(task_bytes).security
    assert member.secret == b""  # all an eavesdropper gets is the nonce
    monkeypatch.setenv(ENV_AUTH_SECRET, SPARK_SECRET.decode())  # the executor's environment
    with socket.create_server(("127.0.0.1", 0)) as server:
        raw = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    proven: dict[str, Any] = {}
    accepting = threading.Thread(
        target=lambda: proven.update(driver=driver.handshake(accepted, CONTROL, DRIVER, False))
    )
    accepting.start()
    try:
        frames = member.handshake(raw, CONTROL, 0, initiator=True)
        accepting.join(WAIT)
        assert frames.peer_identity == DRIVER and proven["driver"].peer_identity == 0
        assert member.secret == secret
    finally:
        raw.close()
        accepted.close()


# ------------------------------------------------------------------ what the driver decodes


def _decoded(kind: str, payload: Any) -> tuple[str, Any]:
    return control.decode_from_member(cloudpickle.dumps((kind, payload), protocol=5))


def test_the_protocol_s_messages_decode_as_sent() -> None:
    metrics = JobMetrics([ProcessorMetrics("sink", 0, 0, {0: 5})], execution_mode="continuous")
    sealed = SealedFiles("sink", 0, "/d", (("/d/.t", "/d/f"),), "/d/.t*", "host")
    facts = failure_report(
        ValueError("boom"),
        processor_failure_facts(JobFailedError("failed", cause_type="ValueError"), 1),
    )
    messages = [
        (control.HELLO, ("run1", 0, 7)),
        (
            control.PART,
            (3, "member0-a1", b"tag", (("sink", 0, False),), {"sink": 9}, "h", [sealed]),
        ),
        (control.RESULTS, [(LIST, "out", encode_batch([1, "two"]))]),
        (control.METRICS, metrics),
        (control.FINISHED, None),
        (control.FAILED, facts),
        (control.PENDING, (3, ["sink#0"])),
    ]
    for message in messages:
        assert _decoded(*message) == message


@pytest.mark.parametrize(
    "message",
    [
        (control.HELLO, ("run1", "zero", 7)),
        (control.FAILED, {"message": "boom"}),  # facts missing
        (control.FAILED, ValueError("an exception object, not facts")),
        (control.METRICS, Point(1, 2)),
        ("unknown", None),
    ],
)
def test_a_message_of_another_shape_or_type_is_refused(message: tuple[str, Any]) -> None:
    with pytest.raises(RefusedMessageError):
        _decoded(*message)


def test_a_failure_travels_as_facts_and_the_driver_s_error_is_the_same() -> None:
    try:
        raise KeyError("missing")
    except KeyError as cause:
        failure = JobFailedError("processor sink#0 failed", vertex_name="sink", callback="process")
        failure.__cause__ = cause
    facts = failure_report(failure, processor_failure_facts(failure, 0))
    _, decoded = _decoded(control.FAILED, facts)
    error = processor_error(decoded)
    assert (error.vertex_name, error.callback, error.cause_type) == ("sink", "process", "KeyError")
    assert "processor sink#0 failed (on member 0 on host" in str(error)


# ------------------------------------------------------------ sinks' writes to named lists


def test_plain_items_and_jetspark_s_result_types_reach_the_driver_s_lists() -> None:
    window = KeyedWindowResult(0, 10, "k", 3)
    items = [None, True, 1, 2.5, "s", b"b", (1, 2), [3], {"k": {4}}, frozenset([5]), window]
    batch = encode_batch(items, classes_by_value=True)
    assert control.decode_results([(LIST, "out", batch)], True) == [(LIST, "out", items)]


def test_a_user_s_object_written_to_a_named_list_fails_the_job_naming_list_and_class(
    tmp_path: Path,
) -> None:
    secret = os.urandom(32)
    stores = Stores()
    coordinator = _coordinator(secret, stores)
    connection = _impersonate(coordinator, secret)  # here: the job's own member
    try:
        connection.send(control.RESULTS, [(LIST, "out", encode_batch([1, 2]))])
        connection.send(control.RESULTS, [(MAP, "m", encode_batch([("k", Point(1, 2))]))])
        assert connection.receive() == (control.STOP, f"the job failed: {coordinator.fatal}")
        assert list(stores.get_list("out")) == [1, 2]
        assert isinstance(coordinator.fatal, JobFailedError)
        message = str(coordinator.fatal)
        assert message.startswith(
            f"a sink wrote to map 'm' an item of type {__name__}.Point, which the driver of a "
            "continuous job does not decode from its members"
        )
        assert "write plain data to map 'm'" in message and "file or Kafka sink" in message
    finally:
        connection.close()
        coordinator.close()


def test_user_objects_reach_the_drivers_lists_where_only_trusted_processes_hold_the_key() -> None:
    """As PySpark's collect: Spark's RPC encrypted, or the key derived on the executors."""
    secret = os.urandom(32)
    stores = Stores()
    coordinator = _coordinator(secret, stores, readable=False)
    connection = _impersonate(coordinator, secret)  # the job's own member
    try:
        connection.send(control.RESULTS, [(LIST, "out", encode_batch([Point(1, 2)]))])
        _until(lambda: len(stores.get_list("out")) == 1)
        assert list(stores.get_list("out")) == [Point(1, 2)]
        assert coordinator.fatal is None
    finally:
        connection.close()
        coordinator.close()


def test_a_malicious_item_is_refused_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "driver-ran-code"
    batch = encode_batch([Exploit(marker)])
    with pytest.raises(JobFailedError, match=re.escape("an item of type posix.system")):
        control.decode_results([(LIST, "out", batch)], True)
    assert not marker.exists()


# ----------------------------------------------- where the secret comes from, and when not


def test_where_members_get_the_secret_under_each_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    unencrypted = {"authenticated": True, "encrypted": False}
    nonce = b"n" * 32
    k8s_file = {EXECUTOR_SECRET_FILE: "/var/secret"}
    assert members_secret({}, "spark://m:7077", nonce, **unencrypted) == ExecutorSecret(nonce)
    assert members_secret({}, "local-cluster[2,1,1024]", nonce, **unencrypted) is not None
    assert members_secret(k8s_file, "k8s://https://api:6443", nonce, **unencrypted) == (
        ExecutorSecret(nonce, "/var/secret")
    )
    for master, authenticated, encrypted in [
        ("local[2]", True, False),  # the tasks never cross a network
        ("yarn", True, True),  # Spark encrypts the tasks
        ("yarn", False, False),  # Spark keeps nothing secret
    ]:
        flags = {"authenticated": authenticated, "encrypted": encrypted}
        assert members_secret({}, master, nonce, **flags) is None
        assert plaintext_refusal({}, master, **flags) is None
    refusal = plaintext_refusal({}, "yarn", **unencrypted)
    assert refusal is not None
    assert "Spark does not encrypt its RPC" in refusal
    assert "set spark.network.crypto.enabled=true" in refusal
    assert f"or {PLAINTEXT_SECRET}=warn" in refusal
    with pytest.raises(
        ValueError, match=re.escape("a continuous job cannot run: spark.authenticate is")
    ):
        members_secret({}, "yarn", nonce, **unencrypted)
    warn = {PLAINTEXT_SECRET: "warn"}
    assert plaintext_refusal(warn, "yarn", **unencrypted) is None
    with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
        assert members_secret(warn, "yarn", nonce, **unencrypted) is None
    [warning] = [r.getMessage() for r in caplog.records]
    assert "the continuous job's secret crosses the network readable" in warning
    with pytest.raises(ValueError, match=re.escape(f"{PLAINTEXT_SECRET} must be refuse or warn")):
        plaintext_refusal({PLAINTEXT_SECRET: "maybe"}, "yarn", **unencrypted)


def test_a_member_derives_the_secret_from_spark_s_environment_or_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nonce = b"n" * 32
    monkeypatch.delenv(ENV_AUTH_SECRET, raising=False)
    with pytest.raises(MemberSecretError, match=f"no Spark secret in {ENV_AUTH_SECRET}"):
        ExecutorSecret(nonce).job_secret()
    monkeypatch.setenv(ENV_AUTH_SECRET, SPARK_SECRET.decode())
    assert ExecutorSecret(nonce).job_secret() == job_secret(SPARK_SECRET, nonce)
    secret_file = tmp_path / "secret"
    secret_file.write_bytes(b"\x00raw bytes")  # Kubernetes: Spark uses them base64-encoded
    expected = job_secret(base64.b64encode(b"\x00raw bytes"), nonce)
    assert ExecutorSecret(nonce, str(secret_file)).job_secret() == expected
    with pytest.raises(MemberSecretError, match="cannot read Spark's secret file"):
        ExecutorSecret(nonce, str(tmp_path / "absent")).job_secret()


@pytest.mark.spark
def test_continuous_is_refused_or_falls_back_where_the_secret_would_travel_readable(
    spark_engine: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from jetspark.core.spark import modes

    monkeypatch.setattr(modes, "master_of", lambda _context: "yarn")
    context = spark_engine.context
    dag = jobs.copy_dag()
    settings = {AUTHENTICATE: "true", AUTHENTICATE_SECRET: "s"}
    continuous = JobConfig(execution_mode=ExecutionMode.CONTINUOUS)
    guaranteed = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
    with configured(context, settings):
        with pytest.raises(ValueError, match="execution_mode=CONTINUOUS cannot run the job: "):
            modes.choose_mode(context, dag, continuous, 2)
        with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
            assert modes.choose_mode(context, dag, guaranteed, 2) is ExecutionMode.MICRO_BATCH
    [fallback] = [r.getMessage() for r in caplog.records if "not CONTINUOUS" in r.getMessage()]
    assert "Spark does not encrypt its RPC" in fallback


AUTHENTICATED_CLUSTER_JOB = """
import json, os, sys
import fault_tolerance_jobs as jobs
from jetspark.core import ExecutionMode, JobConfig
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.continuous.security import security_of
from jetspark.core.spark.session import create_context, stop_context

settings = {"spark.authenticate": "true", "spark.authenticate.secret": sys.argv[1]}
context = create_context("local-cluster[2,1,1024]", "eavesdropped", settings=settings)
try:
    seen = context.parallelize([0], 1).map(lambda _: os.environ.get("_SPARK_AUTH_SECRET"))
    worker_sees = seen.collect()
    engine = SparkEngine(context, members=2)
    engine.get_list("in").extend(range(int(sys.argv[2])))
    job = engine.new_job(jobs.copy_dag(), JobConfig(execution_mode=ExecutionMode.CONTINUOUS))
    job.join(float(sys.argv[3]))
    print(json.dumps({
        "worker_sees": worker_sees,
        "derived_on_executors": security_of(context).from_executor is not None,
        "out": sorted(engine.get_list("out")),
        "mode": str(job.metrics.execution_mode),
    }))
finally:
    stop_context(context)
"""


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_on_a_standalone_worker_members_derive_the_secret_from_spark_s(tmp_path: Path) -> None:
    """`local-cluster` runs a standalone worker: its executors' Python workers hold Spark's
    secret in their environment, and a continuous job whose tasks carry no secret runs
    exactly there, its members deriving the job's secret."""
    import pyspark

    tests = os.path.dirname(os.path.abspath(__file__))
    environment = {
        **os.environ,
        "SPARK_HOME": os.path.dirname(pyspark.__file__),
        "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }
    done = subprocess.run(
        [sys.executable, "-c", AUTHENTICATED_CLUSTER_JOB, "the cluster's secret", "200", "240"],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "worker_sees": ["the cluster's secret"],
        "derived_on_executors": True,
        "out": list(range(200)),
        "mode": "continuous",
    }


def test_proven_pairs_still_serve_the_member_side_unrestricted() -> None:
    """A member trusts its driver's messages (a user's class by value): `receive` as before."""
    (member_end, member_frames), (driver_end, driver_frames) = proven_pair()
    member = ControlConnection(member_end, member_frames)
    driver = ControlConnection(driver_end, driver_frames, decode=control.decode_from_member)
    try:
        driver.send(control.WELCOME, Point(1, 2))
        assert member.receive() == (control.WELCOME, Point(1, 2))
        member.send(control.PENDING, (1, ["sink#0"]))
        assert driver.receive() == (control.PENDING, (1, ["sink#0"]))
    finally:
        member.close()
        driver.close()
