"""A worker stopped for good under a continuous job (issue #32): on the standalone cluster
(master + 2 workers of 1 core on 127.0.0.1), the job restarts on the one member the cluster
still has a slot for, its snapshot rescaled, and its counts are exact. The driver is a
subprocess (spark_cluster_lost_worker_child.py); the worker is stopped once a snapshot is
committed, and the source holds back half its numbers until then, so the order of events does
not depend on the machine's speed."""

from __future__ import annotations

import glob
import json
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import spark_cluster_child as child
from driver_scripts import run_driver_script
from test_spark_cluster import _stop, standalone_cluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

CHILD = Path(__file__).with_name("spark_cluster_lost_worker_child.py")


@pytest.fixture(scope="module")
def cluster_and_workers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A cluster of this module's own: its test stops one of the workers for good."""
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


def _stop_after_a_commit(snapshots: Path, worker: subprocess.Popen[bytes], gate: Path) -> None:
    """Stops `worker` (and its executor) once a snapshot is committed, then opens the gate."""
    while not glob.glob(str(snapshots / "snapshot-*" / "MANIFEST")):
        time.sleep(0.05)
    _stop(worker)
    gate.touch()


def test_a_worker_stopped_for_good_leaves_the_job_running_exactly_on_one_member(
    cluster_and_workers: tuple[str, list[subprocess.Popen[bytes]]], tmp_path: Path
) -> None:
    master, workers = cluster_and_workers
    stopper = threading.Thread(
        target=_stop_after_a_commit,
        args=(tmp_path / "snapshots", workers[1], tmp_path / "gate"),
        daemon=True,
    )
    stopper.start()
    output = json.loads(run_driver_script(CHILD, master, str(tmp_path), timeout=800))
    assert workers[1].poll() is not None, "the worker was not stopped"
    expected = Counter(n % child.KEYS for n in range(child.NUMBERS))
    assert dict(map(tuple, output["counts"])) == dict(expected)
    # Usually the restart finds one free slot and rescales. When it counts the slots before the
    # master has dropped the stopped worker, it restarts on both members instead (seen once, in
    # CI): the counts are exact either way, and the rescale line is checked when it rescaled.
    assert output["rescales"] in (0, 1) and output["restarts"] >= 1, output
    warnings = "\n".join(output["warnings"])
    assert re.search(
        r"a member was lost: member [01] on host 127\.0\.0\.1, executor \d+ \(.+\); restart 1 of "
        r"at most \d+, from snapshot \d+",
        warnings,
    ), warnings
    assert output["rescales"] == 0 or re.search(
        r"rescaled to 1 members \(was 2\): spark://\S+ has 1 free task slots after waiting 3 s "
        r"\(spark\.jetspark\.restart\.slot\.wait\); restarting from snapshot \d+",
        warnings,
    ), warnings
