"""The driver's side of a job with a processing guarantee on Spark: a loop of micro-batches.

Batch k is one Spark job over the DAG (see batch.py for what its tasks do): it restores
snapshot k-1 and ends with snapshot k. Before it starts the driver fixes everything a task
needs to redo it identically (the snapshot to restore, the sources' item budget); when the
Spark job succeeded, the driver writes snapshot k's manifest (the commit), adds the sinks'
results to its stores, publishes the files transactional sinks sealed (publication.py: Jet's
second phase, at once, whatever comes next) and starts batch k+1.

A batch whose Spark job fails for a reason other than a processor's exception (a lost executor,
Python worker or task, a fetch failure) runs again from the last committed snapshot, as a Jet
job restarts when it loses a member: at most `JobConfig.max_restarts` times in the job's life,
each logged and counted in `job.metrics.restarts`. A processor's exception fails the job with
the JobFailedError naming vertex, processor and callback.

The snapshot interval is the batch length: when the sources had nothing more to read, the next
batch starts one interval after the previous one started; while they are behind (a source
spent its budget), the next one starts at once, with the budget sized so that a batch takes
about BUSY_FRACTION of an interval (item_budget.py), which keeps a result within two intervals
of its event despite the batches' jitter. The loop ends when every processor has completed (a
bounded job, whose results then equal those of the same DAG without a guarantee) or when the
job is cancelled.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from py4j.protocol import Py4JError
from pyspark.errors.exceptions.captured import CapturedException

from jetspark.core.dag import DAG
from jetspark.core.errors import JobCancelledError
from jetspark.core.runtime.coalescer import CarriedWatermarks
from jetspark.core.runtime.metrics import (
    RECENT_BATCHES,
    RECENT_SNAPSHOTS,
    JobMetrics,
    SnapshotReport,
)
from jetspark.core.runtime.plan import JobPlan
from jetspark.core.snapshot_store import DirectorySnapshotStore, Held, ProcessorKey, Snapshot
from jetspark.core.spark.failures import (
    configuration_error,
    failure_facts,
    spark_error_summary,
)
from jetspark.core.spark.job import EngineFacts, SparkJob, plan_on
from jetspark.core.spark.job_group import GroupJobs, wait_for_tasks_to_end
from jetspark.core.spark.metrics import accumulate_metrics
from jetspark.core.spark.microbatch.batch import BatchSpec
from jetspark.core.spark.microbatch.carried import carried_watermarks
from jetspark.core.spark.microbatch.item_budget import ItemBudget
from jetspark.core.spark.microbatch.publication import (
    publish,
    publish_recorded,
    remove_stale_temporaries,
)
from jetspark.core.spark.shared_storage import SealedFiles, check_parts, check_sealed
from jetspark.core.spark.shipped_stores import free, shipped_contents
from jetspark.core.spark.stages.plan import plan_stages
from jetspark.core.spark.stages.records import BATCH, PUBLISH, SNAPSHOT, is_collected_result
from jetspark.core.spark.stages.run import apply_results
from jetspark.core.spark.stages.translate import translate
from jetspark.core.spark.task_restore import held_in, restore_spec
from jetspark.core.stores import Stores
from jetspark.core.suppliers import declares_fixed_ranges

_log = logging.getLogger("jetspark.spark")

MICRO_BATCH = "micro_batch"
"""The execution mode micro-batch jobs report in their metrics."""


@dataclass(frozen=True)
class BatchReport:
    """What one micro-batch did, in `job.metrics.batches` and the `jetspark.spark` log."""

    snapshot_id: int
    input_items: int
    """Items the source processors emitted."""
    duration_seconds: float
    state_bytes: int
    """Serialized bytes of the snapshot the batch committed."""
    behind: bool
    """True when a source spent its whole budget: it had more to read than the batch took."""
    item_budget: int


def prioritized_sources(dag: DAG) -> frozenset[str]:
    """Sources that feed an edge of a lower priority number than another inbound edge of the
    same vertex: a batch cannot end before such edges are done, so they read to the end."""
    prioritized: set[str] = set()
    for vertex in dag.vertices():
        inbound = dag.inbound_edges(vertex.name)
        last = max((e.get_priority() for e in inbound), default=0)
        stack = [e.source_name for e in inbound if e.get_priority() < last]
        while stack:
            name = stack.pop()
            feeders = dag.inbound_edges(name)
            if not feeders:
                prioritized.add(name)
            stack.extend(e.source_name for e in feeders)
    return frozenset(prioritized)


class MicroBatchRunner:
    """Runs one job with a processing guarantee on `engine`, batch after batch."""

    def __init__(
        self,
        engine: EngineFacts,
        job: SparkJob,
        dag: DAG,
        store: DirectorySnapshotStore,
        restore_from: Snapshot | None,
    ) -> None:
        self._engine = engine
        self.job = job
        self._dag = dag
        self.store = store
        self._restore_from = restore_from
        self._budget = ItemBudget(engine.batch_items)
        self._read_to_the_end = prioritized_sources(dag)
        self._fixed_ranges = frozenset(
            v.name for v in dag.vertices() if declares_fixed_ranges(v.meta_supplier)
        )
        self.metrics = JobMetrics(execution_mode=MICRO_BATCH)
        """The counters summed over every batch so far, with the newest reports."""
        self._batch_reports: deque[BatchReport] = deque(maxlen=RECENT_BATCHES)
        self._snapshot_reports: deque[SnapshotReport] = deque(maxlen=RECENT_SNAPSHOTS)
        self._batch_count = 0
        self._restarts = 0
        self._spark_jobs = GroupJobs(engine.context, job.group)
        self.last: Snapshot | None = None
        """The last committed snapshot (or the one the job restores)."""
        self._watermarks: dict[ProcessorKey, CarriedWatermarks] = {}
        """The processors' watermark coalescers after the last committed batch of this run."""
        self._keyed: dict[ProcessorKey, frozenset[int]] | None = None
        """Where each processor's keyed entries of that snapshot are restored (same proviso)."""
        self._readers: dict[str, frozenset[int]] | None = None
        """Which members read each part of the last committed snapshot, when this run wrote
        it (None: the run restores a snapshot taken elsewhere, maybe at another layout)."""

    def start(self) -> None:
        """Fixes the snapshot the first batch restores (copied into the store if need be) and
        publishes what its sinks sealed, in case a driver stopped between its commit and its
        publication."""
        self.last = held_in(self.store, self._restore_from)
        if self.last is not None:
            publish_recorded(self.store, self.last.snapshot_id)

    def run(self, config: Any) -> None:
        """Runs batches until every processor completed; raises JobCancelledError on cancel."""
        job = self.job
        self.start()
        interval = config.snapshot_interval_millis / 1000
        while True:
            if job.cancel_event.is_set():
                raise JobCancelledError(f"{job.name} was cancelled")
            started = time.monotonic()
            last = self.last
            snapshot_id = max(self.store.next_id(), (last.snapshot_id + 1) if last else 1)
            report, finished = self.run_batch(config, snapshot_id)
            if finished:
                return
            self._budget.adapt(report.item_budget, report.duration_seconds, report.behind, interval)
            if not report.behind:
                job.cancel_event.wait(max(0.0, started + interval - time.monotonic()))

    def run_batch(
        self, config: Any, snapshot_id: int, rdd_sources: dict[str, Any] | None = None
    ) -> tuple[BatchReport, bool]:
        """Runs one batch as a Spark job from `self.last` to snapshot `snapshot_id` and commits
        it, again after an infrastructure failure (module docstring); returns its report and
        whether every processor has completed. `rdd_sources`: the RDD each Spark-stream vertex
        reads in this batch."""
        while True:
            started = time.monotonic()
            try:
                report, self.last, finished, vertex_bytes = self._run_batch(
                    config, snapshot_id, self.last, started, rdd_sources
                )
                break
            except Exception as failure:
                if not self._restartable(failure, config.max_restarts):
                    raise
                self._restart_after(failure, config.max_restarts)
        job = self.job
        self._batch_reports.append(report)
        self._snapshot_reports.append(
            SnapshotReport(
                report.snapshot_id,
                committed_at=time.time(),
                duration_seconds=report.duration_seconds,
                bytes=report.state_bytes,
                vertex_bytes=vertex_bytes,
            )
        )
        self._batch_count += 1
        self._publish_metrics()
        self._spark_jobs.stages()  # notes the batch's Spark job as over, for later looks
        _log.info(
            "%s: batch %d committed: %d input items in %.2f s, state %d bytes%s",
            job.name,
            report.snapshot_id,
            report.input_items,
            report.duration_seconds,
            report.state_bytes,
            ", sources behind" if report.behind else "",
        )
        return report, finished

    def _restartable(self, failure: BaseException, max_restarts: int) -> bool:
        """True for a failure of the batch's Spark job that is not a processor's own nor a
        configuration error (failures.configuration_error), while the job has restarts left
        and is not cancelled."""
        if not isinstance(failure, (Py4JError, CapturedException)):
            return False  # raised on the driver: running the batch again would raise it again
        text = str(failure)
        return (
            not self.job.cancel_event.is_set()
            and self._restarts < max_restarts
            and self._engine.context._jsc is not None
            and failure_facts(text) is None
            and not configuration_error(text)
        )

    def _restart_after(self, failure: BaseException, max_restarts: int) -> None:
        """Counts and logs a restart, once the failed batch's tasks stopped."""
        wait_for_tasks_to_end(self._engine.context, self.job.group)
        self._restarts += 1
        self._publish_metrics()
        last = self.last
        _log.warning(
            "%s: a batch's Spark job failed (%.300s); restart %d of at most %d, from snapshot %s",
            self.job.name,
            spark_error_summary(str(failure)),
            self._restarts,
            max_restarts,
            last.snapshot_id if last is not None else "none (from the start)",
        )

    def _publish_metrics(self) -> None:
        metrics = self.metrics
        metrics.batches = list(self._batch_reports)
        metrics.snapshots = list(self._snapshot_reports)
        metrics.batch_count = metrics.snapshot_count = self._batch_count
        metrics.restarts = self._restarts
        metrics.execution_mode = MICRO_BATCH
        self.job.publish_metrics(metrics)

    def _run_batch(
        self,
        config: Any,
        snapshot_id: int,
        last: Snapshot | None,
        started: float,
        rdd_sources: dict[str, Any] | None,
    ) -> tuple[BatchReport, Snapshot, bool, dict[str, int]]:
        engine, job, dag = self._engine, self.job, self._dag
        plan: JobPlan | None = None
        error: BaseException | None = None
        shipped = None
        try:
            plan = plan_on(engine, dag, config)
            stages = plan_stages(dag)
            spec = BatchSpec(
                snapshot_id=snapshot_id,
                store=self.store,
                item_budget=self._budget.items,
                restore=(
                    restore_spec(last, plan, self._readers, self._keyed)
                    if last is not None
                    else None
                ),
                sources_read_to_the_end=self._read_to_the_end,
                unbudgeted_sources=frozenset(rdd_sources or ()) | self._fixed_ranges,
                run=secrets.token_hex(8),
                carried_watermarks=self._watermarks,
            )
            engine.context.setJobGroup(
                job.group,
                f"jetspark {dag.name or job.name}: batch {snapshot_id}",
                interruptOnCancel=True,
            )
            shipped = engine.context.broadcast(shipped_contents(dag, engine.stores))
            translation = translate(engine.context, dag, plan, stages, shipped, spec, rdd_sources)
            results = translation.final.filter(is_collected_result).collect()
            batch_metrics, facts = commit_batch(
                self.store, engine.stores, snapshot_id, plan, results
            )
            self.metrics = accumulate_metrics(self.metrics, batch_metrics)
        except BaseException as failure:
            error = failure
            raise
        finally:
            if shipped is not None:
                free(shipped, wait=error is None or job.cancel_event.is_set())
            if plan is not None:
                plan.close(error)
        committed = self.store.committed(snapshot_id)
        self._watermarks = carried_watermarks(plan, facts.watermarks, facts.keyed)
        self._readers, self._keyed = facts.readers, facts.keyed
        duration = time.monotonic() - started
        state_bytes = sum(facts.vertex_bytes.values())
        report = BatchReport(
            snapshot_id, facts.input_items, duration, state_bytes, facts.behind, self._budget.items
        )
        finished = all(committed.completed_flags().values())
        return report, committed, finished, facts.vertex_bytes


@dataclass
class BatchFacts:
    """What the tasks of a batch reported, besides their sinks' writes and metrics."""

    parts: dict[str, tuple[bytes, Held]] = field(default_factory=dict)
    """The snapshot's parts: name -> (tag, the processors it holds)."""
    writers: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Part name -> the member and the host whose task wrote it."""
    readers: dict[str, frozenset[int]] = field(default_factory=dict)
    """Part name -> the members whose processors restore an entry of it (task_restore.py)."""
    keyed: dict[ProcessorKey, frozenset[int]] = field(default_factory=dict)
    """Saved processor -> the global indexes of its vertex that restore its keyed entries."""
    input_items: int = 0
    behind: bool = False
    """True when a source spent its whole budget."""
    vertex_bytes: dict[str, int] = field(default_factory=dict)
    """Vertex -> the serialized bytes of its processors' state."""
    sealed: list[SealedFiles] = field(default_factory=list)
    """The files transactional sinks sealed, to publish once the batch is committed."""
    watermarks: dict[ProcessorKey, CarriedWatermarks] = field(default_factory=dict)
    """Each processor's watermark coalescer at the end of the batch, for the next one."""

    @classmethod
    def of(cls, results: list[Any]) -> BatchFacts:
        """The facts among a batch's result records."""
        facts = cls()
        for member, body in results:
            _, kind, name, payload, _stage = body
            if kind == SNAPSHOT:
                tag, held, readers, keyed, host = payload
                facts.parts[name] = (tag, tuple(map(tuple, held)))
                facts.writers[name] = (member, host)
                facts.readers[name] = readers
                facts.keyed.update(keyed)
            elif kind == BATCH:
                spent, exhausted, vertex_bytes, watermarks = payload
                facts.input_items += spent
                facts.behind = facts.behind or exhausted
                for vertex, size in vertex_bytes.items():
                    facts.vertex_bytes[vertex] = facts.vertex_bytes.get(vertex, 0) + size
                facts.watermarks.update(watermarks)
            elif kind == PUBLISH:
                facts.sealed.extend(payload)
        return facts


def commit_batch(
    store: DirectorySnapshotStore,
    stores: Stores,
    snapshot_id: int,
    plan: JobPlan,
    results: list[Any],
) -> tuple[JobMetrics, BatchFacts]:
    """Commits snapshot `snapshot_id` from the results its batch's Spark job brought back,
    once the driver reads every part of it and sees every file the batch's sinks sealed
    (shared_storage.py), then adds the sinks' list and map writes to `stores`, publishes the
    sealed files and removes the sinks' stale temporary files (publication.py). Returns the
    batch's metrics and facts."""
    facts = BatchFacts.of(results)
    check_parts(store, snapshot_id, facts.parts, facts.writers)
    check_sealed(facts.sealed, snapshot_id)
    files = [pair for sink in facts.sealed for pair in sink.files]
    if files:
        store.record_publications(snapshot_id, files)
    layout = {name: v.local_parallelism for name, v in plan.vertices.items()}
    store.commit(
        snapshot_id,
        plan.member_count,
        layout,
        facts.parts,
        plan.routing(),
        plan.state_definitions(),
    )
    # sink writes reach the driver's stores only once their batch is committed: a failed
    # commit leaves nothing to apply twice when the batch runs again
    metrics = apply_results(stores, results)
    publish(files)
    remove_stale_temporaries(facts.sealed)
    return metrics, facts
