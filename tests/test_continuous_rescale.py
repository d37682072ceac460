"""A continuous job cancelled and continued at 2, then 3, then 1 members (issue #24's rescale):
in a driver process of its own on local[3], since every member needs a task slot at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

CHILD = Path(__file__).with_name("continuous_rescale_child.py")


def test_a_continuous_job_continues_at_three_members_then_at_one(tmp_path: Path) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run(
        [sys.executable, str(CHILD), str(tmp_path / "snapshots")],
        capture_output=True,
        text=True,
        timeout=500,
        env=env,
        cwd=CHILD.parent,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.splitlines()[-1] == "exact"
