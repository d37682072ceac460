"""A real Spark standalone cluster from the pip-installed pyspark (docs/deploy.md): a master and two
workers on 127.0.0.1, each worker with a different PYTHONHASHSEED, give LocalEngine's verdicts.

The jobs run in a subprocess (python tests/spark_jobs.py --master spark://...): one SparkContext
fits one process, and the test session's own context is a local one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest
from spark_jobs import SHARED_JOBS, expected, local_verdict, run_subprocess
from test_spark_user_code import assert_user_project_results
from user_project import run_driver, write_project

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

WORKER_HASH_SEEDS = ("11", "22")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _alive_workers(web_ui_port: int) -> int:
    """How many workers the master's /json/ lists as ALIVE (0 while it is not answering, or
    answers with an empty or partial page while its web UI starts)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_ui_port}/json/", timeout=2) as reply:
            state = json.load(reply)
    except (OSError, ValueError):  # ValueError: json.JSONDecodeError
        return 0
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stops the process group started with `process` (its executors and Python workers too)."""
    for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _start(
    log: Path, env: dict[str, str], daemon: str, arguments: list[str]
) -> subprocess.Popen[bytes]:
    """Starts `spark-class org.apache.spark.deploy.<daemon>` in a process group of its own."""
    spark_class = Path(env["SPARK_HOME"], "bin", "spark-class")
    with log.open("wb") as output:
        return subprocess.Popen(
            [str(spark_class), f"org.apache.spark.deploy.{daemon}", *arguments],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_for_workers(web_ui_port: int, processes: dict[Path, subprocess.Popen[bytes]]) -> None:
    """Returns once the master lists every worker as ALIVE, however long their JVMs take to
    start on a loaded machine (the test's timeout bounds it); fails with the logs if a process
    exits first."""
    while _alive_workers(web_ui_port) < len(WORKER_HASH_SEEDS):
        exited = [log.name for log, process in processes.items() if process.poll() is not None]
        if exited:
            tails = "\n".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for log in processes)
            pytest.fail(f"the cluster did not start (exited: {exited}):\n{tails}")
        time.sleep(0.5)


@contextlib.contextmanager
def standalone_cluster(home: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A running cluster, as `cluster` describes it: its master URL and its workers' processes
    (each the leader of its process group, its executors within: `_stop` stops one for good);
    every process stopped by PID however the block ends."""
    spark_home = str(Path(pyspark.__file__).resolve().parent)
    env = {**os.environ, "SPARK_HOME": spark_home, "SPARK_LOCAL_IP": "127.0.0.1"}
    port, web_ui_port = _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    master = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web_ui_port)]
    worker = [master_url, "--host", "127.0.0.1", "--cores", "1", "--memory", "1g"]
    processes: dict[Path, subprocess.Popen[bytes]] = {}
    try:
        processes[home / "master.log"] = _start(home / "master.log", env, "master.Master", master)
        workers = []
        for index, seed in enumerate(WORKER_HASH_SEEDS):
            log, work_dir = home / f"worker-{index}.log", home / f"worker-{index}"
            arguments = [*worker, "--webui-port", str(_free_port()), "--work-dir", str(work_dir)]
            processes[log] = _start(
                log, {**env, "PYTHONHASHSEED": seed}, "worker.Worker", arguments
            )
            workers.append(processes[log])
        _wait_for_workers(web_ui_port, processes)
        yield master_url, workers
    finally:
        for process in reversed(processes.values()):
            _stop(process)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The master URL of a running cluster: a master and two workers (1 core, 1 GB each) as in
    docs/deploy.md, each in its own process group, stopped by PID however the tests end.

    PySpark hands the executors' Python workers the driver's PYTHONHASHSEED, so the workers'
    own seeds reach only their JVMs; the jobs' driver sets PYTHONHASHSEED=random so that each
    executor's Python hashes strings differently (checked below).
    """
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as (master_url, _workers):
        yield master_url


@pytest.fixture(scope="module")
def cluster_output(cluster: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the jobs' subprocess printed after running every job on the cluster (3 members)."""
    return run_subprocess(
        cluster,
        3,
        SHARED_JOBS,
        tmp_path_factory.mktemp("cluster-jobs"),
        env={"PYTHONHASHSEED": "random"},
    )


@pytest.mark.parametrize("name", SHARED_JOBS)
def test_the_cluster_gives_local_engines_verdict(name: str, cluster_output: dict[str, Any]) -> None:
    assert cluster_output["verdicts"][name] == local_verdict(name) == expected(name)


def test_each_executor_hashed_strings_its_own_way(cluster_output: dict[str, Any]) -> None:
    """Python's hash() differed between the two workers' processes, so the identical verdicts
    above owe nothing to a shared hash seed."""
    assert cluster_output["hash_seeds"] == len(WORKER_HASH_SEEDS)


def test_a_users_project_runs_on_the_cluster(cluster: str, tmp_path: Path) -> None:
    """The user project of test_spark_user_code, on the cluster: its modules reach executors
    that never saw the driver's folders, and the failures read as on local[2]."""
    assert_user_project_results(run_driver(write_project(tmp_path), cluster))
