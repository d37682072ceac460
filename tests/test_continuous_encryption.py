"""A continuous job encrypts its connections when Spark encrypts its own (issue #33): with
`spark.network.crypto.enabled=true` and `spark.authenticate=true`, a marker the items carry never
appears in the bytes tcpdump captures on the coordinator's and the members' ports; without them
it does (the capture works). The job's results are exact either way. When Spark's SSL settings
name PEM files, the job's TLS uses them.

tcpdump captures on loopback (root, as CI runs; .ci/run installs tcpdump where missing).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from spark_conf import configured, free_ports

from jetspark.core import DAG, ExecutionMode, JobConfig
from jetspark.core.spark.continuous.security import (
    AUTHENTICATE,
    AUTHENTICATE_SECRET,
    NETWORK_CRYPTO,
    SSL_RPC_ENABLED,
    job_certificate,
    security_of,
)
from jetspark.core.spark.continuous.settings import COORDINATOR_PORT, MEMBER_PORT, PORT_RETRIES
from jetspark.edges import between
from jetspark.processors import map_p, read_list_p, write_list_p

pytestmark = pytest.mark.spark

MARKER = "MARKER-7f3e9c1d"
ITEMS = 500
WAIT = 120.0


@contextlib.contextmanager
def _captured(ports: list[int], path: str) -> Iterator[None]:
    """tcpdump on loopback, writing the packets of `ports` to `path`, for the block."""
    expression = " or ".join(f"tcp port {port}" for port in ports)
    capture = subprocess.Popen(
        ["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-s", "0", "-w", path, expression],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert capture.stderr is not None
        line = capture.stderr.readline()  # 'listening on lo, ...' once it captures
        assert "listening on" in line, line
        yield
    finally:
        capture.send_signal(signal.SIGINT)  # flushes the file
        capture.wait(WAIT)


def _marked(item: int) -> str:
    return f"{MARKER} {item}"


def _text(item: str) -> str:
    return item


def _run_capturing(spark_engine: Any, tmp_path: Any, settings: dict[str, str]) -> bytes:
    """Runs a job whose items carry MARKER across both members under `settings`; what the
    capture of its ports holds."""
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    engine.get_list("in").extend(range(ITEMS))
    coordinator_port, member_port = free_ports(1), free_ports(2)
    dag = DAG("marked")
    source = dag.new_vertex("source", read_list_p("in")).local_parallelism(1)
    mark = dag.new_vertex("mark", map_p(_marked)).local_parallelism(1)
    sink = dag.new_vertex("sink", write_list_p("marked")).local_parallelism(1)
    dag.edge(between(source, mark))
    dag.edge(between(mark, sink).distributed().partitioned(_text))  # half crosses members
    ports = {
        COORDINATOR_PORT: str(coordinator_port),
        MEMBER_PORT: str(member_port),
        PORT_RETRIES: "1",
    }
    path = str(tmp_path / f"capture-{len(settings)}.pcap")
    with (
        configured(engine.context, {**ports, **settings}),
        _captured([coordinator_port, member_port, member_port + 1], path),
    ):
        engine.new_job(dag, JobConfig(execution_mode=ExecutionMode.CONTINUOUS)).join(WAIT)
    assert sorted(engine.get_list("marked")) == sorted(_marked(n) for n in range(ITEMS))
    with open(path, "rb") as capture:
        return capture.read()


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump is not installed")
@pytest.mark.skipif(os.geteuid() != 0, reason="tcpdump needs root")
def test_items_cross_the_wire_encrypted_when_spark_encrypts(
    spark_engine: Any, tmp_path: Any
) -> None:
    plain = _run_capturing(spark_engine, tmp_path, {})
    assert MARKER.encode() in plain
    encrypted = _run_capturing(
        spark_engine,
        tmp_path,
        {NETWORK_CRYPTO: "true", AUTHENTICATE: "true", AUTHENTICATE_SECRET: "spark's secret"},
    )
    assert len(encrypted) > 10_000  # the job's traffic was captured
    assert MARKER.encode() not in encrypted


def test_spark_s_own_pem_key_and_certificate_are_used_when_its_ssl_settings_name_them(
    spark_engine: Any, tmp_path: Any
) -> None:
    from jetspark.core.spark import SparkEngine

    material = job_certificate()
    certificate, key = tmp_path / "chain.pem", tmp_path / "key.pem"
    certificate.write_bytes(material.certificate or b"")
    key.write_bytes(material.key or b"")
    engine = SparkEngine(spark_engine.context, members=2)
    engine.get_list("in").extend(range(ITEMS))
    settings = {
        SSL_RPC_ENABLED: "true",
        "spark.ssl.rpc.privateKey": str(key),
        "spark.ssl.rpc.certChain": str(certificate),
    }
    with configured(engine.context, settings):
        tls = security_of(engine.context).tls
        engine.new_job(jobs.copy_dag(), JobConfig(execution_mode=ExecutionMode.CONTINUOUS)).join(
            WAIT
        )
    assert tls is not None and tls.certificate is None
    assert tls.certificate_file is not None and tls.key_file is not None
    assert (tls.certificate_file.path, tls.key_file.path) == (str(certificate), str(key))
    assert sorted(engine.get_list("out")) == list(range(ITEMS))


GENERATED_SECRET_JOB = """
import json, sys
import fault_tolerance_jobs as jobs
from jetspark.core import ExecutionMode, JobConfig
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.continuous.security import AUTHENTICATE, AUTHENTICATE_SECRET
from jetspark.core.spark.continuous.security import spark_security_manager
from jetspark.core.spark.session import create_context, stop_context

context = create_context("local[2]", "generated-secret", settings={AUTHENTICATE: "true"})
try:
    conf = context._jsc.sc().conf()
    engine = SparkEngine(context, members=2)
    engine.get_list("in").extend(range(int(sys.argv[1])))
    job = engine.new_job(jobs.copy_dag(), JobConfig(execution_mode=ExecutionMode.CONTINUOUS))
    job.join(float(sys.argv[2]))
    print(json.dumps({
        "configured_secret": conf.contains(AUTHENTICATE_SECRET),
        "spark_generated_one": bool(spark_security_manager(context).getSecretKey()),
        "out": sorted(engine.get_list("out")),
        "mode": str(job.metrics.execution_mode),
    }))
finally:
    stop_context(context)
"""


def test_a_job_on_spark_s_generated_secret_runs_exactly(tmp_path: Any) -> None:
    """`spark.authenticate=true` with no secret configured: Spark generates one on a local
    master (as YARN does); the job's secret derives from it, and its members prove it."""
    tests = os.path.dirname(os.path.abspath(__file__))
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }
    done = subprocess.run(
        [sys.executable, "-c", GENERATED_SECRET_JOB, str(ITEMS), str(WAIT)],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {
        "configured_secret": False,
        "spark_generated_one": True,
        "out": list(range(ITEMS)),
        "mode": "continuous",
    }


def _keystore(path: Any, kind: str, password: str) -> str:
    """A keystore of `kind` (PKCS12 or JKS) holding an EC key, made with the JDK's keytool."""
    key = ["-alias", "jetspark", "-keyalg", "EC", "-groupname", "secp256r1"]
    store = ["-storetype", kind, "-keystore", str(path), "-storepass", password]
    subject = ["-dname", "CN=jetspark test", "-validity", "30", "-keypass", password]
    subprocess.run(
        ["keytool", "-genkeypair", *key, *store, *subject],
        check=True,
        capture_output=True,
        timeout=WAIT,
    )
    return str(path)


@pytest.mark.skipif(shutil.which("keytool") is None, reason="the JDK's keytool is not installed")
def test_spark_s_pkcs12_keystore_is_used_when_its_ssl_settings_name_one(
    spark_engine: Any, tmp_path: Any
) -> None:
    from jetspark.core.spark import SparkEngine

    keystore = _keystore(tmp_path / "keystore.p12", "PKCS12", "store secret")
    engine = SparkEngine(spark_engine.context, members=2)
    engine.get_list("in").extend(range(ITEMS))
    settings = {
        SSL_RPC_ENABLED: "true",
        "spark.ssl.rpc.keyStore": keystore,
        "spark.ssl.rpc.keyStorePassword": "store secret",
    }
    with configured(engine.context, settings):
        tls = security_of(engine.context).tls
        engine.new_job(jobs.copy_dag(), JobConfig(execution_mode=ExecutionMode.CONTINUOUS)).join(
            WAIT
        )
    assert tls is not None and tls.certificate is None and tls.keystore is not None
    assert (tls.keystore.setting, tls.keystore.path) == ("spark.ssl.rpc.keyStore", keystore)
    assert sorted(engine.get_list("out")) == list(range(ITEMS))
    wrong = {**settings, "spark.ssl.rpc.keyStorePassword": "wrong"}
    with (
        configured(engine.context, wrong),
        pytest.raises(ValueError, match=f"the keystore {keystore} cannot be read"),
    ):
        security_of(engine.context)


@pytest.mark.skipif(shutil.which("keytool") is None, reason="the JDK's keytool is not installed")
def test_a_jks_keystore_leaves_the_job_its_own_certificate_with_a_warning(
    spark_engine: Any, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    keystore = _keystore(tmp_path / "keystore.jks", "JKS", "store secret")
    settings = {SSL_RPC_ENABLED: "true", "spark.ssl.rpc.keyStore": keystore}
    with (
        configured(spark_engine.context, settings),
        caplog.at_level(logging.WARNING, logger="jetspark.spark"),
    ):
        tls = security_of(spark_engine.context).tls
    assert tls is not None and tls.certificate is not None and tls.keystore is None
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"the keystore {keystore} is a JKS keystore")
