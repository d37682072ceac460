"""Micro-batch tasks run twice, and a transactional sink's publication: the stage task runs
in-process, as Spark would run it (again, or twice at once), and the driver's commit is
`commit_batch`, as the driver calls it on the records Spark brought back.

- Two attempts of one task (a resubmitted stage, a zombie attempt): the second one's restore
  must not delete the files the first one sealed, whose part the driver commits.
- Two first attempts running at once whose sources emitted different input: the one whose
  count is not the recorded one fails, so the batch's input is the recorded one.
- The final batch (the sources complete): its sink publishes nothing before the commit.
- A sealed file the driver cannot see (a sink directory that is not shared): the batch is not
  committed, and the error names the vertex.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from fault_tolerance_jobs import committed_lines

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    JobConfig,
    JobFailedError,
    ProcessingGuarantee,
)
from jetspark.core.runtime.plan import JobPlan, plan_job
from jetspark.core.snapshot_store import Snapshot
from jetspark.core.spark.microbatch.batch import BatchSpec
from jetspark.core.spark.microbatch.runner import commit_batch
from jetspark.core.spark.stages.plan import plan_stages
from jetspark.core.spark.stages.records import is_collected_result
from jetspark.core.spark.stages.task import StageTask
from jetspark.core.spark.task_restore import restore_spec
from jetspark.core.stores import Stores
from jetspark.edges import between
from jetspark.processors import read_journal_p, write_file_transactional_p

CONFIG = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
NUMBERS = 40


class Shipped:
    """What a broadcast variable of the driver's (empty) stores gives a task."""

    value = {"lists": {}, "maps": {}}


def _number(offset: int) -> int:
    return offset


def numbers_dag(out: Path) -> DAG:
    dag = DAG("numbers-to-files")
    source = dag.new_vertex("numbers", read_journal_p(_number, count=NUMBERS, partition_count=2))
    sink = dag.new_vertex("sink", write_file_transactional_p(str(out)))
    dag.edge(between(source, sink))
    return dag


class Batches:
    """Micro-batches of a one-stage DAG on one member, each task run in this process."""

    def __init__(self, dag: DAG, store: DirectorySnapshotStore, budget: int) -> None:
        self.plan: JobPlan = plan_job(dag, CONFIG, 1, 1)
        self.vertices = plan_stages(dag).stages[0].vertices
        self.store = store
        self.budget = budget

    def task(self, snapshot_id: int, last: Snapshot | None, plan: JobPlan | None = None) -> Any:
        """The task of batch `snapshot_id`, restoring `last` (as the driver's run "r1")."""
        plan = plan or self.plan
        spec = BatchSpec(
            snapshot_id=snapshot_id,
            store=self.store,
            item_budget=self.budget,
            restore=restore_spec(last, plan) if last is not None else None,
            run="r1",
        )
        return StageTask(plan, 0, self.vertices, frozenset(), Shipped(), batch=spec)

    def run(self, snapshot_id: int, last: Snapshot | None) -> list[Any]:
        """One attempt of the batch's task: the result records Spark would bring back."""
        return [r for r in self.task(snapshot_id, last)(0, iter(())) if is_collected_result(r)]

    def commit(self, snapshot_id: int, results: list[Any]) -> Snapshot:
        """The driver's commit of the batch from the records of the attempt Spark kept."""
        commit_batch(self.store, Stores(), snapshot_id, self.plan, results)
        return self.store.committed(snapshot_id)


def published(out: Path) -> list[str]:
    return sorted(name for name in os.listdir(out) if name.startswith("part-"))


def temporaries(out: Path) -> list[str]:
    return sorted(name for name in os.listdir(out) if name.endswith(".tmp"))


def test_a_second_attempt_of_a_sink_task_leaves_the_first_ones_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    batches = Batches(numbers_dag(out), DirectorySnapshotStore(tmp_path / "snapshots"), 10)
    last = batches.commit(1, batches.run(1, None))
    first = batches.run(2, last)
    batches.run(2, last)  # a second attempt of the same task, after the first one ended
    last = batches.commit(2, first)  # Spark kept the first attempt's output
    last = batches.commit(3, batches.run(3, last))
    assert committed_lines(str(out)) == sorted(str(n) for n in range(30))
    assert temporaries(out) == []  # the second attempt's files, removed by the driver


class GatedNumbers(AbstractProcessor):
    """A source emitting the numbers in `available` once both attempts started; the second
    attempt's source emits only after `wait_for` (the list has grown by then)."""

    def __init__(
        self, available: list[int], started: threading.Barrier, wait_for: threading.Event | None
    ) -> None:
        super().__init__()
        self._available = available
        self._started = started
        self._wait_for = wait_for
        self._emitted = 0
        self._gated = True

    def complete(self) -> bool:
        if self._gated:
            self._started.wait(30)
            if self._wait_for is not None:
                self._wait_for.wait(30)
            self._gated = False
        while self._emitted < len(self._available):
            if not self.try_emit(self._available[self._emitted]):
                return False
            self._emitted += 1
        return False  # a stream: nothing more now


def gated_dag(
    out: Path, available: list[int], started: threading.Barrier, wait_for: threading.Event | None
) -> DAG:
    dag = DAG("gated")
    source = dag.new_vertex("numbers", lambda: GatedNumbers(available, started, wait_for))
    sink = dag.new_vertex("sink", write_file_transactional_p(str(out)))
    dag.edge(between(source, sink))
    return dag


def test_two_first_attempts_that_emitted_different_input_cannot_both_succeed(
    tmp_path: Path,
) -> None:
    available = list(range(10))
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    started, first_done = threading.Barrier(2), threading.Event()
    out = tmp_path / "out"
    first = Batches(gated_dag(out, available, started, None), store, 1000)
    second = Batches(gated_dag(out, available, started, first_done), store, 1000)
    failures: list[BaseException] = []

    def second_attempt() -> None:
        try:
            second.run(1, None)
        except BaseException as failure:
            failures.append(failure)

    thread = threading.Thread(target=second_attempt)
    thread.start()
    results = first.run(1, None)  # records that its source emitted 10 items
    available.extend(range(10, 15))  # the stream grew before the second attempt read it
    first_done.set()
    thread.join(60)
    assert len(failures) == 1 and "another attempt" in str(failures[0])
    first.commit(1, results)
    assert committed_lines(str(out)) == sorted(str(n) for n in range(10))


def test_the_final_batch_publishes_nothing_before_its_commit(tmp_path: Path) -> None:
    out = tmp_path / "out"
    batches = Batches(numbers_dag(out), DirectorySnapshotStore(tmp_path / "snapshots"), 1000)
    results = batches.run(1, None)  # the source completes: the job's last batch
    assert published(out) == []  # a driver dying now leaves nothing of this run published
    snapshot = batches.commit(1, results)
    assert all(snapshot.completed_flags().values())
    assert committed_lines(str(out)) == sorted(str(n) for n in range(NUMBERS))


def test_a_sealed_file_the_driver_cannot_see_fails_the_batch_before_its_commit(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    batches = Batches(numbers_dag(out), store, 10)
    results = batches.run(1, None)
    for name in temporaries(out):  # on an executor's own disk: not where the driver looks
        os.remove(out / name)
    with pytest.raises(JobFailedError, match=r"vertex 'sink'.*shared storage") as failure:
        batches.commit(1, results)
    assert failure.value.vertex_name == "sink"
    assert store.latest() is None  # not committed: the job continues from before the batch


@pytest.mark.spark
def test_speculative_execution_is_refused_for_a_job_with_a_guarantee(
    spark_engine: Any, tmp_path: Path
) -> None:
    """Two copies of a task running at once by design: refused at submit, before any batch."""
    conf = spark_engine.context._jsc.sc().conf()  # the context's live configuration
    before = conf.getOption("spark.speculation")
    conf.set("spark.speculation", "true")
    try:
        with pytest.raises(ValueError, match=r"spark\.speculation=true.*refused"):
            spark_engine.new_job(numbers_dag(tmp_path / "out"), CONFIG)
    finally:
        if before.isDefined():
            conf.set("spark.speculation", before.get())
        else:
            conf.remove("spark.speculation")
    assert not (tmp_path / "out").exists()  # nothing ran


class DriverStopped(BaseException):
    """The driver process ends here."""


def test_a_driver_stopped_between_commit_and_publication_publishes_when_it_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jetspark.core.spark.microbatch import runner
    from jetspark.core.spark.microbatch.publication import publish_recorded

    def stop(files: Any) -> None:
        raise DriverStopped

    out = tmp_path / "out"
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    batches = Batches(numbers_dag(out), store, 10)
    results = batches.run(1, None)
    monkeypatch.setattr(runner, "publish", stop)
    with pytest.raises(DriverStopped):
        batches.commit(1, results)
    monkeypatch.undo()
    assert published(out) == [] and store.latest().snapshot_id == 1  # committed, not published
    publish_recorded(store, 1)  # what a driver does first when it starts again from snapshot 1
    assert committed_lines(str(out)) == sorted(str(n) for n in range(10))
