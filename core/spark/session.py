"""The SparkContexts jetspark creates: one Python for driver and workers, loopback-bound where
the cluster allows, a quiet console; and the SparkContext of whatever a user hands to
SparkEngine.

A context jetspark creates (SparkEngine(), the CLI, the examples, the benchmarks, the test
fixture) runs its Python workers with the driver's interpreter unless the user configured one
(`PYSPARK_PYTHON` or `spark.pyspark.python`), turns Spark's console progress bar off (jetspark
draws its own, see `progress.py`), points the JVM at the log configuration shipped with the
package (`log4j2.properties`), keeps the JVM's console quiet (`driver_jvm.py`) and starts the
driver JVM from its class archive (`class_archive.py`). Spark's web UI is off unless asked for,
and then bound to 127.0.0.1.

Under spark-submit the driver JVM is spark-submit's: a context jetspark creates there takes
spark-submit's master, application name, configuration and `--py-files`, and adds jetspark's
defaults only where the user set nothing. A user's own context is used as it is.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from py4j.protocol import Py4JError
from pyspark import SparkConf, SparkContext
from pyspark.errors import PySparkRuntimeError

from jetspark.core.spark import class_archive, interrupts
from jetspark.core.spark.driver_jvm import JvmConsole, SparkStartError, start_error

DEFAULT_MASTER = "local[*]"
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
"""Spark's log configuration for the contexts jetspark creates (package data)."""
MASTER_CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a `spark://` master or a Kubernetes API server to accept a TCP connection
before giving up."""
LOOPBACK = "127.0.0.1"

_LOCAL_MASTER = re.compile(r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?")
_STANDALONE_MASTER = re.compile(r"spark://[^/\s:,]+:\d+(,[^/\s:,]+:\d+)*")
_OTHER_MASTERS = ("yarn", "k8s://", "local-cluster[")
_LOG_OPTION = "-Dlog4j2.configurationFile"
JVM_EXIT_TIMEOUT = 10.0
"""Seconds `stop_context(..., end_jvm=True)` waits for the driver JVM to exit."""
_local_ip_set_here: str | None = None
"""The SPARK_LOCAL_IP this module set for the driver JVM it launches (a user's is left alone)."""
_own_gateway: Any = None
"""The gateway of the driver JVM this module launched, unless that JVM records the class archive
(the recording ends it at this process's exit, `class_archive.Recording`)."""


def runs_in_driver(master: str) -> bool:
    """True for `local` and `local[...]`, whose executor is the driver's JVM; False for every
    cluster, `local-cluster[...]` included (its executors register after the context starts)."""
    return _LOCAL_MASTER.fullmatch(master) is not None


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


def reach_master(master: str, timeout: float = MASTER_CONNECT_TIMEOUT) -> str | None:
    """The address of this machine that the cluster of `master` reaches the driver at: 127.0.0.1
    for a local master; for a `spark://` master or a Kubernetes API server (`k8s://`), the local
    address of a TCP connection to it, which must be accepted within `timeout` seconds (Spark
    itself retries for a minute or more), else ConnectionError. None for other masters."""
    if master.startswith("local"):
        return LOOPBACK
    if master.startswith("spark://"):
        addresses = [a.rpartition(":")[::2] for a in master.removeprefix("spark://").split(",")]
        what, hint = f"the Spark master {master}", "is it running, and is the address right?"
    elif master.startswith("k8s://"):
        url = urlsplit(master.removeprefix("k8s://"))
        if not url.scheme:  # Spark's default scheme for the API server is https
            url = urlsplit(f"https://{master.removeprefix('k8s://')}")
        api_port = url.port or (443 if url.scheme == "https" else 80)
        addresses = [(url.hostname or "", str(api_port))]
        what = f"the Kubernetes API server of {master}"
        hint = "is the cluster running, and is the address the one `kubectl cluster-info` shows?"
    else:
        return None
    failures = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, int(port)), timeout=timeout) as connection:
                return str(connection.getsockname()[0])
        except OSError as error:
            failures.append(f"{host}:{port}: {error.strerror or error}")
    raise ConnectionError(f"cannot reach {what} ({'; '.join(failures)}): {hint}")


def under_spark_submit() -> bool:
    """True when this Python is the driver of an application spark-submit runs: PySpark then
    joins spark-submit's JVM (its port in PYSPARK_GATEWAY_PORT) instead of launching one."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def default_master() -> str:
    """The master a context gets when none is named: spark-submit's `--master` under
    spark-submit, else local[*]."""
    if not under_spark_submit():
        return DEFAULT_MASTER
    SparkContext._ensure_initialized()
    return SparkConf().get("spark.master") or DEFAULT_MASTER


def jetspark_defaults(
    *, verbose: bool = False, ui: bool = False, driver_address: str | None = None
) -> dict[str, str]:
    """The settings jetspark gives the contexts it creates.

    Spark's web UI on only when `ui`, Python workers reused and given the driver's
    PYTHONHASHSEED (or 0), the driver's Python for the workers unless PYSPARK_PYTHON says
    otherwise, Spark's progress bar off, the driver bound to `driver_address` (`reach_master`)
    when known, and (unless `verbose`) the shipped log configuration for the driver and executor
    JVMs.
    """
    settings = {
        "spark.ui.enabled": str(ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.python.worker.reuse": "true",
        "spark.executorEnv.PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0"),
        "spark.pyspark.python": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }
    if driver_address is not None:
        settings["spark.driver.host"] = settings["spark.driver.bindAddress"] = driver_address
    if not verbose:
        logging_option = f"{_LOG_OPTION}={LOG_CONFIG.as_uri()}"
        settings["spark.driver.extraJavaOptions"] = logging_option
        settings["spark.executor.extraJavaOptions"] = logging_option
    return settings


def engine_conf(
    master: str = DEFAULT_MASTER,
    app_name: str = "jetspark",
    *,
    verbose: bool = False,
    ui: bool = False,
    driver_address: str | None = None,
    settings: Mapping[str, str] | None = None,
) -> SparkConf:
    """The configuration of a context jetspark creates outside spark-submit: `master`,
    `app_name`, `jetspark_defaults`, then `settings`."""
    conf = SparkConf().setMaster(master).setAppName(app_name)
    defaults = jetspark_defaults(verbose=verbose, ui=ui, driver_address=driver_address)
    for key, value in {**defaults, **(settings or {})}.items():
        conf.set(key, value)
    return conf


def create_context(
    master: str | None = None,
    app_name: str | None = None,
    *,
    verbose: bool = False,
    ui: bool = False,
    settings: Mapping[str, str] | None = None,
) -> SparkContext:
    """A new SparkContext on `master` (None: `default_master()`); the caller stops it.

    Under spark-submit it is created in spark-submit's JVM with spark-submit's configuration,
    `master` and `app_name` overriding it when given and `jetspark_defaults` added where the
    user set nothing. Otherwise `master` is checked first (`check_master`, `reach_master`), so a
    typo or a cluster that is down fails in seconds with a ValueError or ConnectionError instead
    of a JVM error; the driver JVM binds its RPC to the address the cluster reaches it at and its
    UI (`ui`) to 127.0.0.1, unless SPARK_LOCAL_IP says otherwise. The driver's Python runs the
    workers: `PYSPARK_PYTHON` is set for the launcher too. Unless `verbose`, the JVM's log
    level is ERROR and its console quiet. A failure in the JVM is a SparkStartError.
    """
    if under_spark_submit():
        return _submitted_context(master, app_name, verbose=verbose, ui=ui, settings=settings)
    master = master or DEFAULT_MASTER
    check_master(master)
    address = _driver_address(master)
    if address is not None and "SPARK_LOCAL_IP" not in os.environ:
        global _local_ip_set_here
        os.environ["SPARK_LOCAL_IP"] = _local_ip_set_here = LOOPBACK  # where the UI listens
    conf = engine_conf(
        master,
        app_name or "jetspark",
        verbose=verbose,
        ui=ui,
        driver_address=address,
        settings=settings,
    )
    os.environ.setdefault("PYSPARK_PYTHON", conf.get("spark.pyspark.python") or sys.executable)
    gateway = None
    if SparkContext._gateway is None:  # a JVM is launched once per process
        gateway = _launch_gateway(conf, master, quiet=not verbose)
    return _started(conf, master, gateway, quiet=not verbose)


def _submitted_context(
    master: str | None,
    app_name: str | None,
    *,
    verbose: bool,
    ui: bool,
    settings: Mapping[str, str] | None,
) -> SparkContext:
    """A context in spark-submit's JVM: its configuration (`--master`, `--name`, `--conf`,
    `--py-files`, spark-defaults.conf), then `master` and `app_name` if given, then
    `jetspark_defaults` where unset, then `settings`.

    spark-submit launched the JVM with SPARK_LOCAL_IP as it found it, which is where the UI
    binds (every interface when unset): jetspark turns the UI on only where SPARK_LOCAL_IP is
    set, and leaves `spark.ui.enabled` to a user who set it.
    """
    if master is not None:
        check_master(master)
    SparkContext._ensure_initialized()
    conf = SparkConf()
    if master is not None:
        conf.setMaster(master)
    if app_name is not None:
        conf.setAppName(app_name)
    effective_master = conf.get("spark.master") or DEFAULT_MASTER
    check_master(effective_master)  # spark-submit's --master: Spark would fail in its JVM
    own_logging = _user_configured_logging(conf)
    defaults = jetspark_defaults(
        verbose=verbose or own_logging,
        ui=ui and "SPARK_LOCAL_IP" in os.environ,
        driver_address=_driver_address(effective_master),
    )
    for key, value in defaults.items():
        if not conf.contains(key):
            conf.set(key, value)
    for key, value in (settings or {}).items():
        conf.set(key, value)
    os.environ.setdefault("PYSPARK_PYTHON", conf.get("spark.pyspark.python") or sys.executable)
    quiet = not (verbose or own_logging)
    if quiet:
        _log_quietly_from_now_on()
    return _started(conf, effective_master, None, quiet=False)


def _log_quietly_from_now_on() -> None:
    """Points spark-submit's JVM, started with Spark's logging, at jetspark's before the context
    starts, so that its start-up lines (Spark's version, the Hadoop warning) stay off the console.

    spark-submit leaves Spark's logging uninitialised for the application, and the context's
    first log line would load Spark's default configuration over jetspark's: Spark's logging is
    initialised here first, silently, then replaced."""
    jvm = SparkContext._jvm
    assert jvm is not None  # SparkContext._ensure_initialized() has run
    spark_logging = getattr(getattr(jvm.org.apache.spark, "SparkContext$"), "MODULE$")
    spark_logging.initializeLogIfNecessary(False, True)  # (not a shell, silent)
    configurator = jvm.org.apache.logging.log4j.core.config.Configurator
    configurator.reconfigure(jvm.java.net.URI.create(LOG_CONFIG.as_uri()))


def _driver_address(master: str) -> str | None:
    """The address the driver binds to and advertises (`reach_master`, which checks that the
    cluster answers), or the SPARK_LOCAL_IP the user chose: Spark would advertise that address's
    host name instead ('localhost' for 127.0.0.1), which other hosts may not resolve."""
    address = reach_master(master)
    chosen = os.environ.get("SPARK_LOCAL_IP")
    return chosen if chosen not in (None, _local_ip_set_here) else address


def _user_configured_logging(conf: SparkConf) -> bool:
    """Whether the user of spark-submit chose Spark's logging: a log level
    (`spark.log.level`), a log4j configuration in the driver's JVM options, or a log4j2 file in
    Spark's configuration directory."""
    if conf.contains("spark.log.level"):
        return True
    if _LOG_OPTION in (conf.get("spark.driver.extraJavaOptions") or ""):
        return True
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    return conf_dir is not None and any(Path(conf_dir).glob("log4j2.*"))


def _started(conf: SparkConf, master: str, gateway: Any, *, quiet: bool) -> SparkContext:
    """The SparkContext of `conf`, ERROR-level logging when `quiet`, Ctrl-C as `interrupts`
    handles it; a SparkStartError when the JVM refuses to create it (a Kubernetes cluster that
    refuses the driver, say)."""
    try:
        context = SparkContext(conf=conf, gateway=gateway)
    except Py4JError as error:
        raise start_error(error, master) from error
    interrupts.install(context)
    if quiet:
        context.setLogLevel("ERROR")
    return context


def stop_context(context: SparkContext, *, end_jvm: bool = False) -> None:
    """Stops `context` as `SparkContext.stop` does, without the up to a second PySpark waits for
    its accumulator server to notice (the server's handler polls once a second): that server
    shuts down in a daemon thread of its own, which the process's exit may overtake.

    With `end_jvm`, the driver JVM this module launched exits too before this returns (unless
    it records the class archive): otherwise it outlives the process by about 0.3 s, holding
    the process's stdout, which a pipe or a caller capturing the output waits for. A context
    created later launches a new JVM.
    """
    server = getattr(context, "_accumulatorServer", None)
    context._accumulatorServer = None  # type: ignore[assignment]
    if end_jvm:
        _quiet_when_the_jvm_ends(server)
    context.stop()
    if server is not None:
        threading.Thread(target=server.shutdown, name="stop-accumulators", daemon=True).start()
    if end_jvm:
        _end_driver_jvm()


def _quiet_when_the_jvm_ends(server: Any) -> None:
    """Lets PySpark's accumulator `server` (None: the active context's) see the driver JVM's
    exit, which closes its connection, without printing a traceback of the EOFError."""
    if server is None:
        server = getattr(SparkContext._active_spark_context, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = _ignore_request_error


def _ignore_request_error(request: Any, client_address: Any) -> None:
    """A socketserver error handler that prints nothing."""


def _end_driver_jvm() -> None:
    """Ends the driver JVM of `_own_gateway` if it is still PySpark's: the gateway shuts down,
    EOF on the JVM's stdin tells it to exit, and its exit is awaited (`JVM_EXIT_TIMEOUT`)."""
    global _own_gateway
    gateway, _own_gateway = _own_gateway, None
    if SparkContext._gateway is not gateway or gateway is None:
        return
    SparkContext._gateway = None  # type: ignore[assignment]
    SparkContext._jvm = None  # type: ignore[assignment]
    gateway.shutdown()
    jvm = gateway.proc
    with contextlib.suppress(OSError):
        jvm.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        jvm.wait(timeout=JVM_EXIT_TIMEOUT)


def _launch_gateway(conf: SparkConf, master: str, *, quiet: bool) -> Any:
    """Launches the driver JVM with the class archive (`class_archive.prepare`), its stderr
    through a `JvmConsole`; a SparkStartError with the JVM's own reason when it exits first."""
    from pyspark.find_spark_home import _find_spark_home
    from pyspark.java_gateway import launch_gateway

    recording = class_archive.prepare(conf, Path(_find_spark_home()))
    console = JvmConsole(sys.stderr, quiet=quiet)
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": console.write_end})
    except BaseException as error:
        console.launched()
        if isinstance(error, PySparkRuntimeError) and error.getCondition() == "JAVA_GATEWAY_EXITED":
            why = console.failure()
            raise SparkStartError(f"Spark could not start on {master}: {why}") from error
        raise
    console.launched()
    global _own_gateway
    if recording is None:
        _own_gateway = gateway
    else:
        recording.finish_at_exit(gateway)
        atexit.register(_quiet_when_the_jvm_ends, None)  # before the recording ends the JVM
    return gateway


def ui_address(context: SparkContext) -> str | None:
    """The address of `context`'s web UI, None when it has none. Spark names the driver's host;
    the UI listens on SPARK_LOCAL_IP (every interface when unset), so that is the address given
    when set."""
    url = context.uiWebUrl
    if url is None:
        return None
    parts = urlsplit(url)
    host = os.environ.get("SPARK_LOCAL_IP") or parts.hostname
    return f"{parts.scheme}://{host}:{parts.port}"


def master_of(context: SparkContext) -> str:
    """The master URL of a started `context` (PySpark types it Optional: unset before start)."""
    master = context.master
    assert master is not None
    return master


def spark_context_of(spark: Any) -> SparkContext:
    """The SparkContext of a SparkSession or SparkContext; a new `create_context(spark)` for a
    master URL; for None the process's active context, else a new `create_context()` (on
    spark-submit's master under spark-submit, else local[*]).

    An engine-made context is a bare SparkContext: an RDD engine needs no SparkSession, which
    takes about twice as long to start (about 7 s against 4 on a 2-core machine).
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
