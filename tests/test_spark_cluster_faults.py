"""Faults on the real standalone cluster (master + 2 workers on 127.0.0.1): an executor killed
while a job's last stage runs, and an exactly-once job cancelled and continued. Each driver is
a subprocess (tests/spark_cluster_child.py); assertions are on results, never on timing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import spark_cluster_child as child
from fault_tolerance_jobs import committed_lines
from test_spark_cluster import cluster  # noqa: F401 (the fixture: a cluster for this module)
from test_streaming_conformance import expected_window

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

CHILD = Path(__file__).with_name("spark_cluster_child.py")
KAFKA_CHILD = Path(__file__).with_name("kafka_cluster_child.py")


def run_child(master: str, work: Path, mode: str, n: int = 0) -> dict[str, Any]:
    return run_script(CHILD, master, str(work), mode, str(n))


def run_script(script: Path, *arguments: str) -> dict[str, Any]:
    """The JSON a driver script printed last, run to its end with `arguments`."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run(
        [sys.executable, str(script), *arguments],
        capture_output=True,
        text=True,
        timeout=800,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_an_executor_killed_in_the_last_stage_changes_nothing(cluster: str, tmp_path: Path) -> None:  # noqa: F811
    """The last stage reads a round-robin edge fed by a shuffle: a re-run that routed its input
    by arrival order would lose some items and duplicate others (SPARK-23207)."""
    output = run_child(cluster, tmp_path, "executor-kill")
    expected = Counter(n % child.KEYS for n in range(child.NUMBERS))
    assert dict(map(tuple, output["counts"])) == dict(expected)
    assert output["killed"], "no executor was running the last stage to be killed"


def test_an_unbounded_job_cancelled_and_continued_on_the_cluster(
    cluster: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Two runs of the endless sliding-window job, each cancelled after two batches: every
    window committed is exact and committed once."""
    for _run in range(2):
        output = run_child(cluster, tmp_path, "unbounded", 2)
        assert output["batches"] >= 2 and output["status"] == "CANCELLED"
    windows: Counter[tuple[int, int, str]] = Counter()
    for line in committed_lines(str(tmp_path / "out")):
        start, end, key, count = line.split()
        windows[(int(start), int(end), key)] += 1
        assert int(count) == expected_window(int(start), int(end), key), line
    assert windows and max(windows.values()) == 1


@pytest.mark.parametrize(
    ("kill", "reason"),
    [
        ("executor", r"ExecutorLostFailure \(executor \d+ exited [^;]*"),
        ("python-worker", r"Python worker exited unexpectedly \(crashed\)"),
    ],
)
def test_a_continuous_job_killed_mid_job_restarts_exactly_naming_the_lost_member(
    cluster: str,  # noqa: F811
    tmp_path: Path,
    kill: str,
    reason: str,
) -> None:
    """CONTINUOUS on the cluster (one member per worker): an executor JVM killed with SIGKILL,
    or a member's Python worker, after the first commit fails the barrier stage; the job
    restarts from its last snapshot by itself, the counts are exact, and the log names the
    lost member, its host, its executor and Spark's reason (issue #35)."""
    output = run_child(cluster, tmp_path, f"continuous-{kill}-kill")
    expected = Counter(n % child.KEYS for n in range(child.NUMBERS))
    assert output["killed"], f"no {kill} was killed"
    assert output["restarts"] >= 1
    assert dict(map(tuple, output["counts"])) == dict(expected)
    warnings = "\n".join(output["warnings"])
    assert re.search(
        rf"a member was lost: member [01] on host 127\.0\.0\.1, executor \d+ \({reason}\); "
        r"restart 1 of",
        warnings,
    ), warnings


@pytest.mark.kafka
def test_a_kafka_job_whose_executor_is_killed_writes_every_window_once(
    cluster: str,  # noqa: F811
    kafka_broker: Any,
    tmp_path: Path,
) -> None:
    """Kafka to Kafka, CONTINUOUS and exactly-once on the cluster (one member per worker): an
    executor JVM killed with SIGKILL after the first commit; the job restarts from its snapshot
    and the sink topic holds every window's count once (tests/kafka_cluster_child.py)."""
    output = run_script(KAFKA_CHILD, cluster, str(tmp_path), kafka_broker.bootstrap_servers)
    assert output["killed"], "no executor was running to be killed"
    assert output["restarts"] >= 1
    assert output["results"] == output["expected"]
