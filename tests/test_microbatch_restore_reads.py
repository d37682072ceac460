"""In a micro-batch job that keeps its layout, a task reads only the snapshot parts holding
entries for its own processors: a keyed count on 4 members reads one part per task of the
counting stage (its own member's), not the stage's 4; the journal source, whose offsets are
saved under broadcast keys that every processor restores, still reads every part of its
stage. Reads are logged by the store itself, in the tasks."""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from microbatch_jobs import engine_with_words, guaranteed

from jetspark.core import DirectorySnapshotStore
from jetspark.core.snapshot_store import ProcessorKey, ProcessorSnapshot

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

MEMBERS = 4
_PART = re.compile(r"stage(\d+)-member(\d+)-attempt\d+")


class ReadLoggingStore(DirectorySnapshotStore):
    """A DirectorySnapshotStore that appends `<snapshot> <reading member> <part>` to
    `reads.log` beside the store for every part a task reads."""

    def read_part(
        self, snapshot_id: int, name: str, tag: bytes | None = None
    ) -> dict[ProcessorKey, ProcessorSnapshot]:
        from pyspark import TaskContext

        task = TaskContext.get()
        reader = task.partitionId() if task is not None else -1
        with open(os.path.join(os.path.dirname(self.directory), "reads.log"), "a") as log:
            log.write(f"{snapshot_id} {reader} {name}\n")
        return super().read_part(snapshot_id, name, tag)


def _identity(item: Any) -> Any:
    return item


def test_each_task_reads_the_parts_its_processors_restore_from(
    spark_engine: Any, tmp_path: Any
) -> None:
    engine = engine_with_words(spark_engine, 2000, keys=40, members=MEMBERS)
    items = engine.get_list("words")
    store = ReadLoggingStore(tmp_path / "snapshots")
    dag = jobs.counting_dag(_identity, source_lp=1, counter_lp=1)
    job = engine.new_job(dag, guaranteed(), snapshot_store=store)
    job.join(240)
    assert engine.get_map("counts") == jobs.expected_counts(items)
    reads: Counter[tuple[int, int]] = Counter()  # (stage, reading member) -> parts read
    for line in (tmp_path / "reads.log").read_text().splitlines():
        _snapshot, reader, part = line.split()
        stage, member = map(int, _PART.fullmatch(part).groups())  # type: ignore[union-attr]
        if stage == 1:  # the counting stage: keyed state only
            assert member == int(reader), line
        reads[(stage, int(reader))] += 1
    restores = job.metrics.batch_count - 1  # every batch but the first restores
    assert restores >= 4  # 2,000 words, 100 per source processor and batch
    assert all(reads[(0, m)] == MEMBERS * restores for m in range(MEMBERS))  # broadcast keys
    assert all(reads[(1, m)] == restores for m in range(MEMBERS))  # its own part only
