"""The stock-exchange example unbounded on SparkEngine, as a user runs it: exactly-once
micro-batches into the transactional file sink, then the same command at another member count
continues from the snapshot directory. Each run is a subprocess counting its duration in
trading time (`--clock trading`: trades read on the executors, 5 ms each), so what it reads
does not depend on the machine's speed; the output is checked window by window."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_stock_exchange_streaming import check_exact, committed

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "stock_exchange.py"


def run(out: Path, snapshots: Path, members: int, *extra: str) -> str:
    argv = [str(out), "--engine", "spark", "--members", str(members), "--duration", "300"]
    argv += ["--clock", "trading", "--snapshots", str(snapshots), *extra]
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), *argv],
        capture_output=True,
        text=True,
        timeout=800,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert result.returncode == 0, result.stderr[-4000:] + result.stdout[-2000:]
    return result.stdout


@pytest.mark.parametrize("source", ["journal", "files"])
def test_an_exactly_once_run_on_spark_continues_at_another_member_count(
    tmp_path: Path, source: str
) -> None:
    """From the journal, or from the trades a generator appends to a file while it runs (a
    run publishes its last batch's windows when the next one restores it)."""
    out, snapshots = tmp_path / "out", tmp_path / "snapshots"
    extra = ["--source", "files", str(tmp_path / "trades")] if source == "files" else []
    first_text = run(out, snapshots, 2, *extra)
    assert "the windows match a plain Python count" in first_text
    first = committed(out)
    first_end = max(w.end for w in check_exact(first))
    second_text = run(out, snapshots, 3, *extra)
    assert "continuing from snapshot" in second_text
    union = committed(out)
    assert max(w.end for w in check_exact(union)) > first_end
    for name, windows in first.items():  # what was committed stays as it was
        assert union[name] == windows
