"""A driver process for rows 19a-b (bench/recovery_rows.py): `python recovery_child.py MASTER
WORK` runs, on a SparkContext of its own, a continuous exactly-once job of the tests (numbers
across a distributed partitioned edge into transactional files in WORK/out, tests/
spark_streaming_child.py, from tests/spark_cluster_child.py's source that holds its second half
until told; 2 members, a snapshot every SNAPSHOT_MILLIS) and prints one JSON line:

- `first_commit`: seconds from `new_job` to the first committed snapshot;
- `recovery`: seconds from the SIGKILL of a member's process, once that snapshot is committed,
  to the first snapshot committed after the job restarted: on a `spark://` master the member's
  executor JVM, on a local master (where the executor is this driver's JVM) its Python worker;
- `exact`: whether every number was published once when the source was let go and the job
  completed, and `restarts`.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import spark_cluster_child as cluster_jobs
from spark_streaming_child import _published, two_stage_dag

from jetspark.core import (
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.session import create_context
from jetspark.core.suppliers import ProcessorMetaSupplier

SNAPSHOT_MILLIS = 100
POLL_SECONDS = 0.01
TIMEOUT = 300.0


class NumbersNamingTheirProcess(cluster_jobs.GatedNumbers):
    """GatedNumbers that leaves its process id in the directory `pids` when it starts."""

    def __init__(self, gate: str, pids: str) -> None:
        super().__init__(gate)
        self.pids = pids

    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, context)
        Path(self.pids, str(os.getpid())).touch()


def _committed(snapshots: str) -> list[int]:
    manifests = glob.glob(os.path.join(snapshots, "snapshot-*", "MANIFEST"))
    return sorted(int(Path(path).parent.name.removeprefix("snapshot-")) for path in manifests)


def _until(condition: Any, job: Any) -> float:
    """Waits for `condition()`; the moment it held. Fails if the job ends first."""
    deadline = time.perf_counter() + TIMEOUT
    while not condition():
        if job.status.is_terminal or time.perf_counter() > deadline:
            raise SystemExit(f"the job stopped waiting ({job.status.name})")
        time.sleep(POLL_SECONDS)
    return time.perf_counter()


def _same(item: Any) -> Any:
    return item


def main(master: str, work: str) -> None:
    context = create_context(master, "jetspark-bench-recovery")
    engine = SparkEngine(context, members=2)
    gate, pids, snapshots, out = (
        os.path.join(work, name) for name in ("gate", "pids", "snapshots", "out")
    )
    os.makedirs(pids)
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=SNAPSHOT_MILLIS,
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    source = ProcessorMetaSupplier.of(lambda: NumbersNamingTheirProcess(gate, pids))
    started = time.perf_counter()
    dag = two_stage_dag(out, _same, _same, source)
    job = engine.new_job(dag, config, snapshot_store=DirectorySnapshotStore(snapshots))
    first = _until(lambda: bool(_committed(snapshots)), job)
    if master.startswith("spark://"):
        victim = cluster_jobs._executor_pids(context)[0]
    else:
        victim = int(sorted(os.listdir(pids))[0])
    os.kill(victim, signal.SIGKILL)
    killed = time.perf_counter()
    _until(lambda: job.metrics.restarts >= 1, job)
    after_restart = _committed(snapshots)[-1]
    again = _until(lambda: _committed(snapshots)[-1] > after_restart, job)
    Path(gate).touch()
    job.join(TIMEOUT)
    output = {
        "first_commit": first - started,
        "recovery": again - killed,
        "restarts": job.metrics.restarts,
        "exact": sorted(map(int, _published(out))) == list(range(cluster_jobs.NUMBERS)),
    }
    context.stop()
    print(json.dumps(output))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
