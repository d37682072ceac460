"""The handle of a job on Spark and the facts every execution mode runs a job with."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from py4j.protocol import Py4JError
from pyspark import RDD, SparkContext
from pyspark.errors.exceptions.captured import CapturedException

from jetspark.core.config import JobConfig
from jetspark.core.dag import DAG
from jetspark.core.errors import JobCancelledError, JobFailedError
from jetspark.core.job import Job, end_failure
from jetspark.core.runtime.metrics import JobMetrics
from jetspark.core.runtime.plan import JobPlan, plan_job
from jetspark.core.snapshot_store import SnapshotStore
from jetspark.core.spark.failures import spark_job_error
from jetspark.core.stores import Stores

_log = logging.getLogger("jetspark.spark")

_CANCEL_RETRY_SECONDS = 0.1


class EngineFacts(Protocol):
    """What an execution mode needs of the SparkEngine that runs the job."""

    context: SparkContext
    members: int
    default_local_parallelism: int
    stores: Stores
    batch_items: int | None

    @property
    def queue_bytes(self) -> int:
        """The byte bound of the queues inside a member (`spark.jetspark.queue.maxSize`)."""
        ...


def plan_on(engine: EngineFacts, dag: DAG, config: JobConfig) -> JobPlan:
    """`plan_job` of `dag` on the engine's members, with its defaults and its queue bytes."""
    return plan_job(
        dag,
        config,
        engine.members,
        engine.default_local_parallelism,
        queue_bytes=engine.queue_bytes,
    )


class SparkJob(Job):
    """A job running on Spark: the Job API, plus `rdd(name)` for RDD sinks."""

    def __init__(
        self,
        job_id: int,
        name: str | None,
        context: SparkContext,
        *,
        snapshot_store: SnapshotStore | None = None,
        restart: Callable[[], Job] | None = None,
    ) -> None:
        super().__init__(job_id, name, snapshot_store=snapshot_store, restart=restart)
        self.group = f"jetspark-{job_id}"
        self.context = context
        self._merged_metrics = JobMetrics()
        self._read_live: Callable[[], JobMetrics] | None = None
        self.rdd_reader: Callable[[str], RDD] | None = None
        """Set by the stage runner once the job completed with an RDD sink."""
        self.translation: Any = None
        """A staged job's RDDs once translated (`stages.translate.Translation`)."""
        self.modules_used: dict[str, set[str]] = {}
        """Module -> the vertices and edges whose code needs it on the executors."""
        self.restarting = False
        """True once `restart()` was called: the cancel it makes keeps what the restart needs."""
        self._end_hooks: list[Callable[[BaseException | None], None]] = []

    @property
    def metrics(self) -> JobMetrics:
        """Per-processor and per-edge metrics: live while a continuous job runs; merged from
        every task once a staged job ended; summed over the micro-batches so far."""
        if self._read_live is not None:
            return self._read_live()
        return self._merged_metrics

    def publish_metrics(self, metrics: JobMetrics) -> None:
        """Engine side: the metrics `metrics` returns from now on."""
        self._merged_metrics = metrics
        self._read_live = None

    def read_metrics_live(self, read: Callable[[], JobMetrics]) -> None:
        """Engine side: `metrics` calls `read()` from now on."""
        self._read_live = read

    def cancel(self) -> None:
        """Cancels the job's Spark jobs; `join()` then raises JobCancelledError.

        Spark cancels only the jobs of the group already submitted, and the driver thread may
        be about to submit one (a cancel right after `new_job` was lost so, and the job ran
        on): a helper thread repeats the cancellation until the job ended.
        """
        if self._ended.is_set() or self.cancel_event.is_set():
            return
        self.cancel_event.set()
        if self._on_cancel is not None:
            self._on_cancel()
        threading.Thread(
            target=self._cancel_until_ended, name=f"cancel-{self.name}", daemon=True
        ).start()

    def _cancel_until_ended(self) -> None:
        while True:
            try:
                self.context.cancelJobGroup(self.group)
            except Exception:
                if self._context_stopped():
                    return  # the context stopped (now or before): it cancelled every job itself
                raise
            if self._ended.wait(_CANCEL_RETRY_SECONDS):
                return

    def _context_stopped(self) -> bool:
        """True once the SparkContext is stopped or stopping (its JVM side refuses calls)."""
        java_context = self.context._jsc
        try:
            return java_context is None or bool(java_context.sc().isStopped())
        except Exception:  # the gateway is gone too
            return True

    def on_end(self, hook: Callable[[BaseException | None], None]) -> None:
        """Engine side: `hook(error)` runs when the job ends, before `join()` returns."""
        self._end_hooks.append(hook)

    def _set_ended(self, error: BaseException | None) -> None:
        """Runs the `on_end` hooks, then ends the job (see Job.mark_ended), whatever a hook
        raises (`end_failure`)."""
        for hook in self._end_hooks:
            try:
                hook(error)
            except Exception as failure:
                error = end_failure(self.name, error, failure)
        super()._set_ended(error)

    @property
    def ended(self) -> bool:
        """True once `mark_ended` ended the job."""
        return self._ended.is_set()

    def restart(self) -> Job:
        """As Job.restart; the job's temporary snapshot store outlives the cancel it makes."""
        self.restarting = True
        return super().restart()

    def rdd(self, name: str) -> RDD:
        """The items the job's `write_rdd_p(name)` sink received, as an RDD (nothing collected).

        Available once the job completed; the job's output is persisted, so reading it does
        not run the job again.
        """
        self.join()
        if self.rdd_reader is None:
            raise ValueError(f"{self.name} has no write_rdd_p sink")
        return self.rdd_reader(name)

    def error_of(self, failure: BaseException, where: str | None = None) -> BaseException:
        """The error `join()` raises for `failure`: JobCancelledError, the task's
        JobFailedError, or a JobFailedError that says what went wrong in Python terms (on
        `where`: the failed task's member, host and executor, when the caller knows them)."""
        if self.cancel_event.is_set():
            error: BaseException = JobCancelledError(f"{self.name} was cancelled")
            error.__cause__ = failure
        elif isinstance(failure, JobFailedError):
            error = failure
        else:
            error = spark_job_error(
                failure, self.name, self.modules_used, self.context.pythonExec, where
            )
            error.__cause__ = failure
        return self._without_jvm_text(error)

    def _without_jvm_text(self, error: BaseException) -> BaseException:
        """`error` with the failure of Spark's in its chain of causes (JVM text, with its stack
        frames) cut out of what a traceback prints, kept as `error.spark_error` and logged at
        DEBUG instead: the errors before it say what it means in Python terms."""
        link: BaseException | None = error
        seen: set[int] = set()
        while link is not None and id(link) not in seen:
            seen.add(id(link))
            behind = link.__cause__ or link.__context__
            if isinstance(behind, (Py4JError, CapturedException)):
                _log.debug("%s: the Spark failure behind %s: %s", self.name, link, behind)
                link.__cause__, link.__suppress_context__ = None, True
                error.spark_error = behind  # type: ignore[attr-defined]
                break
            link = behind
        return error
