"""A driver process for test_spark_cluster_lost_worker.py (no tests here).

`python spark_cluster_lost_worker_child.py MASTER WORK` runs the four-stage counting job of
spark_cluster_child.py CONTINUOUS on 2 members, exactly-once, its snapshots in WORK/snapshots;
its source stops at half its numbers until the file WORK/gate exists (the test stops a worker
for good after the first commit, then makes the gate). It prints one JSON line: the counts,
the job's restarts and rescales, and the `jetspark.spark` warnings it logged.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from spark_cluster_child import NUMBERS, Warnings, four_stage_dag

from jetspark.core import (
    AbstractProcessor,
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.continuous.settings import RESTART_SLOT_WAIT
from jetspark.core.spark.session import create_context
from jetspark.core.suppliers import ProcessorMetaSupplier

PARTITIONS = 8
SLOT_WAIT = "3s"


class GatedPartitions(AbstractProcessor):
    """The numbers below NUMBERS in PARTITIONS partitions (n in partition n % PARTITIONS);
    processor i of n reads the partitions p with p % n == i, and a partition stops at
    NUMBERS // 2 until the file `gate` exists. Every processor saves its partitions' offsets
    (broadcast), and keeps those of the partitions it owns on restore: it rescales."""

    def __init__(self, gate: str) -> None:
        super().__init__()
        self.gate = gate
        self.restored: dict[int, int] = {}
        self.offsets: dict[int, int] | None = None

    def _offsets(self) -> dict[int, int]:
        if self.offsets is None:
            context = self.context
            owned = range(context.global_processor_index, PARTITIONS, context.total_parallelism)
            self.offsets = {p: self.restored.get(p, p) for p in owned}
        return self.offsets

    def complete(self) -> bool:
        offsets = self._offsets()
        gated = not os.path.exists(self.gate)
        for partition, offset in offsets.items():
            while offset < NUMBERS and not (gated and offset >= NUMBERS // 2):
                if not self.try_emit(offset):
                    return False
                offset += PARTITIONS
                offsets[partition] = offset
        return all(offset >= NUMBERS for offset in offsets.values())

    def save_to_snapshot(self) -> bool:
        key = broadcast_key(self.context.global_processor_index)
        return self.try_emit_to_snapshot(key, dict(self._offsets()))

    def restore_from_snapshot_entry(self, key: Any, value: dict[int, int]) -> None:
        self.restored.update(value)


def main(master: str, work: str) -> None:
    context = create_context(
        master, "jetspark-lost-worker", settings={RESTART_SLOT_WAIT: SLOT_WAIT}
    )
    warnings = Warnings.kept()
    engine = SparkEngine(context, members=2)
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=200,
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    gate = os.path.join(work, "gate")
    source = ProcessorMetaSupplier.of(lambda: GatedPartitions(gate))
    store = DirectorySnapshotStore(os.path.join(work, "snapshots"))
    job = engine.new_job(four_stage_dag(source), config, snapshot_store=store)
    job.join(600)
    metrics = job.metrics
    print(
        json.dumps(
            {
                "counts": sorted(engine.get_map("counts").items()),
                "restarts": metrics.restarts,
                "rescales": metrics.rescales,
                "warnings": warnings.messages,
            }
        )
    )
    context.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
