"""Operating jetspark (issue #44): `jetspark submit` says why spark-submit refused before any
Python ran; the commands take `--conf KEY=VALUE` for the Spark context they start; on a
cluster `new_job` refuses a snapshot store some executors do not see, before the job starts;
and a snapshot of an attempt that ended is not reported as waiting while the job restarts.

The cluster test hides the store from the executors the way test_tfidf_cluster_index.py hides
the index's directory: their Python runs in a mount namespace where an empty tmpfs covers it.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fake_members import WAIT_LOG, WaitClock, clock, snapshot_asked, two_members  # noqa: F401
from test_continuous_failures import _python_seeing_a_mount, needs_private_mounts
from test_spark_cluster import cluster  # noqa: F401 (the fixture: a cluster for this module)
from test_spark_submit import VENV_BIN

from jetspark.core import DirectorySnapshotStore
from jetspark.core.cli import main

JETSPARK = str(VENV_BIN / "jetspark")

# ------------------------------------------------------------------ jetspark submit's refusals


def _submit(arguments: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`jetspark submit ARGUMENTS app.py` without HADOOP_CONF_DIR and YARN_CONF_DIR."""
    app = tmp_path / "app.py"
    app.write_text('print("THE APP RAN")\n')
    unset = ("HADOOP_CONF_DIR", "YARN_CONF_DIR")
    environment = {key: value for key, value in os.environ.items() if key not in unset}
    return subprocess.run(
        [JETSPARK, "submit", *arguments, str(app)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


@pytest.mark.spark
@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (
            ["--master", "yarn"],
            "When running with master 'yarn' either HADOOP_CONF_DIR or YARN_CONF_DIR must be "
            "set in the environment.",
        ),
        (  # spark-submit refuses before it contacts the (absent) master
            ["--master", "spark://127.0.0.1:1", "--deploy-mode", "cluster"],
            "Cluster deploy mode is currently not supported for python applications on "
            "standalone clusters.",
        ),
    ],
    ids=["yarn-without-its-configuration", "cluster-deploy-mode-on-standalone"],
)
def test_submit_says_why_spark_refused_before_python_ran(
    arguments: list[str], reason: str, tmp_path: Path
) -> None:
    result = _submit(arguments, tmp_path)
    assert result.returncode != 0
    assert result.stderr.splitlines() == [f"jetspark submit: error: {reason}"], result.stderr
    assert result.stdout == ""


# ----------------------------------------------------------------------------------- --conf


@pytest.mark.parametrize("command", ["tfidf", "stopwords", "explain tfidf", "warm-up"])
def test_a_conf_without_an_equals_sign_is_a_usage_error_naming_it(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*command.split(), "--conf", "spark.app.name"])
    error = capsys.readouterr().err
    assert code == 2
    assert "argument --conf: expected KEY=VALUE, got 'spark.app.name'" in error, error


def test_conf_with_the_local_engine_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["stopwords", "--engine", "local", "--conf", "spark.app.name=x"])
    assert code == 2
    assert "--conf applies to --engine spark only" in capsys.readouterr().err


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_conf_settings_reach_the_context_the_command_starts(tmp_path: Path) -> None:
    """The context's default parallelism is the members' default: the command names it. Of two
    values of one key, the later wins, as with spark-submit."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("spark runs tasks")
    (docs / "b.txt").write_text("jet runs tasklets")
    result = subprocess.run(
        [
            JETSPARK,
            "stopwords",
            str(docs),
            "--engine",
            "spark",
            "--master",
            "local[2]",
            "--conf",
            "spark.default.parallelism=5",
            "--conf",
            "spark.default.parallelism=3",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "deriving stopwords on Spark local[2] (3 members)" in result.stderr, result.stderr
    assert result.stdout.split() == ["runs"]


# ------------------------------------------------------ the snapshot store probed at new_job

DRIVER = """
import sys

from jetspark.core import DAG, DirectorySnapshotStore, JobConfig, JobFailedError
from jetspark.core import ProcessingGuarantee, SnapshotError
from jetspark.core.spark import SparkEngine
from jetspark.edges import between
from jetspark.processors import read_list_p, write_file_transactional_p, write_list_p

master, store, *files = sys.argv[1:]
engine = SparkEngine(master, members=2)
engine.get_list("numbers").extend(range(10))
dag = DAG("probed")
numbers = dag.new_vertex("numbers", read_list_p("numbers"))
sink = write_file_transactional_p(files[0]) if files else write_list_p("out")
dag.edge(between(numbers, dag.new_vertex("sink", sink)))
config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
try:
    job = engine.new_job(dag, config, snapshot_store=DirectorySnapshotStore(store))
except (SnapshotError, JobFailedError) as error:
    print("REFUSED", error)
else:
    job.join(120)
    print("RAN", sorted(engine.get_list("out")))
engine.stop()
"""


def _drive(
    cluster: str,  # noqa: F811
    store: Path,
    tmp_path: Path,
    executors_python: str,
    *files: Path,
) -> str:
    """What DRIVER prints for a job with a snapshot store in `store` on `cluster` (and a
    transactional file sink into `files[0]`, if given)."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    environment = {
        **os.environ,
        "PYSPARK_PYTHON": executors_python,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    result = subprocess.run(
        [sys.executable, str(script), cluster, str(store), *map(str, files)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.cluster
@pytest.mark.timeout(300)
@needs_private_mounts
def test_a_store_the_executors_do_not_see_is_refused_at_new_job_naming_the_hosts(
    cluster: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    store = shared / "snapshots"
    hidden = _python_seeing_a_mount(tmp_path, shared, "rw")
    said = _drive(cluster, store, tmp_path, hidden)
    assert said.startswith(f"REFUSED the snapshot store '{store}' must be shared storage"), said
    assert f"on the cluster {cluster} the executors on {socket.gethostname()}" in said, said
    assert said.endswith(
        "do not see it (a directory the driver made there did not appear to "
        "them). The job was not started"
    ), said
    assert not [name for name in os.listdir(store) if name.startswith(".jetspark-shared-")]
    assert DirectorySnapshotStore(str(store)).latest() is None


@pytest.mark.cluster
@pytest.mark.timeout(300)
@needs_private_mounts
def test_a_sink_directory_the_executors_do_not_see_is_refused_naming_the_vertex(
    cluster: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    hidden = _python_seeing_a_mount(tmp_path, shared, "rw")
    said = _drive(cluster, tmp_path / "snapshots", tmp_path, hidden, shared / "out")
    assert said.startswith(
        f"REFUSED vertex 'sink' writes its files into '{shared / 'out'}', which must be shared"
    ), said
    assert f"the executors on {socket.gethostname()}" in said, said
    assert said.endswith("The job was not started"), said


@pytest.mark.cluster
@pytest.mark.timeout(300)
def test_a_store_every_executor_sees_passes_the_probe(
    cluster: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    said = _drive(cluster, tmp_path / "snapshots", tmp_path, sys.executable)
    assert said == f"RAN {list(range(10))}", said


# --------------------------------------------------- no stale wait log of an ended attempt


def _waits(caplog: pytest.LogCaptureFixture, snapshot_id: int) -> list[str]:
    pattern = re.compile(rf"snapshot {snapshot_id} has waited \d+ s")
    return [r.getMessage() for r in caplog.records if pattern.search(r.getMessage())]


def test_a_snapshot_of_an_attempt_whose_member_is_gone_is_not_reported_waiting(
    two_members: Any,  # noqa: F811
    clock: WaitClock,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While both members are connected the wait is logged; once they are gone (their stage
    failed: the run loop restarts the job, maybe waiting minutes for task slots) it is not,
    however long the snapshot has been under way."""
    the_coordinator, connect = two_members
    the_coordinator.begin_run("run1")
    members = [connect("run1", member, 1) for member in (0, 1)]
    snapshot_id = snapshot_asked(members[0])
    with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
        clock.now = WAIT_LOG
        deadline = time.monotonic() + 60
        while not _waits(caplog, snapshot_id):
            assert time.monotonic() < deadline, "the wait was never logged"
            time.sleep(0.01)
        assert "has waited 60 s on member 0; member 1" in _waits(caplog, snapshot_id)[0]
        for member in members:
            member.close()
        the_coordinator.settle()  # the run loop's wait for the members' end, after the failure
        logged = len(caplog.records)
        clock.now = 10 * WAIT_LOG
        clock.read_again(5)
        assert [r.getMessage() for r in caplog.records[logged:]] == []
