"""A Spark standalone cluster on this machine for trying jetspark on a cluster (`jetspark
cluster`): Spark's own Master and Workers from the pip-installed pyspark, all bound to 127.0.0.1.

Each daemon is `$SPARK_HOME/bin/spark-class org.apache.spark.deploy.<daemon>` in a process group
of its own (its executors and their Python workers join it), logging to a file in the work
directory; the cluster is up once the master's `/json/` page lists every worker as ALIVE, and
stopping it ends each process group by its id (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from jetspark.core.spark.session import LOOPBACK

READY_TIMEOUT = 120.0
"""Seconds the daemons get to start and register (about 12 s on an idle 2-core machine)."""
STOP_GRACE = 15.0
"""Seconds a daemon gets to exit after SIGTERM before SIGKILL."""


class ClusterError(RuntimeError):
    """The cluster could not be started: a port in use, or a daemon that exited (with the end
    of its log)."""


def spark_home() -> Path:
    """The Spark installation of the pip-installed pyspark (its package directory)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def _check_free(port: int, what: str, option: str) -> None:
    with socket.socket() as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError as error:
            raise ClusterError(
                f"cannot start the {what} on {LOOPBACK}:{port} ({error.strerror}): choose "
                f"another port with {option} (0: any free port)"
            ) from error


class StandaloneCluster:
    """A master and `workers` workers (`cores` cores and `memory` each) on 127.0.0.1, started by
    `start()` and stopped by `stop()` (or the `with` block's end). Port 0: any free port.

    `work_dir` holds the daemons' logs and the workers' directories (their executors' output);
    without one a temporary directory is used and removed at `stop()`.
    """

    def __init__(
        self,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        port: int = 7077,
        web_ui_port: int = 8080,
        work_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = port or free_port()
        self.web_ui_port = web_ui_port or free_port()
        self._own_work_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="jetspark-cluster-")).resolve()
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    @property
    def web_ui_url(self) -> str:
        return f"http://{LOOPBACK}:{self.web_ui_port}"

    def start(self, timeout: float = READY_TIMEOUT) -> None:
        """Starts the master, then the workers; returns once every worker is ALIVE. Raises
        ClusterError (after stopping what it started) if a port is taken, a daemon exits or
        `timeout` seconds pass first."""
        _check_free(self.port, "Spark master", "--port")
        _check_free(self.web_ui_port, "master's web UI", "--webui-port")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            ports = ["--port", str(self.port), "--webui-port", str(self.web_ui_port)]
            self._launch("master", "master.Master", ["--host", LOOPBACK, *ports])
            for index in range(self.workers):
                resources = ["--cores", str(self.cores), "--memory", self.memory]
                web_ui = ["--webui-port", str(free_port())]
                work_dir = ["--work-dir", str(self.work_dir / f"worker-{index}")]
                arguments = [self.master_url, "--host", LOOPBACK, *resources, *web_ui, *work_dir]
                self._launch(f"worker-{index}", "worker.Worker", arguments)
            self._wait_for_workers(timeout)
        except BaseException:
            self.stop()
            raise

    def state(self) -> dict[str, Any]:
        """The master's `/json/` page (workers, applications), or {} while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.web_ui_url}/json/", timeout=2) as reply:
                return dict(json.load(reply))
        except (OSError, ValueError):  # not up yet, or a partial page while its UI starts
            return {}

    def alive_workers(self) -> int:
        """How many workers the master lists as ALIVE."""
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def exited(self) -> list[str]:
        """The daemons that are no longer running."""
        return [name for name, process in self._processes.items() if process.poll() is not None]

    def log_tail(self, name: str, characters: int = 2000) -> str:
        """The end of daemon `name`'s log."""
        path = self.work_dir / f"{name}.log"
        return path.read_text(errors="replace")[-characters:] if path.exists() else ""

    def stop(self) -> None:
        """Stops the workers, then the master (each process group by its id); removes a
        temporary work directory."""
        for name in reversed(list(self._processes)):
            _stop_group(self._processes.pop(name))
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def _launch(self, name: str, daemon: str, arguments: list[str]) -> None:
        home = spark_home()
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": LOOPBACK}
        command = [str(home / "bin" / "spark-class"), f"org.apache.spark.deploy.{daemon}"]
        with (self.work_dir / f"{name}.log").open("wb") as log:
            self._processes[name] = subprocess.Popen(
                [*command, *arguments],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _wait_for_workers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_workers() < self.workers:
            exited = self.exited()
            if exited or time.monotonic() > deadline:
                why = f"{', '.join(exited)} exited" if exited else f"not ready in {timeout:g} s"
                tails = "\n".join(
                    f"--- {name}.log\n{self.log_tail(name)}" for name in exited or self._processes
                )
                raise ClusterError(f"the cluster did not start ({why}):\n{tails}")
            time.sleep(0.5)

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Ends the process group `process` leads: SIGTERM, then SIGKILL after STOP_GRACE s."""
    for sig, grace in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
            break
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=1)
