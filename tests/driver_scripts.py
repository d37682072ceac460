"""Running a test's driver script as a user runs one: a Python process of its own, its workers
on this Python, Spark bound to 127.0.0.1, from the tests' folder (no tests here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_driver_script(script: Path, *arguments: str, timeout: float = 500) -> str:
    """The last line `script` printed; AssertionError with the end of its stderr when it
    failed."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run(
        [sys.executable, str(script), *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=script.parent,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.strip().splitlines()[-1]
