"""What one Spark task runs: the member runtime for one member of one stage."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator
from typing import Any

from jetspark.core.errors import JobFailedError
from jetspark.core.runtime.build import build_member
from jetspark.core.runtime.plan import JobPlan
from jetspark.core.spark.batch import BatchCoordinator, BatchSpec
from jetspark.core.spark.exchange import SparkExchange
from jetspark.core.spark.failures import task_failure
from jetspark.core.spark.records import METRICS, result_record
from jetspark.core.spark.task_stores import RESULT_BATCH, TaskStores


@dataclasses.dataclass
class StageTask:
    """The `mapPartitionsWithIndex` function of a stage: partition index = member index.

    `rdd_source` names the stage's `read_rdd_p` vertex when the task's input is the user's RDD
    partition rather than shuffle records. `shipped` is the broadcast of the driver's stores.
    """

    plan: JobPlan
    stage: int
    vertices: list[str]
    heir_of: frozenset[int]
    shipped: Any = None
    rdd_source: str | None = None
    batch: BatchSpec | None = None
    """Set in a micro-batch of a job with a processing guarantee (see batch.py)."""

    def __call__(self, member: int, records: Iterator[Any]) -> Iterator[Any]:
        """Builds and drives the member runtime, yielding records as it produces them."""
        rdd_input = None
        if self.rdd_source is not None:
            rdd_input, records = records, iter(())
        shipped = self.shipped.value if self.shipped is not None else None
        stores = TaskStores(shipped, rdd_input)
        exchange = SparkExchange(records, self.stage, self.heir_of)
        plan = dataclasses.replace(self.plan, stores=stores)
        batch = None
        try:
            if self.batch is not None:
                batch = BatchCoordinator(plan, self.batch, self.stage, member, self.vertices)
            runtime = build_member(
                plan, [member], self.vertices, exchange=exchange, snapshots=batch
            )
            for _ in runtime.drive():  # diagnoses the priority trap as LocalEngine does
                if exchange.out:
                    yield from exchange.take_output()
                yield from stores.result_records(member, self.stage, at_least=RESULT_BATCH)
        except JobFailedError as failure:
            raise task_failure(failure, _facts(failure, member)) from failure
        yield from exchange.take_output()
        yield from stores.result_records(member, self.stage)
        if batch is not None:
            yield from batch.result_records(self.stage, runtime.tasklets)
        metrics = pickle.dumps(runtime.metrics(), protocol=5)
        yield result_record(member, self.stage, METRICS, "", metrics)


def _facts(failure: JobFailedError, member: int) -> dict[str, Any]:
    return {
        "message": str(failure),
        "vertex_name": failure.vertex_name,
        "processor_index": failure.processor_index,
        "callback": failure.callback,
        "member": member,
        "cause_type": type(failure.__cause__).__name__ if failure.__cause__ else None,
    }
