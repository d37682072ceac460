"""The benchmarks cannot rot: `python -m bench --smoke` runs every row on tiny data, and
`python -m bench.soak` runs for a few seconds.

In subprocesses, since each starts its own SparkContext (one per process). Numbers are never
asserted; only that every row is there with finite numbers. The outputs are checked by the
benchmarks themselves before they report anything (the streaming and latency rows against a
plain count of the events, the soak too): a wrong output fails the run.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parent.parent
ROWS = {
    *("1a", "1b", "1c", "1d", "1e", "2", "2b", "2c", "2d", "2e", "2f", "3"),
    *("4a", "4b", "4c", "5a", "5b", "5c", "6a", "6b", "7a", "7b"),
    *("13a", "13c", "13d", "13e", "14a"),
    *(f"{shape}{letter}" for shape in ("15", "16") for letter in "abcdefgh"),
    "17",
    *("18a", "18b", "18c"),
    *("20a", "20b", "20c"),
    "21a",
    *("22a", "22b"),
}
OPTIONAL_ROWS = {"13b", "14b", "14c", "19a", "19b", "19c"}
"""Rows whose baseline needs the `bench` extra (pandas, pyarrow), or root (19a-c: network
namespaces)."""


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    """`python *args` run from the repository root, its output captured."""
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=840, check=False
    )


@pytest.mark.skipif(shutil.which("java") is None and "JAVA_HOME" not in os.environ, reason="Java")
def test_every_row_of_the_smoke_run_has_finite_numbers(tmp_path: Path) -> None:
    output = tmp_path / "smoke.json"
    run = _python("-m", "bench", "--smoke", "--json", str(output))
    assert run.returncode == 0, run.stderr[-4000:]
    document = json.loads(output.read_text(encoding="utf-8"))
    assert ROWS <= {row["number"] for row in document["rows"]} <= ROWS | OPTIONAL_ROWS
    for row in document["rows"]:
        left_out = row.get("left_out", {})  # a baseline's wrong output leaves its round out
        assert "CONTINUOUS" not in left_out, left_out
        for side in ("jetspark", "baseline", "ratio"):
            samples = row[side]["samples"]
            assert samples, (row["number"], side)
            assert left_out or all(math.isfinite(v) for v in samples), (row["number"], side)
    assert "| 1b |" in run.stdout  # the table was printed
    assert document["machine"]["java"] != "unknown"


@pytest.mark.skipif(shutil.which("java") is None and "JAVA_HOME" not in os.environ, reason="Java")
def test_the_soak_samples_every_series_and_checks_the_windows(tmp_path: Path) -> None:
    output = tmp_path / "soak.json"
    arguments = ("--minutes", "0.15", "--every", "1", "--rate", "2000", "--json", str(output))
    run = _python("-m", "bench.soak", *arguments)
    assert run.returncode == 0, run.stderr[-4000:]
    document = json.loads(output.read_text(encoding="utf-8"))
    assert document["windows_checked"] > 0
    assert len(document["samples"]) >= 5
    for sample in document["samples"]:
        assert sample["driver_jvm_rss_mb"] > 0 and sample["workers_fds"] > 0
        assert sample["worker_processes"] >= 2  # the Python daemon and a worker per member
    assert {trend["name"] for trend in document["trends"]} >= {"workers_rss_mb", "snapshot_dir_kb"}
    assert "| workers_rss_mb |" in run.stdout


def test_the_pytest_benchmark_suites_run() -> None:
    """bench/bench_*.py, each benchmark timed once."""
    suites = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "bench").glob("bench_*.py"))
    once = ("--benchmark-only", "--benchmark-min-rounds=1", "--benchmark-max-time=0")
    run = _python("-m", "pytest", "-q", "-p", "no:cacheprovider", *suites, *once)
    assert run.returncode == 0, run.stdout[-4000:]
