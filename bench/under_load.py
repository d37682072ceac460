"""The suite under load: runs pytest several times while CPU-bound processes keep the cores busy.

    python bench/under_load.py                      # the unit suite, 3 runs, 2 spinners
    python bench/under_load.py --runs 3 --spinners 2 --run-timeout 1200 -- -m "not cluster"

A test that passes only on an idle machine asserts what a number of seconds achieves; this
proves none does. It starts `--spinners` processes that spin a core each, runs
`python -m pytest -q -p no:randomly <pytest args>` `--runs` times in a row (each bounded by
`--run-timeout` seconds), stops the spinners (by their process ids, whatever happens), prints
one line per run and exits 0 only if every run passed. Everything after `--` goes to pytest
(default: `-m "not spark and not cluster"`, the unit suite).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PYTEST_ARGS = ("-m", "not spark and not cluster")
SPIN = (
    "import os\n"
    "parent = os.getppid()\n"
    "while os.getppid() == parent:\n"
    "    for _ in range(1_000_000):\n"
    "        pass\n"
)
"""What a spinner runs: one core at 100% until it is stopped, or until the process that started
it is gone (killed by a timeout, say): a spinner never outlives its run."""


@dataclass(frozen=True)
class RunResult:
    """One pytest run: its exit code (None: stopped at the timeout), seconds, summary line."""

    returncode: int | None
    seconds: float
    summary: str

    @property
    def passed(self) -> bool:
        return self.returncode == 0


def start_spinners(count: int) -> list[subprocess.Popen[bytes]]:
    """Starts `count` CPU-bound Python processes."""
    return [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]


def stop_spinners(spinners: Sequence[subprocess.Popen[bytes]]) -> None:
    """Stops each spinner by its process id: terminate, then kill if it lingers."""
    for spinner in spinners:
        spinner.terminate()
    for spinner in spinners:
        try:
            spinner.wait(timeout=5)
        except subprocess.TimeoutExpired:
            spinner.kill()
            spinner.wait(timeout=5)


def run_suite(pytest_args: Sequence[str], timeout: float) -> RunResult:
    """One `python -m pytest` run from the repository root, stopped after `timeout` seconds."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *pytest_args]
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return RunResult(None, time.monotonic() - started, f"stopped after {timeout:g} s")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    failures = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    summary = "; ".join([lines[-1] if lines else "(no output)", *failures[:10]])
    return RunResult(done.returncode, time.monotonic() - started, summary)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the suite `--runs` times under `--spinners` busy cores; 0 if every run passed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = list(DEFAULT_PYTEST_ARGS)
    if "--" in argv:
        split = argv.index("--")
        argv, pytest_args = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="pytest runs in a row (default 3)")
    parser.add_argument(
        "--spinners", type=int, default=2, help="CPU-bound processes to start (default 2)"
    )
    parser.add_argument(
        "--run-timeout",
        type=float,
        default=1200,
        metavar="SECONDS",
        help="stop a pytest run after this long and count it as failed (default 1200)",
    )
    args = parser.parse_args(argv)
    print(
        f"{args.runs} run(s) of pytest {' '.join(pytest_args)!s} with {args.spinners} "
        "CPU-bound process(es) spinning",
        flush=True,
    )
    spinners = start_spinners(args.spinners)
    results: list[RunResult] = []
    try:
        for run in range(1, args.runs + 1):
            result = run_suite(pytest_args, args.run_timeout)
            results.append(result)
            verdict = "passed" if result.passed else "FAILED"
            print(f"run {run}: {verdict} in {result.seconds:.0f} s: {result.summary}", flush=True)
    finally:
        stop_spinners(spinners)
    passed = sum(result.passed for result in results)
    print(f"{passed} of {args.runs} run(s) passed under load")
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
