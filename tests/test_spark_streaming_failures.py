"""Jobs with a guarantee survive failures: a task failing in every stage of a micro-batch, a
driver killed with SIGKILL anywhere in a micro-batch or a continuous run, then run again. Each
run is a driver subprocess (tests/spark_streaming_child.py) with its own SparkContext; every
assertion is on the committed files, never on timing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import spark_streaming_child as child
from fault_tolerance_jobs import committed_lines
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

CHILD = Path(__file__).with_name("spark_streaming_child.py")
EXPECTED = sorted(str(n) for n in range(child.NUMBERS))


def run_child(
    work: Path, mode: str, n: int, delay_ms: int = 0, execution: str = "micro_batch"
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run(
        [sys.executable, str(CHILD), str(work), mode, str(n), str(delay_ms), execution],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )


def test_a_task_failing_once_in_every_stage_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    result = run_child(tmp_path, "retry", 40)
    assert result.returncode == 0, result.stderr[-3000:]
    assert committed_lines(str(tmp_path / "out")) == EXPECTED


@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(batches=st.integers(1, 4), delay_ms=st.integers(0, 400))
def test_a_driver_killed_anywhere_in_a_batch_then_run_again_commits_every_line_once(
    tmp_path_factory: pytest.TempPathFactory, batches: int, delay_ms: int
) -> None:
    work = tmp_path_factory.mktemp("killed")
    killed = run_child(work, "kill", batches, delay_ms)
    assert killed.returncode == -9, killed.stderr[-3000:]
    finished = run_child(work, "finish", 0)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert committed_lines(str(work / "out")) == EXPECTED


@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(snapshots=st.integers(1, 4), delay_ms=st.integers(0, 400))
def test_a_continuous_driver_killed_anywhere_then_run_again_commits_every_line_once(
    tmp_path_factory: pytest.TempPathFactory, snapshots: int, delay_ms: int
) -> None:
    """The kill falls after `snapshots` commits of the run plus `delay_ms`: between snapshots,
    during one, or between a commit and its publication; the second run continues from the
    last committed snapshot."""
    work = tmp_path_factory.mktemp("killed-continuous")
    killed = run_child(work, "kill", snapshots, delay_ms, "continuous")
    assert killed.returncode == -9, killed.stderr[-3000:]
    finished = run_child(work, "finish", 0, 0, "continuous")
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert committed_lines(str(work / "out")) == EXPECTED


def published_stream_lines(work: Path) -> list[str]:
    return [line for line in committed_lines(str(work / "out")) if line != "SENTINEL"]


@pytest.mark.parametrize("batches", [1, 3])
def test_a_spark_stream_whose_driver_is_killed_between_batches_commits_every_line_once(
    tmp_path: Path, batches: int
) -> None:
    """read_stream_p over files landing in a directory: Spark replays the batches its commit
    log lacks, jetspark skips those it committed and restores the others' starting state."""
    killed = run_child(tmp_path, "stream-kill", batches, 50)
    assert killed.returncode == -9, killed.stderr[-3000:]
    finished = run_child(tmp_path, "stream-finish", 0)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert published_stream_lines(tmp_path) == sorted(child.stream_lines())
