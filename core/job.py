"""Job: a submitted DAG's handle, to wait for it, cancel it and read its status and metrics."""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
from collections.abc import Callable

from jetspark.core.config import ExecutionMode, JobConfig, ProcessingGuarantee
from jetspark.core.dag import DAG
from jetspark.core.errors import AssertionCompletedError, JobCancelledError, JobFailedError
from jetspark.core.runtime.metrics import JobMetrics
from jetspark.core.runtime.priority import priority_trap_warnings
from jetspark.core.snapshot_store import SnapshotStore

_log = logging.getLogger("jetspark")


def checked_submission(dag: object, config: object) -> tuple[DAG, JobConfig]:
    """What an engine's `new_job(dag, config)` was given, checked up front: a DAG (a Pipeline
    is planned into one), validated (DagValidationError naming the vertex or edge), and a
    JobConfig (None: the defaults)."""
    to_dag = getattr(dag, "to_dag", None)
    if not isinstance(dag, DAG) and callable(to_dag):  # a Pipeline: planned here, once
        dag = to_dag()
    if not isinstance(dag, DAG):
        raise TypeError(
            f"new_job() takes a DAG or a Pipeline, got {type(dag).__name__} {dag!r:.60}"
        )
    if config is None:
        config = JobConfig()
    elif not isinstance(config, JobConfig):
        raise TypeError(
            f"new_job() takes a JobConfig (or None) as config, got {type(config).__name__}"
        )
    dag.validate()
    return dag, config


def warn_at_submission(dag: DAG, config: JobConfig) -> None:
    """Logs, once per submitted job, what the DAG's shape makes doubtful: the priority trap
    (runtime/priority.py), and sources or sinks that cannot give the job's guarantee."""
    for warning in priority_trap_warnings(dag):
        _log.warning("%s", warning)
    if config.processing_guarantee is ProcessingGuarantee.NONE:
        return
    for vertex in dag.vertices():
        if getattr(vertex.meta_supplier, "replayable", True) is False:
            kind = getattr(vertex.meta_supplier, "kind", "its processors")
            _log.warning(
                "vertex '%s' (%s) cannot replay or retract what passed through it: the job "
                "runs with %s, but a restart from a snapshot loses (a source) or repeats (a "
                "sink) the items that vertex handled since that snapshot",
                vertex.name,
                kind,
                config.processing_guarantee.name,
            )


def completes_job(error: BaseException | None) -> bool:
    """Whether a job that ended with `error` completed: no error, or a processor's
    AssertionCompletedError (Jet's way for a test to end a stream job), which every engine
    reports as a JobFailedError with that `cause_type`."""
    return error is None or (
        isinstance(error, JobFailedError) and error.cause_type == AssertionCompletedError.__name__
    )


def end_failure(
    job_name: str, error: BaseException | None, failure: BaseException
) -> BaseException | None:
    """The error a job ends with when giving back what it holds (its snapshot store, its task
    slots) failed with `failure` after the job ended with `error`: `error` when the job failed
    or was cancelled already (`failure` is logged), else a JobFailedError naming `failure`."""
    _log.warning("%s: ending the job failed: %s: %s", job_name, type(failure).__name__, failure)
    if error is not None:
        return error
    ended = JobFailedError(
        f"{job_name} ran to its end, but ending it failed: {type(failure).__name__}: {failure}"
    )
    ended.__cause__ = failure
    return ended


class JobStatus(enum.Enum):
    """Where a job is in its life."""

    NOT_STARTED = "not_started"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """True once the job has ended, one way or another."""
        return self in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED)


class Job:
    """A running or finished job; an engine creates it and drives it on its own thread.

    `snapshot_store` holds the job's complete snapshots (None without a processing
    guarantee); `restart` is how the engine starts the job again from the latest of them
    (None: the engine cannot restart jobs).
    """

    def __init__(
        self,
        job_id: int,
        name: str | None,
        *,
        snapshot_store: SnapshotStore | None = None,
        restart: Callable[[], Job] | None = None,
    ) -> None:
        self.id = job_id
        self.name = name if name is not None else f"job-{job_id}"
        self.cancel_event = threading.Event()
        """Set by `cancel()`; the engine's runtime checks it every round."""
        self.snapshot_store = snapshot_store
        """Where the job's snapshots go; `snapshot_store.latest()` is the last complete one."""
        self._restart = restart
        self._status = JobStatus.NOT_STARTED
        self._ended = threading.Event()
        self._error: BaseException | None = None
        self._read_metrics: Callable[[], JobMetrics] = JobMetrics
        self._on_cancel: Callable[[], None] | None = None
        self.execution_mode: ExecutionMode | None = None
        """How the job runs (never AUTO: what AUTO chose), once the engine decided; a
        LocalEngine job runs CONTINUOUS, Jet's model in-process."""

    @property
    def status(self) -> JobStatus:
        """The current status."""
        return self._status

    @property
    def metrics(self) -> JobMetrics:
        """A snapshot of the per-processor and per-edge metrics, during or after the run."""
        return self._read_metrics()

    def join(self, timeout: float | None = None) -> None:
        """Waits for the job to end; raises its JobFailedError or JobCancelledError.

        Raises TimeoutError if it is still running after `timeout` seconds (None: no limit).
        """
        if not self._ended.wait(timeout):
            raise TimeoutError(f"{self.name} is still {self._status.value} after {timeout} s")
        if self._error is not None:
            raise self._error

    def cancel(self) -> None:
        """Asks the job to stop; `join()` then raises JobCancelledError. No-op once it ended."""
        if not self._ended.is_set():
            self.cancel_event.set()
            if self._on_cancel is not None:
                self._on_cancel()

    def on_cancel(self, hook: Callable[[], None]) -> None:
        """Engine side: `hook()` runs on every `cancel()` before the job ended."""
        self._on_cancel = hook

    def restart(self) -> Job:
        """Starts the job again, restored from its last complete snapshot; returns the new Job.

        The new job runs the same DAG and config and writes to the same snapshot store; it
        starts afresh when there is no snapshot (or no processing guarantee). A running job is
        cancelled first (as Jet's `restart()` does); a completed one cannot be restarted.
        """
        if self._restart is None:
            raise RuntimeError(f"{self.name}: this engine cannot restart jobs from snapshots")
        if self._status is JobStatus.COMPLETED:
            raise RuntimeError(f"{self.name} completed; there is nothing to restart")
        self.cancel()
        self._ended.wait()
        return self._restart()

    def mark_running(self, metrics: Callable[[], JobMetrics] | None = None) -> None:
        """Engine side: the job is running; `metrics` reads its live metrics once it can."""
        self._status = JobStatus.RUNNING
        if metrics is not None:
            self._read_metrics = metrics

    def mark_ended(self, error: BaseException | None) -> None:
        """Engine side: the job ended, successfully when `error` is None or a processor's
        AssertionCompletedError (`completes_job`)."""
        self._set_ended(None if completes_job(error) else error)

    def _set_ended(self, error: BaseException | None) -> None:
        """Records how the job ended (None: it completed) and wakes `join()`."""
        self._error = error
        if error is None:
            self._status = JobStatus.COMPLETED
        elif isinstance(error, JobCancelledError):
            self._status = JobStatus.CANCELLED
        else:
            self._status = JobStatus.FAILED
        self._ended.set()

    def __repr__(self) -> str:
        return f"Job({self.id}, {self.name!r}, {self._status.name})"


def end_jobs(jobs: list[Job]) -> None:
    """An engine's `stop()`: cancels every job of `jobs` still running, waits for all of them to
    end (however they end), then forgets them."""
    for job in jobs:
        job.cancel()
    for job in jobs:
        with contextlib.suppress(JobCancelledError, JobFailedError):
            job.join()
    jobs.clear()
