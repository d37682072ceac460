"""A micro-batch task that Spark runs again redoes exactly its first run's input.

After a lost executor, Spark re-runs only the map tasks whose output is gone, while tasks
downstream keep what they read of the first run. A source with less at hand than its budget
ends a batch with what it had, so a second run of its task over a file that has grown since
would emit more: lines the finished downstream tasks never saw, yet past the offset the
snapshot saves — lost. The first run records what each source processor emitted; a run
again emits exactly that many. The stage task runs in-process here (no Spark), twice, as
Spark would run it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jetspark.core import DAG, DirectorySnapshotStore, JobConfig, ProcessingGuarantee
from jetspark.core.runtime import snapshot_tasklet
from jetspark.core.runtime.plan import plan_job
from jetspark.core.serialization import decode_batch
from jetspark.core.spark.microbatch.batch import BatchSpec
from jetspark.core.spark.stages.plan import plan_stages
from jetspark.core.spark.stages.records import BATCH, LIST, RESULT
from jetspark.core.spark.stages.task import StageTask
from jetspark.edges import between
from jetspark.processors import stream_files_p, write_list_p

CONFIG = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)


class Shipped:
    """What a broadcast variable of the driver's (empty) stores gives a task."""

    value = {"lists": {}, "maps": {}}


def append(path: Path, first: int, count: int) -> None:
    with open(path, "a") as file:
        file.writelines(f"line {n}\n" for n in range(first, first + count))


def batch_task(directory: Path, store: DirectorySnapshotStore, run: str) -> StageTask:
    """The one stage of `files -> sink` in batch 1 (of a budget far above what the file
    holds), as the driver's run `run` of the batch ships it."""
    dag = DAG("replayed")
    source = dag.new_vertex("files", stream_files_p(str(directory), "*.log"))
    sink = dag.new_vertex("sink", write_list_p("out"))
    dag.edge(between(source, sink))
    plan = plan_job(dag, CONFIG, 1, 1)
    stage = plan_stages(dag).stages[0]
    spec = BatchSpec(snapshot_id=1, store=store, item_budget=1_000, run=run)
    return StageTask(plan, 0, stage.vertices, frozenset(), Shipped(), batch=spec)


def run_task(task: StageTask) -> tuple[list[Any], int]:
    """The lines the task's sink wrote, and the items its sources reported spending."""
    lines: list[Any] = []
    spent = None
    for _member, body in task(0, iter(())):
        if body[0] == RESULT and body[1] == LIST:
            lines.extend(decode_batch(body[3]))
        elif body[0] == RESULT and body[1] == BATCH:
            spent = body[3][0]
    assert spent is not None
    return lines, spent


def test_a_task_run_again_emits_what_its_first_run_emitted(tmp_path: Path) -> None:
    directory = tmp_path / "logs"
    directory.mkdir()
    append(directory / "a.log", 0, 10)
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    first = run_task(batch_task(directory, store, "r1"))
    assert first == ([f"line {n}" for n in range(10)], 10)
    append(directory / "a.log", 10, 5)  # the file grew before Spark ran the task again
    assert run_task(batch_task(directory, store, "r1")) == first
    # a driver running batch 1 again after a crash starts afresh: nothing of it was committed
    assert run_task(batch_task(directory, store, "r2")) == ([f"line {n}" for n in range(15)], 15)


def test_a_task_run_again_whose_source_cannot_replay_fails_naming_the_vertex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "logs"
    directory.mkdir()
    append(directory / "a.log", 0, 10)
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    run_task(batch_task(directory, store, "r1"))
    (directory / "a.log").write_text("line 0\nline 1\n")  # truncated behind the job's back
    monkeypatch.setattr(snapshot_tasklet, "REPLAY_PATIENCE_SECONDS", 0.0)
    with pytest.raises(Exception, match=r"vertex 'files'.*emitted 10 items then.*emitted 2"):
        run_task(batch_task(directory, store, "r1"))
