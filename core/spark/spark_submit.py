"""`jetspark submit`: spark-submit with jetspark's quiet console from the JVM's first line on.

Under a bare spark-submit the driver JVM starts, with Spark's logging, before any Python runs:
it prints the JDK's "Using incubator modules" warning (the JDK prints it for every JVM that
loads an incubator module, and Spark's launcher always adds jdk.incubator.vector; no JVM option
turns it off), Spark's "default log4j profile" line and, on a machine whose host name resolves
to a loopback address, the warning that another address is used instead. `jetspark submit`
runs the same spark-submit with jetspark's log configuration in `SPARK_SUBMIT_OPTS` (the
user's `--driver-java-options` still win), `SPARK_LOCAL_IP=127.0.0.1` for a `local` master
unless set (the driver is bound to 127.0.0.1 there anyway) and the JVM's stderr through a
quiet `JvmConsole`; verbose (`jetspark --verbose submit`), it adds `--conf
spark.log.level=INFO`, which a submitted script's context takes for the user's choice of
Spark's log (`session.create_context`). When spark-submit refuses before any Python runs (a
YARN master without `HADOOP_CONF_DIR`, cluster deploy mode on a standalone master), the quiet
console hides the exception the JVM's main thread died of with its stack: its message is said
instead, in one line on stderr (`jetspark submit: error: ...`), and the exit code is not 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from jetspark.core.spark.driver_jvm import JvmConsole
from jetspark.core.spark.session import LOG_CONFIG, LOOPBACK


def submit_environment(
    arguments: Sequence[str], environment: Mapping[str, str], *, verbose: bool
) -> dict[str, str]:
    """The environment spark-submit runs with for `arguments` (spark-submit's own): Spark found
    in this Python's pyspark, the driver run by this Python unless a Python was chosen,
    `SPARK_LOCAL_IP` for a local master and (unless `verbose`) jetspark's log configuration."""
    from pyspark.find_spark_home import _find_spark_home

    submitted = dict(environment)
    submitted.setdefault("SPARK_HOME", _find_spark_home())
    if "PYSPARK_DRIVER_PYTHON" not in submitted and "PYSPARK_PYTHON" not in submitted:
        submitted["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if (master_argument(arguments) or "").startswith("local"):
        submitted.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    if not verbose:
        logging_option = f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}"
        submitted["SPARK_SUBMIT_OPTS"] = " ".join(
            filter(None, [logging_option, environment.get("SPARK_SUBMIT_OPTS")])
        )
    return submitted


def master_argument(arguments: Sequence[str]) -> str | None:
    """The `--master` among spark-submit's `arguments` (its options come before the
    application, each but a few flags with a value), else None."""
    options = iter(arguments)
    for argument in options:
        if not argument.startswith("-"):
            return None  # the application: what follows is its own
        if argument.startswith("--master="):
            return argument.removeprefix("--master=")
        if "=" in argument or argument in _FLAGS:
            continue
        value = next(options, None)
        if argument == "--master":
            return value
    return None


_FLAGS = frozenset({"--verbose", "-v", "--supervise", "--help", "-h", "--version"})
"""spark-submit's options that take no value."""


def run_spark_submit(arguments: Sequence[str], *, verbose: bool = False) -> int:
    """Runs spark-submit with `arguments` as `jetspark submit` does (see the module); returns
    its exit code. Ctrl-C reaches spark-submit from the terminal; this waits for its end."""
    environment = submit_environment(arguments, os.environ, verbose=verbose)
    command = [str(Path(environment["SPARK_HOME"]) / "bin" / "spark-submit")]
    if verbose:  # Spark's log in the driver too (the user's own --conf comes later and wins)
        command += ["--conf", "spark.log.level=INFO", *arguments]
        return _waited(subprocess.Popen(command, env=environment))
    command += arguments
    console = JvmConsole(sys.stderr, quiet=True)
    try:
        process = subprocess.Popen(command, env=environment, stderr=console.write_end)
    finally:
        console.launched()
    code = _waited(process)
    refusal = console.died_of()  # waits for the end of its stderr
    if refusal is None:
        return code
    print(f"jetspark submit: error: {refusal}", file=sys.stderr, flush=True)
    return code or 1


def _waited(process: subprocess.Popen[bytes]) -> int:
    """The exit code of `process`, waited for through Ctrl-C (the terminal sent it there too)."""
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            continue
