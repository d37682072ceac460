"""jetspark on a real standalone cluster as docs/deploy.md tells a user to run it: `jetspark
cluster` starts Spark's own master and two workers on 127.0.0.1; an application using
`SparkEngine()` is submitted to it with spark-submit and shows in the master's completed
applications; a packed virtualenv (venv-pack, `--archives env.tar.gz#env`,
`spark.pyspark.python=./env/bin/python`) brings jetspark's dependencies to workers whose Python
has none of them; and the command stops every daemon it started when told to.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_spark_submit import VENV_BIN, submit_project

from jetspark.core.spark.failures import jetspark_dependencies

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

READY_TIMEOUT = 300.0
"""Seconds `jetspark cluster` gets to say it is up (a guard against a hang, not a speed check)."""


FREE_PORTS = ("--port", "0", "--webui-port", "0")
PYTHON_VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"


class ClusterCommand:
    """`jetspark cluster` running in a process (group) of its own: what it printed, its master
    and web UI, and its work directory."""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.process = subprocess.Popen(
            [str(VENV_BIN / "jetspark"), "cluster", *FREE_PORTS, "--work-dir", str(work_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.printed = self._until("Ctrl-C stops the cluster")
        self.master = self.printed["master"]
        self.web_ui = self.printed["web UI"]

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _until(self, last: str) -> dict[str, str]:
        """The `name: value` lines printed up to the line `last`."""
        printed: dict[str, str] = {}
        deadline = time.monotonic() + READY_TIMEOUT
        while (line := self.lines.get(timeout=max(deadline - time.monotonic(), 0))) != last:
            if line is None:
                assert self.process.stderr is not None
                pytest.fail(f"jetspark cluster exited:\n{self.process.stderr.read()[-4000:]}")
            name, _, value = line.partition(":")
            printed[name.strip()] = value.strip()
        return printed

    def state(self) -> dict[str, Any]:
        """The master's /json/ page."""
        with urllib.request.urlopen(f"{self.web_ui}/json/", timeout=10) as reply:
            return dict(json.load(reply))

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; its exit code."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterCommand]:
    command = ClusterCommand(tmp_path_factory.mktemp("cluster-work"))
    try:
        yield command
    finally:
        if command.process.poll() is None:
            command.stop()


def test_the_cluster_command_says_where_its_master_is(cluster: ClusterCommand) -> None:
    assert cluster.master.startswith("spark://127.0.0.1:")
    assert cluster.web_ui.startswith("http://127.0.0.1:")
    assert cluster.printed["submit"] == f"spark-submit --master {cluster.master} APP.py"
    state = cluster.state()
    assert state["url"] == cluster.master
    assert [w["state"] for w in state["workers"]] == ["ALIVE", "ALIVE"]


def test_a_submitted_script_runs_on_the_standalone_master(
    cluster: ClusterCommand, tmp_path: Path
) -> None:
    result = submit_project(tmp_path, cluster.master, "--name", "letters-on-the-cluster")
    assert result["master"] == cluster.master
    completed = {app["name"]: app["state"] for app in cluster.state()["completedapps"]}
    assert completed["letters-on-the-cluster"] == "FINISHED"


def _environment_with_jetsparks_dependencies(target: Path) -> None:
    """A virtualenv (from this Python's base interpreter) holding jetspark's worker-side
    dependencies, their files copied from this environment as pip installed them."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    site_packages = target / "lib" / PYTHON_VERSION / "site-packages"
    for name in sorted(jetspark_dependencies()):
        distribution = importlib.metadata.distribution(name)
        for file in distribution.files or []:
            source = Path(str(distribution.locate_file(file)))
            if source.is_file() and "__pycache__" not in source.parts:
                destination = site_packages / file
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, destination)


def test_a_packed_environment_brings_the_dependencies_to_the_workers(
    cluster: ClusterCommand, tmp_path: Path
) -> None:
    base_python = Path(sys.base_prefix) / "bin" / PYTHON_VERSION
    bare = subprocess.run([str(base_python), "-c", "import mmh3, msgpack"], capture_output=True)
    assert bare.returncode != 0, f"{base_python} has jetspark's dependencies: nothing to ship"
    _environment_with_jetsparks_dependencies(tmp_path / "env")
    archive = tmp_path / "env.tar.gz"
    packed = subprocess.run(
        [str(VENV_BIN / "venv-pack"), "-p", str(tmp_path / "env"), "-o", str(archive), "-q"],
        capture_output=True,
        text=True,
    )
    assert packed.returncode == 0, packed.stderr
    result = submit_project(
        tmp_path / "project",
        cluster.master,
        *("--archives", f"{archive}#env", "--conf", "spark.pyspark.python=./env/bin/python"),
        *("--conf", f"spark.pyspark.driver.python={VENV_BIN / 'python3'}"),
    )
    assert result["worker_pythons"]
    for python in result["worker_pythons"]:  # each executor's, in its work directory
        assert python.endswith("/env/bin/python")
        assert Path(python).is_relative_to(cluster.work_dir)


def test_the_cluster_command_stops_every_daemon_it_started(cluster: ClusterCommand) -> None:
    port = cluster.master.rpartition(":")[2]
    assert cluster.stop() == 0
    left = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(cluster.work_dir) in command or f"--port {port} " in command:
            left.append(command)
    assert left == []
