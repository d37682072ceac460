"""What one Spark task runs: the member runtime for one member of one stage."""

from __future__ import annotations

import abc
import dataclasses
import pickle
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from jetspark.core.errors import JobFailedError
from jetspark.core.runtime.build import build_member
from jetspark.core.runtime.plan import JobPlan
from jetspark.core.runtime.snapshot import SnapshotCoordinator
from jetspark.core.spark.failures import processor_failure_facts, task_failure
from jetspark.core.spark.stages.exchange import SparkExchange
from jetspark.core.spark.stages.records import METRICS, result_record
from jetspark.core.spark.stages.task_stores import RESULT_BATCH, TaskStores


class TaskSnapshot(SnapshotCoordinator, abc.ABC):
    """The snapshot coordinator of a stage task that takes part in a snapshot (a micro-batch)."""

    @abc.abstractmethod
    def result_records(self, stage: int, tasklets: list[Any]) -> Iterator[Any]:
        """Records the driver needs once the task's runtime ended (its snapshot part)."""


class StageSnapshots(Protocol):
    """What the driver fixed for the snapshot a staged run ends with (see microbatch/)."""

    def coordinator(
        self, plan: JobPlan, stage: int, member: int, vertices: list[str]
    ) -> TaskSnapshot:
        """The coordinator of one task of the run."""
        ...

    def task_stores(self, shipped: Any, rdd_input: Any) -> TaskStores:
        """The stores of one task of the run."""
        ...


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
    batch: StageSnapshots | None = None
    """Set in a micro-batch of a job with a processing guarantee (see microbatch/batch.py)."""

    def __call__(self, member: int, records: Iterable[Any]) -> Iterator[Any]:
        """Builds and drives the member runtime, yielding records as it produces them."""
        rdd_input = None
        if self.rdd_source is not None:
            rdd_input, records = records, iter(())
        shipped = self.shipped.value if self.shipped is not None else None
        if self.batch is not None:
            stores = self.batch.task_stores(shipped, rdd_input)
        else:
            stores = TaskStores(shipped, rdd_input)
        exchange = SparkExchange(iter(records), self.stage, self.heir_of)
        plan = dataclasses.replace(self.plan, stores=stores)
        batch = None
        try:
            if self.batch is not None:
                batch = self.batch.coordinator(plan, self.stage, member, self.vertices)
            runtime = build_member(
                plan, [member], self.vertices, exchange=exchange, snapshots=batch
            )
            for _ in runtime.drive():  # diagnoses the priority trap as LocalEngine does
                if exchange.out:
                    yield from exchange.take_output()
                yield from stores.result_records(member, self.stage, at_least=RESULT_BATCH)
        except JobFailedError as failure:
            raise task_failure(failure, processor_failure_facts(failure, member)) from failure
        yield from exchange.take_output()
        yield from stores.result_records(member, self.stage)
        if batch is not None:
            yield from batch.result_records(self.stage, runtime.tasklets)
        metrics = pickle.dumps(runtime.metrics(), protocol=5)
        yield result_record(member, self.stage, METRICS, "", metrics)
