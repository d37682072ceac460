"""LocalEngine: runs jobs in this process, one or more members, no JVM needed."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from jetspark.core.config import ExecutionMode, JobConfig, ProcessingGuarantee
from jetspark.core.dag import DAG, PlansADag
from jetspark.core.errors import JobCancelledError
from jetspark.core.job import Job, checked_submission, end_failure, end_jobs, warn_at_submission
from jetspark.core.runtime.build import build_member
from jetspark.core.runtime.exchange import LoopbackExchange
from jetspark.core.runtime.member import MemberRuntime
from jetspark.core.runtime.metrics import JobMetrics
from jetspark.core.runtime.plan import JobPlan, plan_job
from jetspark.core.runtime.queue import DEFAULT_QUEUE_BYTES
from jetspark.core.runtime.restore import restorable
from jetspark.core.runtime.snapshot import Clock, SnapshotCoordinator
from jetspark.core.snapshot_store import InMemorySnapshotStore, Snapshot, SnapshotStore
from jetspark.core.store_lease import StoreLease, acquire_store
from jetspark.core.stores import Stores

if TYPE_CHECKING:
    from jetspark.core.view import JobView

_log = logging.getLogger("jetspark")
_job_ids = itertools.count(1)


class LocalEngine:
    """Runs each job on a thread of its own: every member's cooperative processors take turns on
    that thread, non-cooperative ones get threads of their own.

    With `members > 1` every distributed edge crosses members through serialization, as it
    would on a cluster. A vertex with local parallelism -1 gets `default_local_parallelism`
    (Jet's default, the cooperative thread count, which is one here). `stop_timeout` is how long
    a stopping job waits for a non-cooperative processor to return from its callback, and how
    long a cancelled job waits for a blocking cooperative one before it ends without it.
    `snapshot_clock` (seconds) times the snapshot interval; a test can pass a clock it
    advances itself, so the snapshots fall at the same points of every run. `job_view` (a
    `jetspark.core.view.JobView`) shows every job the engine starts, live. `queue_max_bytes`
    bounds each queue between two processors (and each outbox bucket) in estimated bytes,
    besides the edge's queue size in items (SparkEngine: `spark.jetspark.queue.maxSize`).
    """

    def __init__(
        self,
        members: int = 1,
        *,
        default_local_parallelism: int = 1,
        stop_timeout: float = 5.0,
        snapshot_clock: Clock = time.monotonic,
        job_view: JobView | None = None,
        queue_max_bytes: int = DEFAULT_QUEUE_BYTES,
    ) -> None:
        if not isinstance(members, int) or members < 1:
            raise ValueError(f"members must be an int >= 1, got {members!r}")
        if not isinstance(default_local_parallelism, int) or default_local_parallelism < 1:
            raise ValueError(
                f"default_local_parallelism must be an int >= 1, got {default_local_parallelism!r}"
            )
        if type(queue_max_bytes) is not int or queue_max_bytes < 1:
            raise ValueError(f"queue_max_bytes must be an int >= 1, got {queue_max_bytes!r}")
        self.members = members
        self.default_local_parallelism = default_local_parallelism
        self.queue_max_bytes = queue_max_bytes
        self.stop_timeout = stop_timeout
        self.snapshot_clock = snapshot_clock
        self.job_view = job_view
        self.stores = Stores()
        """The named lists and maps of `get_list`/`get_map`, shared by all jobs of this engine."""
        self._jobs: list[Job] = []

    def stop(self) -> None:
        """Cancels the engine's jobs still running and waits for them to end (SparkEngine's
        contract; the stores stay readable). Calling it again does nothing."""
        end_jobs(self._jobs)

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def new_job(
        self,
        dag: DAG | PlansADag,
        config: JobConfig | None = None,
        *,
        snapshot_store: SnapshotStore | None = None,
        restore_from: Snapshot | None = None,
    ) -> Job:
        """Validates `dag` (raising DagValidationError) and starts running it; returns at once.

        With a processing guarantee the job takes snapshots into `snapshot_store` (default: a
        new InMemorySnapshotStore; a DirectorySnapshotStore lets another process restart it).
        `restore_from` starts the job from a snapshot, typically `store.latest()`; it may have
        been taken with another member count or parallelism, or of an earlier version of the DAG
        (SnapshotError when it holds state of a vertex the DAG no longer has, unless
        `config.ignore_state_of_removed_vertices`; a renamed vertex restores the state of its
        old name in `config.renamed_vertices`). `job.restart()` does both for you.
        The job holds the store from here until it ends: another job given the same store
        meanwhile is refused with a SnapshotError naming this one (`store_lease.py`).
        """
        dag, config = checked_submission(dag, config)
        warn_at_submission(dag, config)
        if restore_from is not None and not isinstance(restore_from, Snapshot):
            raise TypeError(
                f"restore_from takes a Snapshot (store.latest()), got {type(restore_from).__name__}"
            )
        if snapshot_store is not None and not all(
            callable(getattr(snapshot_store, method, None))
            for method in ("latest", "next_id", "save")
        ):
            raise TypeError(
                "snapshot_store takes a SnapshotStore (latest(), next_id(), save(snapshot)), "
                f"got {type(snapshot_store).__name__}"
            )
        if config.processing_guarantee is ProcessingGuarantee.NONE:
            if restore_from is not None or snapshot_store is not None:
                raise ValueError(
                    "snapshot_store and restore_from need a processing guarantee "
                    "(JobConfig(processing_guarantee=...)); this job takes no snapshots"
                )
        elif snapshot_store is None:
            snapshot_store = InMemorySnapshotStore()
        if restore_from is not None:
            restore_from = restorable(restore_from, dag, config)
        store = snapshot_store

        def restart() -> Job:
            latest = store.latest() if store is not None else None
            return self.new_job(dag, config, snapshot_store=store, restore_from=latest)

        job = Job(next(_job_ids), config.name, snapshot_store=store, restart=restart)
        job.execution_mode = ExecutionMode.CONTINUOUS
        lease = acquire_store(store, job.name) if store is not None else None
        try:
            run = _LocalRun(self, job, dag, config, restore_from, lease)
            job.on_cancel(run.on_cancel)
            if self.job_view is not None:
                self.job_view.watch(job, dag)
            thread = threading.Thread(target=run.execute, name=f"jetspark-{job.name}", daemon=True)
            thread.start()
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        self._jobs = [j for j in self._jobs if not j.status.is_terminal] + [job]
        return job

    def get_list(self, name: str) -> list[Any]:
        """The engine's list called `name` (created empty on first use)."""
        return self.stores.get_list(name)

    def get_map(self, name: str) -> dict[Any, Any]:
        """The engine's dict called `name` (created empty on first use)."""
        return self.stores.get_map(name)


class _LocalRun:
    """One job on LocalEngine. Its thread plans, builds and runs it; a `cancel()` the thread
    does not honour within `stop_timeout` (a cooperative callback blocks it) ends the job from
    outside: everything but the stuck processor is closed and `join()` returns. So does a
    failure of a non-cooperative processor that the blocked job thread cannot notice."""

    def __init__(
        self,
        engine: LocalEngine,
        job: Job,
        dag: DAG,
        config: JobConfig,
        restore_from: Snapshot | None,
        lease: StoreLease | None = None,
    ) -> None:
        self.engine = engine
        self.job = job
        self.dag = dag
        self.config = config
        self.restore_from = restore_from
        self.lease = lease
        """The job's hold on its snapshot store, released when the job ends."""
        self.plan: JobPlan | None = None
        self.runtime: MemberRuntime | None = None
        self.snapshots: SnapshotCoordinator | None = None
        self._finish_lock = threading.Lock()
        self._finished = False

    def execute(self) -> None:
        """The job thread: plan, build all members, run, close; never lets an error escape."""
        engine, job = self.engine, self.job
        job.mark_running()
        error: BaseException | None = None
        try:
            self.plan = plan = plan_job(
                self.dag,
                self.config,
                engine.members,
                engine.default_local_parallelism,
                stores=engine.stores,
                queue_bytes=engine.queue_max_bytes,
            )
            if job.snapshot_store is not None:
                self.snapshots = SnapshotCoordinator(
                    plan,
                    job.snapshot_store,
                    clock=engine.snapshot_clock,
                    restore_from=self.restore_from,
                    job_name=job.name,
                )
            self.runtime = runtime = build_member(
                plan,
                range(engine.members),
                exchange=LoopbackExchange(),
                cancel_event=job.cancel_event,
                stop_timeout=engine.stop_timeout,
                snapshots=self.snapshots,
            )
            runtime.on_thread_failure = self.on_thread_failure
            job.mark_running(self.metrics)
            runtime.run()
        except BaseException as failure:
            error = failure
        self._finish(error)

    def metrics(self) -> JobMetrics:
        """The runtime's counters and the snapshots this run committed (mode "local")."""
        assert self.runtime is not None
        metrics = self.runtime.metrics()
        metrics.execution_mode = "local"
        if self.snapshots is not None:
            metrics.snapshots = list(self.snapshots.reports)
            metrics.snapshot_count = self.snapshots.committed_count
        return metrics

    def on_cancel(self) -> None:
        """Gives the job thread `stop_timeout` seconds to honour the cancel."""
        self._end_later_if_stuck(JobCancelledError("the job was cancelled"), "was cancelled")

    def on_thread_failure(self, error: BaseException) -> None:
        """Gives the job thread `stop_timeout` seconds to notice a non-cooperative failure."""
        self._end_later_if_stuck(error, "failed")

    def _end_later_if_stuck(self, error: BaseException, what: str) -> None:
        timer = threading.Timer(self.engine.stop_timeout, self._end_if_stuck, (error, what))
        timer.daemon = True
        timer.start()

    def _end_if_stuck(self, error: BaseException, what: str) -> None:
        runtime = self.runtime
        if self._finished or runtime is None:
            return
        stuck = runtime.abandon(error)
        if stuck is None:
            return  # not stuck in a cooperative callback: the job thread ends the job
        stuck.logger.warning(
            "%s: cooperative callback %s still running %.1f s after the job %s; the job ends "
            "without it: its thread is left running and the processor is not closed",
            stuck.name,
            stuck.callback,
            self.engine.stop_timeout,
            what,
        )
        self._finish(error)

    def _finish(self, error: BaseException | None) -> None:
        """Closes the plan and ends the job, once (the job thread or `_end_if_stuck`)."""
        with self._finish_lock:
            if self._finished:
                return
            self._finished = True
        if self.plan is not None:
            try:
                self.plan.close(error)
            except BaseException as failure:
                error = failure
        if error is None:
            _log.info("%s completed", self.job.name)
        else:
            _log.info("%s ended: %s", self.job.name, error)
        try:
            if self.lease is not None:
                self.lease.release()  # before join() returns: a restart takes the store next
        except Exception as failure:
            error = end_failure(self.job.name, error, failure)
        self.job.mark_ended(error)
