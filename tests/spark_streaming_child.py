"""A driver process for the micro-batch failure tests (no tests here).

`python spark_streaming_child.py WORK MODE N [DELAY_MS [EXECUTION_MODE]]` runs a two-stage
exactly-once job on SparkEngine into transactional files in WORK/out, with its snapshots in
WORK/snapshots, continuing from the latest snapshot there, as micro-batches or (EXECUTION_MODE
`continuous`) continuously, its numbers then from `GatedNumbers`, which keeps a `kill` run going
until long after its kill:

- `kill`: local[2]; once N snapshots of this run are committed, waits DELAY_MS and kills this
  process with SIGKILL (so the kill falls anywhere in a batch);
- `finish`: local[2]; runs to completion;
- `retry`: local[2,3]; the first attempt of every task of both stages fails at its N-th item,
  so Spark retries each task from the same restored state and bounds.
"""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import sys
import threading
import time
from typing import Any

from pyspark import TaskContext

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    ExecutionMode,
    JobCancelledError,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.session import create_context
from jetspark.edges import between
from jetspark.processors import (
    map_p,
    read_journal_p,
    read_stream_p,
    write_file_transactional_p,
)

NUMBERS = 2400
BATCH_ITEMS = 400


class FailFirstAttempt:
    """Raises at the `at`-th item a task sees, in the first attempt of the task only."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.seen = 0

    def __call__(self, item: Any) -> Any:
        self.seen += 1
        task = TaskContext.get()
        if self.seen == self.at and task is not None and task.attemptNumber() == 0:
            raise RuntimeError(f"injected failure at item {self.at}")
        return item


def _number(offset: int) -> int:
    return offset


GATE = NUMBERS // 2
GATE_COMMITS = 1000
"""A gated run holds its numbers from GATE on until this many snapshots of it are committed,
so a kill after a few commits always falls in the middle of the run."""


class GatedNumbers(AbstractProcessor):
    """A replayable source of the numbers below NUMBERS (processor i of n: i, i + n, ...); with
    `gated`, from GATE on it emits only once GATE_COMMITS snapshots of this run are committed."""

    def __init__(self, snapshots: str, gated: bool) -> None:
        super().__init__()
        self.snapshots, self.gated = snapshots, gated
        self.next = 0
        self.first_commit = 0

    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, context)
        self.next = context.global_processor_index
        self.first_commit = max(_committed_ids(self.snapshots), default=0)

    def complete(self) -> bool:
        step = self.context.total_parallelism
        while self.next < NUMBERS:
            if self.gated and self.next >= GATE and not self._gate_open():
                return False
            if not self.try_emit(self.next):
                return False
            self.next += step
        return True

    def _gate_open(self) -> bool:
        newest = max(_committed_ids(self.snapshots), default=0)
        return newest - self.first_commit >= GATE_COMMITS

    def save_to_snapshot(self) -> bool:
        index = self.context.global_processor_index
        return self.try_emit_to_snapshot(broadcast_key(index), self.next)

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if key.key == self.context.global_processor_index:
            self.next = value


def _key(item: Any) -> Any:
    return item


def two_stage_dag(out: str, first: Any, second: Any, numbers: Any = None) -> DAG:
    """numbers -> first (local) -> second (distributed, partitioned) -> transactional files."""
    dag = DAG("numbers-to-files")
    numbers = numbers or read_journal_p(_number, count=NUMBERS, partition_count=8)
    source = dag.new_vertex("numbers", numbers)
    one = dag.new_vertex("first", map_p(first))
    two = dag.new_vertex("second", map_p(second))
    sink = dag.new_vertex("sink", write_file_transactional_p(out))
    dag.edge(between(source, one))
    dag.edge(between(one, two).distributed().partitioned(_key))
    dag.edge(between(two, sink))
    return dag


def _committed_ids(snapshots: str) -> set[int]:
    manifests = glob.glob(os.path.join(snapshots, "snapshot-*", "MANIFEST"))
    return {int(os.path.basename(os.path.dirname(path))[len("snapshot-") :]) for path in manifests}


def _kill_after(snapshots: str, count: int, delay: float) -> None:
    """Kills this process `delay` seconds after this run committed `count` snapshots."""
    start = max(_committed_ids(snapshots), default=0)
    seen: set[int] = set()
    while len(seen) < count:
        seen |= {i for i in _committed_ids(snapshots) if i > start}
        time.sleep(0.005)
    time.sleep(delay)
    os.kill(os.getpid(), signal.SIGKILL)


STREAM_FILES = 6
STREAM_LINES = 40


def stream_lines() -> list[str]:
    """The lines the `stream-*` modes' files hold, as the sink writes them."""
    return [f"FILE{f}-LINE{n}" for f in range(STREAM_FILES) for n in range(STREAM_LINES)]


def _stream(work: str, context: Any, mode: str, n: int, delay_ms: int) -> None:
    """`stream-kill`: lands STREAM_FILES files (once), runs the read_stream_p job one file per
    Spark batch and kills this process DELAY_MS after N batches of this run committed.
    `stream-finish`: continues the job until every line is published, then cancels it."""
    from pyspark.sql import SparkSession

    incoming = os.path.join(work, "incoming")
    if not os.path.exists(incoming):
        os.makedirs(incoming)
        for f in range(STREAM_FILES):
            staging = os.path.join(work, f".file{f}")
            with open(staging, "w") as file:
                file.writelines(f"file{f}-line{i}\n" for i in range(STREAM_LINES))
            os.rename(staging, os.path.join(incoming, f"file{f}.txt"))
    session = SparkSession(context)
    frame = session.readStream.option("maxFilesPerTrigger", 1).text(incoming)
    dag = DAG("landing-files")
    source = dag.new_vertex("lines", read_stream_p(frame, map_fn=_row_value))
    upper = dag.new_vertex("upper", map_p(str.upper))
    sink = dag.new_vertex("sink", write_file_transactional_p(os.path.join(work, "out")))
    dag.edge(between(source, upper).distributed())
    dag.edge(between(upper, sink))
    snapshots = os.path.join(work, "snapshots")
    store = DirectorySnapshotStore(snapshots)
    if mode == "stream-kill":
        threading.Thread(
            target=_kill_after, args=(snapshots, n, delay_ms / 1000), daemon=True
        ).start()
    config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
    latest = store.latest()
    job = SparkEngine(context, members=2).new_job(
        dag, config, snapshot_store=store, restore_from=latest
    )
    if mode == "stream-finish":  # the newest file: its batch publishes the last real file's
        staging = os.path.join(work, ".sentinel")
        with open(staging, "w") as file:
            file.write("sentinel\n")
        os.rename(staging, os.path.join(incoming, "sentinel.txt"))
    deadline = time.monotonic() + 300
    while len(_published(os.path.join(work, "out"))) < len(stream_lines()):
        if job.status.is_terminal or time.monotonic() > deadline:
            raise SystemExit(f"the stream stopped short, {job.status.name}")
        time.sleep(0.1)
    job.cancel()
    with contextlib.suppress(JobCancelledError):
        job.join(120)


def _row_value(row: Any) -> str:
    return row.value


def _published(out: str) -> list[str]:
    lines: list[str] = []
    for path in glob.glob(os.path.join(out, "part-*")):
        with open(path) as file:
            lines += [line for line in file.read().splitlines() if line != "SENTINEL"]
    return lines


def main(work: str, mode: str, n: int, delay_ms: int, execution: str = "micro_batch") -> None:
    master = "local[2,3]" if mode == "retry" else "local[2]"
    context = create_context(master, "jetspark-streaming-child")
    if mode.startswith("stream-"):
        _stream(work, context, mode, n, delay_ms)
        context.stop()
        return
    engine = SparkEngine(context, members=2, batch_items=BATCH_ITEMS)
    snapshots = os.path.join(work, "snapshots")
    store = DirectorySnapshotStore(snapshots)
    execution_mode = ExecutionMode(execution)
    numbers = None
    if mode == "retry":
        first, second = FailFirstAttempt(n), FailFirstAttempt(n)
    else:
        first = second = _key
    if execution_mode is ExecutionMode.CONTINUOUS:
        gated = mode == "kill"
        numbers = lambda: GatedNumbers(snapshots, gated)  # noqa: E731
    if mode == "kill":
        threading.Thread(
            target=_kill_after, args=(snapshots, n, delay_ms / 1000), daemon=True
        ).start()
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=10,
        execution_mode=execution_mode,
    )
    job = engine.new_job(
        two_stage_dag(os.path.join(work, "out"), first, second, numbers),
        config,
        snapshot_store=store,
        restore_from=store.latest(),
    )
    job.join(300)
    print(f"batches {len(job.metrics.batches)}")
    context.stop()


if __name__ == "__main__":
    main(
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        int(sys.argv[4]) if len(sys.argv) > 4 else 0,
        *sys.argv[5:6],
    )
