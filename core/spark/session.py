"""The SparkContexts jetspark creates: one Python for driver and workers, loopback-bound when
local, a quiet console; and the SparkContext of whatever a user hands to SparkEngine.

A context jetspark creates (SparkEngine(), the CLI, the examples, the benchmarks, the test
fixture) runs its Python workers with the driver's interpreter unless the user configured one
(`PYSPARK_PYTHON` or `spark.pyspark.python`), turns Spark's console progress bar off (jetspark
draws its own, see `progress.py`), points the JVM at the log configuration shipped with the
package (`log4j2.properties`), drops the JVM's startup warning about incubator modules and starts
the driver JVM from its class archive (`class_archive.py`). A user's own context is used as it is.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from pyspark import SparkConf, SparkContext

from jetspark.core.spark import class_archive

DEFAULT_MASTER = "local[*]"
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
"""Spark's log configuration for the contexts jetspark creates (package data)."""
MASTER_CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a `spark://` master to accept a TCP connection before giving up."""

_LOCAL_MASTER = re.compile(r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?")
_STANDALONE_MASTER = re.compile(r"spark://[^/\s:,]+:\d+(,[^/\s:,]+:\d+)*")
_OTHER_MASTERS = ("yarn", "k8s://", "local-cluster[")
_JVM_NOISE = ("WARNING: Using incubator modules",)
"""Lines the JVM writes to stderr before any log configuration applies, dropped from it."""


def check_master(master: str) -> None:
    """Raises ValueError unless `master` is a Spark master URL: local, local[N], local[*],
    local[N,F], spark://HOST:PORT (and HA lists), yarn, k8s://... or local-cluster[...]."""
    if (
        _LOCAL_MASTER.fullmatch(master)
        or _STANDALONE_MASTER.fullmatch(master)
        or master.startswith(_OTHER_MASTERS)
    ):
        return
    raise ValueError(
        f"{master!r} is not a Spark master URL: use local, local[N], local[*], "
        "spark://HOST:PORT, yarn or k8s://HOST:PORT"
    )


def check_master_reachable(master: str, timeout: float = MASTER_CONNECT_TIMEOUT) -> None:
    """For a `spark://` master, raises ConnectionError unless one of its host:port addresses
    accepts a TCP connection within `timeout` seconds (Spark itself retries for about a minute).
    """
    if not master.startswith("spark://"):
        return
    addresses = master.removeprefix("spark://").split(",")
    failures = []
    for address in addresses:
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except OSError as error:
            failures.append(f"{address}: {error.strerror or error}")
    raise ConnectionError(
        f"cannot reach the Spark master {master} ({'; '.join(failures)}): is it running, and "
        "is the address right?"
    )


def engine_conf(
    master: str = DEFAULT_MASTER,
    app_name: str = "jetspark",
    *,
    verbose: bool = False,
    settings: Mapping[str, str] | None = None,
) -> SparkConf:
    """The configuration of a context jetspark creates; `settings` are added last.

    UI off, Python workers reused and given the driver's PYTHONHASHSEED (or 0), the driver's
    Python for the workers unless PYSPARK_PYTHON says otherwise, Spark's progress bar off, and
    (unless `verbose`) the shipped log configuration for the driver and executor JVMs. A local
    master binds to 127.0.0.1.
    """
    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName(app_name)
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.python.worker.reuse", "true")
        .set("spark.executorEnv.PYTHONHASHSEED", os.environ.get("PYTHONHASHSEED", "0"))
        .set("spark.pyspark.python", os.environ.get("PYSPARK_PYTHON", sys.executable))
    )
    if master.startswith("local"):
        conf.set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
    if not verbose:
        logging_option = f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}"
        conf.set("spark.driver.extraJavaOptions", logging_option)
        conf.set("spark.executor.extraJavaOptions", logging_option)
    for key, value in (settings or {}).items():
        conf.set(key, value)
    return conf


def create_context(
    master: str = DEFAULT_MASTER,
    app_name: str = "jetspark",
    *,
    verbose: bool = False,
    settings: Mapping[str, str] | None = None,
) -> SparkContext:
    """A new SparkContext configured by `engine_conf`; the caller stops it.

    Checks `master` first (`check_master`, `check_master_reachable`), so a typo or a master
    that is down fails in seconds with a ValueError or ConnectionError instead of a JVM error.
    The driver's Python runs the workers: `PYSPARK_PYTHON` is set for the launcher too. Unless
    `verbose`, the JVM's log level is ERROR and its incubator-module warning is dropped.
    """
    check_master(master)
    check_master_reachable(master)
    conf = engine_conf(master, app_name, verbose=verbose, settings=settings)
    os.environ.setdefault("PYSPARK_PYTHON", conf.get("spark.pyspark.python") or sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    gateway = None
    if SparkContext._gateway is None:  # a JVM is launched once per process
        gateway = _launch_gateway(conf, quiet=not verbose)
    context = SparkContext(conf=conf, gateway=gateway)
    if not verbose:
        context.setLogLevel("ERROR")
    return context


def stop_context(context: SparkContext) -> None:
    """Stops `context` as `SparkContext.stop` does, without the up to a second PySpark waits for
    its accumulator server to notice (the server's handler polls once a second): that server
    shuts down in a daemon thread of its own, which the process's exit may overtake."""
    server = getattr(context, "_accumulatorServer", None)
    context._accumulatorServer = None  # type: ignore[assignment]
    context.stop()
    if server is not None:
        threading.Thread(target=server.shutdown, name="stop-accumulators", daemon=True).start()


def _launch_gateway(conf: SparkConf, *, quiet: bool) -> Any:
    """Launches the driver JVM with the class archive (`class_archive.prepare`); when `quiet`,
    its stderr passes through a filter that drops `_JVM_NOISE` (everything else, the Python
    workers' own stderr of a local master included, goes on)."""
    from pyspark.find_spark_home import _find_spark_home
    from pyspark.java_gateway import launch_gateway

    recording = class_archive.prepare(conf, Path(_find_spark_home()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE} if quiet else {})
    if quiet:
        threading.Thread(
            target=_forward_stderr,
            args=(gateway.proc.stderr, sys.stderr),
            name="jvm-stderr",
            daemon=True,
        ).start()
    if recording is not None:
        recording.finish_at_exit(gateway)
    return gateway


def _forward_stderr(source: IO[bytes], target: IO[str]) -> None:
    """Copies the JVM's stderr lines to `target` until the JVM exits, except `_JVM_NOISE`."""
    for raw in iter(source.readline, b""):
        line = raw.decode(errors="replace")
        if line.startswith(_JVM_NOISE):
            continue
        try:
            target.write(line)
            target.flush()
        except (OSError, ValueError):  # the terminal went away, or the interpreter is exiting
            return


def spark_context_of(spark: Any) -> SparkContext:
    """The SparkContext of a SparkSession or SparkContext; a new `create_context(spark)` for a
    master URL; for None the process's active context, else a new one on local[*].

    An engine-made context is a bare SparkContext: an RDD engine needs no SparkSession, which
    takes about twice as long to start (DESIGN.md, measured facts).
    """
    if spark is None:
        active = SparkContext._active_spark_context
        return active if active is not None else create_context()
    if isinstance(spark, str):
        return create_context(spark)
    if isinstance(spark, SparkContext):
        return spark
    context = getattr(spark, "sparkContext", None)
    if isinstance(context, SparkContext):
        return context
    raise TypeError(
        f"SparkEngine(spark=...) takes a SparkSession, a SparkContext, a master URL or None, "
        f"got {type(spark).__name__}"
    )
