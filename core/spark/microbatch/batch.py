"""One micro-batch inside a Spark task: restore the last snapshot, run to the next, save it.

SparkEngine runs a job with a processing guarantee as a sequence of micro-batches, each one
Spark job (see runner.py for the driver's side). Inside a task of batch k, the member
runtime is built with a `BatchCoordinator` in place of the continuous SnapshotCoordinator:

- every processor restores what snapshot k-1 routes to it; each task reads the parts holding
  entries for its processors (task_restore.py; the driver never loads state), and each
  processor's watermark coalescer starts where it was at the end of batch k-1;
- source processors emit at most the item budget the driver fixed for the batch (or until
  they have nothing more to emit now), then save snapshot k and emit its barrier; barriers
  cross the shuffles as control records, so exactly-once alignment works across stages;
- a processor that saved snapshot k stops for this batch without `complete()`; one that
  completed saves its final state. Each task writes the states of its processors as one part
  (`stage<s>-member<m>-attempt<a>`, `a` Spark's task attempt id, unique in the application, so
  no two attempts ever write the same part) into the snapshot's directory and reports its tag
  and host to the driver, which commits snapshot k (writes its manifest) once the whole Spark
  job succeeded and it read every part (shared_storage.py);
- transactional sinks hand the files they sealed to the task's stores (`BatchStores`), which
  report them to the driver: it publishes them once it committed the batch (publication.py).
  The task also reports, per part, the processors that restore entries of it, and its
  processors' coalescer states, for batch k+1 (carried.py).

A retried task restores the same state and reads the same bounded input, so it redoes exactly
the same work: nothing is lost or duplicated. A source may end a batch short of its budget
(it had no more at hand), so the first run of each task records what its sources emitted
(`DirectorySnapshotStore.record_batch_input`, the first attempt to record wins) and a task run
again emits exactly that; an attempt that emitted something else than the record that stands
(two attempts ran at once) fails before it writes its part, and Spark runs it again.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark import TaskContext

from jetspark.core.runtime.budget import BudgetedOutbox
from jetspark.core.runtime.coalescer import CarriedWatermarks
from jetspark.core.runtime.plan import JobPlan
from jetspark.core.runtime.restore import RestoredProcessor
from jetspark.core.runtime.snapshot_tasklet import SnapshottingTasklet
from jetspark.core.snapshot_store import (
    DirectorySnapshotStore,
    ProcessorKey,
    ProcessorSnapshot,
    held_by,
)
from jetspark.core.spark.shared_storage import SealingStores, task_host
from jetspark.core.spark.stages.records import BATCH, PUBLISH, SNAPSHOT, result_record
from jetspark.core.spark.stages.task import TaskSnapshot
from jetspark.core.spark.task_restore import (
    RestoreSpec,
    restoring_members,
    restoring_processors,
)


@dataclass(frozen=True)
class BatchSpec:
    """What the driver fixed for one micro-batch, before it starts (the same for a retry)."""

    snapshot_id: int
    """The snapshot the batch ends with."""
    store: DirectorySnapshotStore
    """Where tasks write their parts: a directory every executor reaches (its key travels
    with it, so tasks authenticate what they write and read)."""
    item_budget: int
    """Items each source processor may emit in the batch."""
    restore: RestoreSpec | None = None
    sources_read_to_the_end: frozenset[str] = field(default_factory=frozenset)
    unbudgeted_sources: frozenset[str] = field(default_factory=frozenset)
    run: str = "0"
    """Names this run of the batch (letters and digits): a task run again within it redoes
    its first run's input exactly; a driver that runs the batch again after a crash starts
    afresh (another member count may give the processors other input)."""
    carried_watermarks: Mapping[ProcessorKey, CarriedWatermarks] = field(default_factory=dict)
    """Each processor's watermark coalescer at the end of the previous batch of this run (the
    same layout), so that a quiet input does not hold the coalesced watermark back."""

    def coordinator(
        self, plan: JobPlan, stage: int, member: int, vertices: list[str]
    ) -> BatchCoordinator:
        """The coordinator of one task of this batch."""
        return BatchCoordinator(plan, self, stage, member, vertices)

    def task_stores(self, shipped: Any, rdd_input: Any) -> BatchStores:
        """The stores of one task of this batch."""
        return BatchStores(shipped, rdd_input)


class BatchStores(SealingStores):
    """The stores of a micro-batch task: the driver publishes the files its transactional
    sinks sealed once the batch is committed, and removes the other temporary files."""

    driver_publishes = True


class _NoStore:
    """The store of a task's coordinator: the driver commits, so tasks store nothing."""

    def __init__(self, snapshot_id: int) -> None:
        self._snapshot_id = snapshot_id

    def next_id(self) -> int:
        return self._snapshot_id

    def latest(self) -> None:
        return None

    def save(self, snapshot: Any) -> None:
        raise AssertionError("a micro-batch task never commits a snapshot")


class BatchCoordinator(TaskSnapshot):
    """The snapshot coordinator of one task of one micro-batch (module docstring)."""

    def __init__(
        self, plan: JobPlan, spec: BatchSpec, stage: int, member: int, vertices: list[str]
    ) -> None:
        super().__init__(plan, _NoStore(spec.snapshot_id))  # type: ignore[arg-type]
        self.spec = spec
        self.batch_snapshot_id = spec.snapshot_id
        self.source_item_budget = spec.item_budget
        self.sources_read_to_the_end = spec.sources_read_to_the_end
        self.unbudgeted_sources = spec.unbudgeted_sources
        self.carried_watermarks = spec.carried_watermarks
        self._in_progress = True
        self._member = member
        self._vertices = vertices
        self._task = f"stage{stage}-member{member}"
        self._input_record = f"{self._task}-run{spec.run}"
        self._sources = {
            (name, member * plan.vertices[name].local_parallelism + local)
            for name in vertices
            if not plan.vertices[name].inbound
            for local in range(plan.vertices[name].local_parallelism)
        }
        """The task's source processors: the batch's input is what they emitted."""
        if self._sources:
            recorded = spec.store.recorded_batch_input(spec.snapshot_id, self._input_record)
            if recorded is not None:
                self.replayed_input = recorded
        self._routed = spec.restore.route(plan, member, vertices) if spec.restore else None

    def restored(self, vertex: str, index: int) -> RestoredProcessor | None:
        """What the processor restores from the last snapshot (None in a job's first batch)."""
        return None if self._routed is None else self._routed[(vertex, index)]

    def register(self, tasklet: SnapshottingTasklet) -> None:
        """Every processor of the task must save this batch's snapshot (or complete)."""
        super().register(tasklet)
        self._outstanding.add(tasklet.key)

    def tick(self) -> None:
        """Requests the batch's one snapshot (from the first round on; the tasklets were built
        below it); the driver commits it."""
        self.requested_id = self.spec.snapshot_id

    def result_records(self, stage: int, tasklets: list[Any]) -> Iterator[Any]:
        """Records what the task's sources emitted (first run only) and writes the part of its
        processors, before its output can be read; yields one record naming the part and one
        with the batch facts the driver adapts the next batch to."""
        with self._lock:
            states: dict[ProcessorKey, ProcessorSnapshot] = {**self._states, **self._finals}
        spec = self.spec
        budgeted = {
            t.key: t.outbox
            for t in tasklets
            if isinstance(getattr(t, "outbox", None), BudgetedOutbox)
        }
        if budgeted and not self.replayed_input:
            emitted = {key: outbox.spent for key, outbox in budgeted.items()}
            recorded = spec.store.record_batch_input(spec.snapshot_id, self._input_record, emitted)
            if recorded != emitted:
                raise RuntimeError(
                    f"another attempt of task {self._task} of snapshot {spec.snapshot_id} "
                    f"recorded that its sources emitted {recorded}, this one emitted {emitted}: "
                    "this attempt is discarded, and a run again emits what the record says"
                )
        task = TaskContext.get()
        attempt = task.taskAttemptId() if task is not None else secrets.token_hex(8)
        # a name per attempt: another attempt never replaces the part the driver commits (the
        # one of the attempt whose records it collected)
        name = f"{self._task}-attempt{attempt}"
        tag = spec.store.write_part(spec.snapshot_id, name, states)
        routing = restoring_processors(self._plan, states)
        readers = restoring_members(self._plan, routing)
        keyed = {key: saved.keyed for key, saved in routing.items()}
        part = (tag, held_by(states), readers, keyed, task_host())
        yield result_record(self._member, stage, SNAPSHOT, name, part)
        sealed = self._plan.stores.take_sealed()
        if sealed:
            yield result_record(self._member, stage, PUBLISH, "", sealed)
        vertex_bytes: dict[str, int] = {}
        for (vertex, _), state in states.items():
            vertex_bytes[vertex] = vertex_bytes.get(vertex, 0) + len(state.data)
        exhausted = any(o.spent >= spec.item_budget for o in budgeted.values())
        sources = [self._tasklets[key] for key in self._sources if key in self._tasklets]
        spent = sum(_items_emitted(t.outbox) for t in sources)
        watermarks = {
            key: tasklet.coalescer.carried()
            for key, tasklet in self._tasklets.items()
            if tasklet.streams
        }
        facts = (spent, exhausted, vertex_bytes, watermarks)
        yield result_record(self._member, stage, BATCH, "", facts)


def _items_emitted(outbox: Any) -> int:
    """The items a source processor emitted in the batch: a budgeted source's spent budget,
    else what its outbox handed on (a Spark stream's rows, read to the end of its batch)."""
    if isinstance(outbox, BudgetedOutbox):
        return outbox.spent
    return max(outbox.emitted_count, default=0)
