"""Driver processes for the fault tests on the standalone cluster (no tests here).

`python spark_cluster_child.py MASTER WORK MODE` prints one JSON line:

- `executor-kill`: a batch job of four stages (a round-robin distributed edge fed by a
  shuffle, then a partitioned count) whose last stage waits for a gate (a file); once that
  stage runs tasks, this driver kills one of its executors' JVMs with SIGKILL, then opens the
  gate, so the kill falls in the last stage however fast or slow the machine. Spark re-runs
  the lost map outputs and tasks; prints the counts and whether an executor was killed.
- `continuous-executor-kill`, `continuous-python-worker-kill`: the same DAG, CONTINUOUS on 2
  members, exactly-once, its source gated half-way; once a snapshot is committed, one of the
  application's executors is killed, or a Python worker of the job kills itself at its next
  item, and the gate opens; prints the counts, the restarts and the `jetspark.spark` warnings.
- `unbounded N`: the unbounded sliding-window job of test_streaming_conformance.py (an endless
  journal, exactly-once into transactional files in WORK/out), continuing from the snapshots in
  WORK/snapshots, cancelled once N batches of this run are committed; prints the batches run.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from fault_tolerance_jobs import SignalOnce
from pyspark import SparkContext
from test_streaming_conformance import unbounded_windows_dag

from jetspark.core import DAG, DirectorySnapshotStore, ExecutionMode, JobCancelledError, JobConfig
from jetspark.core import ProcessingGuarantee as Guarantee
from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.session import create_context
from jetspark.core.suppliers import ProcessorMetaSupplier
from jetspark.edges import between
from jetspark.processors import aggregate_by_key_p, generate_p, map_p, write_map_p
from jetspark.processors.aggregate import counting

NUMBERS = 6000
KEYS = 50


def _key(n: int) -> int:
    return n % KEYS


def _slowly(n: int) -> int:
    time.sleep(0.002)
    return n


def _once_open(gate: str, n: int) -> int:
    """`n`, once the file `gate` exists."""
    while not os.path.exists(gate):
        time.sleep(0.01)
    return n


def four_stage_dag(
    numbers_source: Any = None, last_stage_fn: Any = _slowly, spreading: Any = None
) -> DAG:
    """numbers -(partitioned)-> spread -(round robin)-> tag -(partitioned by key)-> slow ->
    count -> sink: the last stage (slow, count, sink) reads what the round-robin edge, fed by a
    shuffle, routed. `numbers_source`: the numbers' supplier (default `generate_p(NUMBERS)`);
    `last_stage_fn`: what `slow` maps each number with; `spreading`: what `spread` maps each
    number with (default: nothing)."""
    dag = DAG("executor-kill")
    numbers = dag.new_vertex("numbers", numbers_source or generate_p(NUMBERS))
    spread = dag.new_vertex("spread", map_p(spreading or _identity))
    tag = dag.new_vertex("tag", map_p(_key))
    slow = dag.new_vertex("slow", map_p(last_stage_fn))
    count = dag.new_vertex("count", aggregate_by_key_p(_identity, counting()))
    sink = dag.new_vertex("sink", write_map_p("counts"))
    dag.edge(between(numbers, spread).distributed().partitioned(_identity))
    dag.edge(between(spread, tag).distributed())
    dag.edge(between(tag, slow).distributed().partitioned(_identity))
    dag.edge(between(slow, count))
    dag.edge(between(count, sink))
    return dag


def _identity(item: Any) -> Any:
    return item


def _executor_pids(context: SparkContext) -> list[int]:
    """The executor JVMs of `context`'s application (other applications' executors on this
    machine, of other test runs, are left alone)."""
    listing = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True)
    application = f"--app-id {context.applicationId} "
    return [
        int(line.split()[0])
        for line in listing.stdout.splitlines()
        if "CoarseGrainedExecutorBackend" in line and application in f"{line} "
    ]


def _kill_an_executor(context: SparkContext, gate: str, killed: list[int]) -> None:
    """Kills one executor JVM of `context`'s application, then opens `gate` (a file)."""
    pids = _executor_pids(context)
    if pids:
        os.kill(pids[0], signal.SIGKILL)
        killed.append(pids[0])
    open(gate, "w").close()


def _kill_an_executor_in_the_last_stage(
    context: SparkContext, group: str, gate: str, killed: list[int]
) -> None:
    """Kills one executor JVM once the last stage of the job group `group` runs tasks (they
    wait for `gate`), then opens the gate."""
    tracker = context.statusTracker()
    while True:
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            last = tracker.getStageInfo(max(job.stageIds)) if job and job.stageIds else None
            if last is not None and last.numActiveTasks > 0:
                _kill_an_executor(context, gate, killed)
                return
        time.sleep(0.05)


def _kill_an_executor_after_a_commit(
    context: SparkContext, snapshots: str, gate: str, killed: list[int]
) -> None:
    """Kills one executor JVM once a snapshot is committed in `snapshots`, then opens `gate`,
    so the job cannot have ended before the kill, however fast it runs."""
    _wait_for_a_commit(snapshots)
    _kill_an_executor(context, gate, killed)


def _open_after_a_commit(
    context: SparkContext, snapshots: str, gate: str, killed: list[int]
) -> None:
    """Opens `gate` once a snapshot is committed in `snapshots` (a Python worker of the job
    then kills itself at its next item: `SignalOnce`)."""
    _wait_for_a_commit(snapshots)
    open(gate, "w").close()


def _wait_for_a_commit(snapshots: str) -> None:
    while not glob.glob(os.path.join(snapshots, "snapshot-*", "MANIFEST")):
        time.sleep(0.05)


class GatedNumbers(AbstractProcessor):
    """The numbers below NUMBERS (processor i of n: i, i + n, ...), replayable; from NUMBERS // 2
    on only once the file `gate` exists."""

    def __init__(self, gate: str) -> None:
        super().__init__()
        self.gate = gate
        self.next = -1

    def complete(self) -> bool:
        context = self.context
        if self.next < 0:
            self.next = context.global_processor_index
        while self.next < NUMBERS:
            if self.next >= NUMBERS // 2 and not os.path.exists(self.gate):
                return False
            if not self.try_emit(self.next):
                return False
            self.next += context.total_parallelism
        return True

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot(
            broadcast_key(self.context.global_processor_index), self.next
        )

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if key.key == self.context.global_processor_index:
            self.next = value


class Warnings(logging.Handler):
    """Keeps the messages of the warnings it handles (of the `jetspark.spark` logger, once
    `Warnings.kept()` added it there)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    @classmethod
    def kept(cls) -> Warnings:
        """A handler added to the `jetspark.spark` logger."""
        handler = cls()
        logging.getLogger("jetspark.spark").addHandler(handler)
        return handler


def _continuous_kill(context: SparkContext, work: str, mode: str) -> None:
    """The four-stage job CONTINUOUS on 2 members, exactly-once: once a snapshot committed, an
    executor JVM is killed (`continuous-executor-kill`) or a Python worker kills itself at its
    next item (`continuous-python-worker-kill`); prints the counts, what was killed, the
    restarts and the warnings."""
    warnings = Warnings.kept()
    engine = SparkEngine(context, members=2)
    snapshots = os.path.join(work, "snapshots")
    config = JobConfig(
        processing_guarantee=Guarantee.EXACTLY_ONCE,
        snapshot_interval_millis=200,
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    killed: list[int] = []
    gate, marker = os.path.join(work, "gate"), os.path.join(work, "killed")
    executor = mode == "continuous-executor-kill"
    opener = _kill_an_executor_after_a_commit if executor else _open_after_a_commit
    threading.Thread(target=opener, args=(context, snapshots, gate, killed), daemon=True).start()
    source = ProcessorMetaSupplier.of(lambda: GatedNumbers(gate))
    spreading = None if executor else SignalOnce(signal.SIGKILL, 1, snapshots, marker)
    dag = four_stage_dag(source, spreading=spreading)
    job = engine.new_job(dag, config, snapshot_store=DirectorySnapshotStore(snapshots))
    job.join(600)
    if os.path.exists(marker):
        with open(marker) as killed_worker:
            killed.append(int(killed_worker.read()))
    counts = sorted(engine.get_map("counts").items())
    output = {"counts": counts, "killed": killed, "restarts": job.metrics.restarts}
    print(json.dumps({**output, "warnings": warnings.messages}))


def main(master: str, work: str, mode: str, n: int) -> None:
    context = create_context(master, f"jetspark-{mode}")
    if mode in ("continuous-executor-kill", "continuous-python-worker-kill"):
        _continuous_kill(context, work, mode)
    elif mode == "executor-kill":
        engine = SparkEngine(context, members=3)
        killed: list[int] = []
        gate = os.path.join(work, "gate")
        job = engine.new_job(four_stage_dag(last_stage_fn=functools.partial(_once_open, gate)))
        threading.Thread(
            target=_kill_an_executor_in_the_last_stage,
            args=(context, job.group, gate, killed),
            daemon=True,
        ).start()
        job.join(600)
        print(json.dumps({"counts": sorted(engine.get_map("counts").items()), "killed": killed}))
    else:
        engine = SparkEngine(context, members=3, batch_items=200)
        store = DirectorySnapshotStore(os.path.join(work, "snapshots"))
        config = JobConfig(processing_guarantee=Guarantee.EXACTLY_ONCE)
        dag = unbounded_windows_dag(os.path.join(work, "out"))
        job = engine.new_job(dag, config, snapshot_store=store, restore_from=store.latest())
        while len(job.metrics.batches) < n and not job.status.is_terminal:
            time.sleep(0.05)
        job.cancel()
        with contextlib.suppress(JobCancelledError):
            job.join(600)
        print(json.dumps({"batches": len(job.metrics.batches), "status": job.status.name}))
    context.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0)
