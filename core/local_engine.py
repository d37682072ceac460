"""LocalEngine: runs jobs in this process, one or more members, no JVM needed."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any

from jetspark.core.config import JobConfig, ProcessingGuarantee
from jetspark.core.dag import DAG
from jetspark.core.job import Job, checked_submission
from jetspark.core.runtime.build import build_member
from jetspark.core.runtime.exchange import LoopbackExchange
from jetspark.core.runtime.plan import JobPlan, plan_job
from jetspark.core.runtime.snapshot import Clock, SnapshotCoordinator
from jetspark.core.snapshot_store import InMemorySnapshotStore, Snapshot, SnapshotStore
from jetspark.core.stores import Stores

_log = logging.getLogger("jetspark")
_job_ids = itertools.count(1)


class LocalEngine:
    """Runs each job on a thread of its own: every member's cooperative processors take turns on
    that thread, non-cooperative ones get threads of their own.

    With `members > 1` every distributed edge crosses members through serialization, as it
    would on a cluster. A vertex with local parallelism -1 gets `default_local_parallelism`
    (Jet's default, the cooperative thread count, which is one here). `stop_timeout` is how long
    a stopping job waits for a non-cooperative processor to return from its callback.
    `snapshot_clock` (seconds) times the snapshot interval; a test can pass a clock it
    advances itself, so the snapshots fall at the same points of every run.
    """

    def __init__(
        self,
        members: int = 1,
        *,
        default_local_parallelism: int = 1,
        stop_timeout: float = 5.0,
        snapshot_clock: Clock = time.monotonic,
    ) -> None:
        if not isinstance(members, int) or members < 1:
            raise ValueError(f"members must be an int >= 1, got {members!r}")
        if not isinstance(default_local_parallelism, int) or default_local_parallelism < 1:
            raise ValueError(
                f"default_local_parallelism must be an int >= 1, got {default_local_parallelism!r}"
            )
        self.members = members
        self.default_local_parallelism = default_local_parallelism
        self.stop_timeout = stop_timeout
        self.snapshot_clock = snapshot_clock
        self.stores = Stores()
        """The named lists and maps of `get_list`/`get_map`, shared by all jobs of this engine."""

    def new_job(
        self,
        dag: DAG,
        config: JobConfig | None = None,
        *,
        snapshot_store: SnapshotStore | None = None,
        restore_from: Snapshot | None = None,
    ) -> Job:
        """Validates `dag` (raising DagValidationError) and starts running it; returns at once.

        With a processing guarantee the job takes snapshots into `snapshot_store` (default: a
        new InMemorySnapshotStore; a DirectorySnapshotStore lets another process restart it).
        `restore_from` starts the job from a snapshot, typically `store.latest()`; it may have
        been taken with another member count or parallelism. `job.restart()` does both for you.
        """
        dag, config = checked_submission(dag, config)
        if config.processing_guarantee is ProcessingGuarantee.NONE:
            if restore_from is not None or snapshot_store is not None:
                raise ValueError(
                    "snapshot_store and restore_from need a processing guarantee "
                    "(JobConfig(processing_guarantee=...)); this job takes no snapshots"
                )
        elif snapshot_store is None:
            snapshot_store = InMemorySnapshotStore()
        store = snapshot_store

        def restart() -> Job:
            latest = store.latest() if store is not None else None
            return self.new_job(dag, config, snapshot_store=store, restore_from=latest)

        job = Job(next(_job_ids), config.name, snapshot_store=store, restart=restart)
        thread = threading.Thread(
            target=self._execute,
            args=(job, dag, config, restore_from),
            name=f"jetspark-{job.name}",
            daemon=True,
        )
        thread.start()
        return job

    def get_list(self, name: str) -> list[Any]:
        """The engine's list called `name` (created empty on first use)."""
        return self.stores.get_list(name)

    def get_map(self, name: str) -> dict[Any, Any]:
        """The engine's dict called `name` (created empty on first use)."""
        return self.stores.get_map(name)

    def _execute(
        self, job: Job, dag: DAG, config: JobConfig, restore_from: Snapshot | None
    ) -> None:
        """The job thread: plan, build all members, run, close; never lets an error escape."""
        job.mark_running()
        error: BaseException | None = None
        plan: JobPlan | None = None
        try:
            plan = plan_job(
                dag, config, self.members, self.default_local_parallelism, stores=self.stores
            )
            snapshots = None
            if job.snapshot_store is not None:
                snapshots = SnapshotCoordinator(
                    plan,
                    job.snapshot_store,
                    clock=self.snapshot_clock,
                    restore_from=restore_from,
                    job_name=job.name,
                )
            runtime = build_member(
                plan,
                range(self.members),
                exchange=LoopbackExchange(),
                cancel_event=job.cancel_event,
                stop_timeout=self.stop_timeout,
                snapshots=snapshots,
            )
            job.mark_running(runtime.metrics)
            runtime.run()
        except BaseException as failure:
            error = failure
        if plan is not None:
            try:
                plan.close(error)
            except BaseException as failure:
                error = failure
        if error is None:
            _log.info("%s completed", job.name)
        else:
            _log.info("%s ended: %s", job.name, error)
        job.mark_ended(error)
