"""A test run killed with SIGTERM or SIGINT stops the process groups its fixtures started (as
the cluster tests start the standalone master and workers), instead of leaving them behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

CHILD_TEST = """
import os, subprocess, time
from pathlib import Path
import pytest

@pytest.fixture(scope="module")
def group():
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        yield process
    finally:
        os.killpg(process.pid, 9)
        process.wait()

def test_runs_until_killed(group):
    Path(os.environ["GROUP_FILE"]).write_text(str(group.pid))
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_killed_run_stops_the_process_groups_it_started(tmp_path: Path, signum: int) -> None:
    (tmp_path / "conftest.py").write_text(  # the run's configuration, as tests/conftest.py's
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
        "from cleanup import end_runs_by_signal_with_teardown\n\n"
        "def pytest_configure(config):\n    end_runs_by_signal_with_teardown()\n"
    )
    (tmp_path / "test_child.py").write_text(CHILD_TEST)
    group_file = tmp_path / "group"
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "GROUP_FILE": str(group_file)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120  # bounds a hang only
    while not group_file.exists():
        assert run.poll() is None, run.communicate()[0]
        assert time.monotonic() < deadline, "the child test never started"
        time.sleep(0.05)
    pid = int(group_file.read_text())
    assert _alive(pid)
    run.send_signal(signum)
    output, _ = run.communicate(timeout=120)
    assert run.returncode != 0, output
    assert not _alive(pid), f"the fixture's process {pid} outlived the run:\n{output}"
