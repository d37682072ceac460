"""Driver processes for tests/test_netns_cluster.py, run on the namespace cluster's driver host
(tests/netns_cluster.py; no tests here).

`python netns_child.py MASTER WORK MODE` prints one JSON line:

- `batch`: the verdicts of spark_jobs.py's BATCH_JOBS;
- `micro_batch`, `continuous`: the exactly-once numbers-to-files job of
  spark_streaming_child.py (a distributed partitioned edge, transactional files in WORK/out,
  snapshots in WORK/snapshots) in that execution mode; prints what was published, the snapshots
  and the mode. Micro-batches read spark_streaming_child.NUMBERS numbers from a journal; the
  continuous job spark_cluster_child.NUMBERS from GatedNumbers, whose second half waits for a
  committed snapshot;
- `firewalled`: with every port of the driver and the executors configured
  (FIREWALLED_SETTINGS), the batch word count, then both streaming modes as above (in
  WORK/micro_batch and WORK/continuous);
- `worker-lost`: the continuous job as above, its source held until the test creates WORK/gate
  (after it stopped a worker for good), restarts waiting 5 s for slots
  (spark.jetspark.restart.slot.wait); prints the same and the rescales;
- `unshared-store`: the continuous job with its snapshots in /tmp/store, a directory every host
  has but none shares; prints how it ended (REFUSED: at `new_job`);
- `host-vanished`: as `worker-lost` with a heartbeat timeout of VANISHED_HEARTBEAT_TIMEOUT and the
  default slot wait (the test cuts worker-1 off the network, then kills it); prints the same,
  and when the restart began how many executors Spark still listed (the driver's and the
  lost one included while Spark has not noticed the loss), and the seconds from the moment the
  test wrote in WORK/vanished (CLOCK_MONOTONIC) to the first commit after the restart, after
  which it opens WORK/gate itself.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import spark_jobs
from spark_cluster_child import GatedNumbers
from spark_streaming_child import _published, two_stage_dag

from jetspark.core import (
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    JobFailedError,
    ProcessingGuarantee,
    SnapshotError,
)
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.continuous.settings import (
    COORDINATOR_PORT,
    HEARTBEAT_TIMEOUT,
    MEMBER_PORT,
    PORT_RETRIES,
    RESTART_SLOT_WAIT,
)
from jetspark.core.spark.session import create_context
from jetspark.core.suppliers import ProcessorMetaSupplier

VANISHED_HEARTBEAT_TIMEOUT = "10s"
"""The host-vanished mode's spark.jetspark.heartbeat.timeout."""
BATCH_JOBS = ("word_count", "tf_idf", "routing", "windowed_count")
"""Of spark_jobs.py's: the manual's two DAGs, items placed by the routing rules, watermarks."""
MEMBERS = 2
"""One member per worker."""
BATCH_ITEMS = 400
FIREWALLED_SETTINGS = {
    "spark.driver.port": "7100",
    "spark.driver.blockManager.port": "7101",
    COORDINATOR_PORT: "7102",
    "spark.blockManager.port": "7200",
    MEMBER_PORT: "7300",
    PORT_RETRIES: "4",
}
"""Every port a host listens on, for the firewall (spark.ui.enabled is off)."""
DRIVER_OPEN_PORTS = ("7100", "7101", "7102")
"""spark.driver.port, spark.driver.blockManager.port, spark.jetspark.coordinator.port."""
WORKER_OPEN_PORTS = ("7078", "7200:7204", "7300:7304")
"""The worker's own port (the master's messages), spark.blockManager.port (shuffles and
results) and spark.jetspark.member.port, each with its spark.port.maxRetries."""


def open_gate_after_a_commit(snapshots: str, gate: str) -> None:
    """Creates the file `gate` once a snapshot is committed in `snapshots`."""
    while not glob.glob(os.path.join(snapshots, "snapshot-*", "MANIFEST")):
        time.sleep(0.05)
    Path(gate).touch()


def stream(
    engine: SparkEngine, work: str, mode: ExecutionMode, snapshots: str, gate_opens: bool = True
) -> dict:
    """Runs the numbers-to-files job in `mode` to its end; what it published and counted.
    CONTINUOUS: the source's second half waits for the file WORK/gate, which this process
    creates after the first commit if `gate_opens`."""
    os.makedirs(work, exist_ok=True)
    gate = os.path.join(work, "gate")
    held = mode is ExecutionMode.CONTINUOUS  # a micro-batch commits after BATCH_ITEMS anyway
    if held and gate_opens:
        threading.Thread(
            target=open_gate_after_a_commit, args=(snapshots, gate), daemon=True
        ).start()
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=100,
        execution_mode=mode,
    )
    numbers = ProcessorMetaSupplier.of(lambda: GatedNumbers(gate)) if held else None
    out = os.path.join(work, "out")
    job = engine.new_job(
        two_stage_dag(out, _same, _same, numbers),
        config,
        snapshot_store=DirectorySnapshotStore(snapshots),
    )
    job.join(300)
    return {
        "published": sorted(int(line) for line in _published(out)),
        "snapshots": job.metrics.snapshot_count,
        "restarts": job.metrics.restarts,
        "rescales": job.metrics.rescales,
        "mode": job.metrics.execution_mode,
    }


def _same(item: Any) -> Any:
    return item


class RestartWitness(logging.Handler):
    """On the driver's log line of a restart: how many executors Spark lists at that moment;
    then, once the next snapshot commits, how long after WORK/vanished, and opens WORK/gate."""

    def __init__(self, context: Any, work: str) -> None:
        super().__init__(logging.WARNING)
        self.context = context
        self.work = work
        self.executors: int | None = None
        self.recovery: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.executors is None and "a member was lost" in record.getMessage():
            infos = self.context._jsc.sc().statusTracker().getExecutorInfos()
            self.executors = len(infos)
            committed = _commits(os.path.join(self.work, "snapshots"))
            threading.Thread(target=self._time_next_commit, args=(committed,), daemon=True).start()

    def _time_next_commit(self, committed: int) -> None:
        snapshots = os.path.join(self.work, "snapshots")
        while _commits(snapshots) <= committed:
            time.sleep(0.01)
        vanished = float(Path(self.work, "vanished").read_text())
        self.recovery = time.monotonic() - vanished
        Path(self.work, "gate").touch()


def _commits(snapshots: str) -> int:
    return len(glob.glob(os.path.join(snapshots, "snapshot-*", "MANIFEST")))


def unshared_store(engine: SparkEngine, work: str) -> dict:
    """The continuous job with its store in every host's own /tmp: how it ended, or that
    `new_job` refused it."""
    out = os.path.join(work, "out")
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=100,
        execution_mode=ExecutionMode.CONTINUOUS,
        max_restarts=1,
    )
    gate = os.path.join(work, "never")  # the job runs until the store's failure ends it
    numbers = ProcessorMetaSupplier.of(lambda: GatedNumbers(gate))
    try:
        job = engine.new_job(
            two_stage_dag(out, _same, _same, numbers),
            config,
            snapshot_store=DirectorySnapshotStore("/tmp/store"),
        )
    except SnapshotError as refused:  # the executors were asked before the job started
        return {"status": "REFUSED", "error": str(refused), "published": _published(out)}
    try:
        job.join(300)
    except JobFailedError as error:
        return {"status": job.status.name, "error": str(error), "published": _published(out)}
    return {"status": job.status.name, "error": None, "published": _published(out)}


def main(master: str, work: str, mode: str) -> None:
    settings = {"spark.executor.memory": "512m"}
    if mode == "firewalled":
        settings.update(FIREWALLED_SETTINGS)
    if mode == "worker-lost":
        settings[RESTART_SLOT_WAIT] = "5s"
    if mode == "host-vanished":
        settings[HEARTBEAT_TIMEOUT] = VANISHED_HEARTBEAT_TIMEOUT
    context = create_context(master, f"jetspark-netns-{mode}", settings=settings)
    engine = SparkEngine(context, members=MEMBERS, batch_items=BATCH_ITEMS)
    try:
        if mode == "batch":
            output: dict[str, Any] = {
                name: spark_jobs.run_job(name, engine, Path(work))[1] for name in BATCH_JOBS
            }
        elif mode == "firewalled":
            output = {"word_count": spark_jobs.run_job("word_count", engine, Path(work))[1]}
            for streaming in (ExecutionMode.MICRO_BATCH, ExecutionMode.CONTINUOUS):
                directory = os.path.join(work, streaming.value)
                output[streaming.value] = stream(
                    engine, directory, streaming, os.path.join(directory, "snapshots")
                )
        elif mode == "worker-lost":
            snapshots = os.path.join(work, "snapshots")
            output = stream(engine, work, ExecutionMode.CONTINUOUS, snapshots, gate_opens=False)
        elif mode == "host-vanished":
            witness = RestartWitness(context, work)
            logging.getLogger("jetspark.spark").addHandler(witness)
            snapshots = os.path.join(work, "snapshots")
            output = stream(engine, work, ExecutionMode.CONTINUOUS, snapshots, gate_opens=False)
            output.update(executors_at_restart=witness.executors, recovery=witness.recovery)
        elif mode == "unshared-store":
            output = unshared_store(engine, work)
        else:
            output = stream(engine, work, ExecutionMode(mode), os.path.join(work, "snapshots"))
    finally:
        context.stop()
    print(json.dumps(output))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
