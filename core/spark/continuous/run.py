"""The driver's side of a continuous job: launch the barrier stage, restart it after a failure.

The job is one Spark barrier stage of M tasks, one per member, all running at once for the
whole job (member.py). When the stage fails, what failed decides:

- a processor's exception fails the job with the JobFailedError naming vertex, processor and
  callback;
- a configuration error (failures.configuration_error: a Python or a module the executors
  lack, a snapshot store they cannot use, a barrier stage Spark refuses) fails it at once, in
  Python terms, naming the member, host and executor (failed_tasks.py): running it again
  would fail the same way;
- anything else is a lost member (a task, Python worker or executor): the job restarts from
  its last committed snapshot by itself, as Jet's jobs do, at most `JobConfig.max_restarts`
  times, each logged with the member's index, host, executor and Spark's reason and counted
  in `job.metrics.restarts`. When the cluster has no free slot for every member within
  `spark.jetspark.restart.slot.wait`, the restart runs on the members it has slots for, the
  snapshot rescaling to them (restarts.py), logged and counted in `job.metrics.rescales`.

A member the coordinator finds silent for the heartbeat timeout (its host unreachable or gone)
is lost at once: the driver cancels the members' stage itself rather than wait for Spark to
notice the host (`spark.worker.timeout`, `spark.network.timeout`: minutes), and the restart
runs on the free slots left beside the silent member's task, without the slot wait, as Jet
restarts on the members that are left (manual §3.5.4).
"""

from __future__ import annotations

import logging
import secrets

from jetspark.core.config import JobConfig
from jetspark.core.dag import DAG
from jetspark.core.errors import JobFailedError
from jetspark.core.runtime.plan import JobPlan, plan_job
from jetspark.core.snapshot_store import DirectorySnapshotStore, Snapshot
from jetspark.core.spark.continuous.coordinator import ContinuousCoordinator
from jetspark.core.spark.continuous.member import MemberTask
from jetspark.core.spark.continuous.restarts import members_for_restart
from jetspark.core.spark.continuous.security import security_of
from jetspark.core.spark.continuous.settings import RESTART_SLOT_WAIT, settings_of
from jetspark.core.spark.continuous.streams import PeerLostError
from jetspark.core.spark.failed_tasks import failed_member, silent_member, spark_reason
from jetspark.core.spark.failures import configuration_error, processor_error
from jetspark.core.spark.job import EngineFacts, SparkJob, plan_on
from jetspark.core.spark.job_group import wait_for_tasks_to_end
from jetspark.core.spark.shipped_stores import free, shipped_contents
from jetspark.core.spark.slots import hold_slots, slots_for_restart
from jetspark.core.spark.task_restore import held_in

_log = logging.getLogger("jetspark.spark")


def run_continuous_job(
    engine: EngineFacts,
    job: SparkJob,
    dag: DAG,
    config: JobConfig,
    restore_from: Snapshot | None,
) -> None:
    """Runs `job` as one long-running barrier stage on the job's thread and ends it (never
    raises)."""
    context = engine.context
    error: BaseException | None = None
    plan: JobPlan | None = None
    shipped = None
    coordinator: ContinuousCoordinator | None = None
    store = job.snapshot_store
    assert store is None or isinstance(store, DirectorySnapshotStore)
    try:
        plan = plan_on(engine, dag, config)
        restore = held_in(store, restore_from) if store is not None else None
        shipped = context.broadcast(shipped_contents(dag, engine.stores))
        security = security_of(context)
        settings = settings_of(context)
        coordinator = ContinuousCoordinator(
            job.name,
            plan,
            config,
            engine.stores,
            store,
            restore,
            settings,
            security,
            config.max_restarts,
        )
        job.read_metrics_live(coordinator.metrics)
        job.on_cancel(coordinator.cancel)
        coordinator.on_member_lost = lambda: context.cancelJobGroup(job.group)
        name = dag.name or job.name
        while True:
            token = secrets.token_hex(8)
            coordinator.begin_run(token)
            task = MemberTask(plan, coordinator.address, token, security, store, settings, shipped)
            context.setJobGroup(
                job.group,
                f"jetspark {name}: continuous, {plan.member_count} members",
                interruptOnCancel=True,
            )
            members = context.parallelize(range(plan.member_count), plan.member_count)
            try:
                stage = f"{name}: {' + '.join(plan.vertices)} (continuous)"
                members.barrier().mapPartitions(task).setName(stage).collect()
            except BaseException as failure:
                if job.cancel_event.is_set():
                    raise
                plan = _restart_plan(engine, job, dag, config, plan, coordinator, failure)
                continue
            if coordinator.completed.is_set():
                break
            if coordinator.fatal is not None:
                raise coordinator.fatal
            raise RuntimeError("the members' stage ended before every member finished")
    except BaseException as failure:
        error = job.error_of(failure)
        wait_for_tasks_to_end(context, job.group)
    if coordinator is not None:
        coordinator.close()
        job.publish_metrics(coordinator.metrics())
    if shipped is not None:
        free(shipped, wait=not isinstance(error, JobFailedError))
    if plan is not None:
        error = plan.close_after(error)
    job.mark_ended(error)


def _restart_plan(
    engine: EngineFacts,
    job: SparkJob,
    dag: DAG,
    config: JobConfig,
    plan: JobPlan,
    coordinator: ContinuousCoordinator,
    failure: BaseException,
) -> JobPlan:
    """After the members' stage failed with `failure`: raises what fails the job (a
    processor's failure, the coordinator's own, a configuration error, no restart left), else
    logs the lost member and returns the plan the restart runs (a rescaled one when the
    cluster has no slot left for every member: restarts.py)."""
    context = engine.context
    coordinator.settle()
    if coordinator.processor_failure is not None:
        raise processor_error(coordinator.processor_failure) from failure
    if coordinator.fatal is not None:
        raise coordinator.fatal from failure
    silent = coordinator.lost_member
    # a silent member's host may be gone: Spark ends its task only when it notices (minutes)
    vanished = wait_for_tasks_to_end(context, job.group, left_running=int(silent is not None))
    text = str(failure)
    if silent is None:
        lost = failed_member(context, text)
    else:  # the driver ended the stage itself: the silence is why
        lost = silent_member(context, job.group, *silent)
    if configuration_error(text):
        raise job.error_of(failure, lost.where() if lost is not None else None)
    if job.snapshot_store is None or not coordinator.count_restart():
        if coordinator.lost is not None:
            raise PeerLostError(coordinator.lost) from failure
        raise failure
    last = coordinator.last_committed
    from_snapshot = last.snapshot_id if last is not None else "none (from the start)"
    _log.warning(
        "%s: a member was lost: %s; restart %d of at most %d, from snapshot %s",
        job.name,
        lost.text() if lost is not None else coordinator.lost or spark_reason(text),
        coordinator.restarts,
        config.max_restarts,
        from_snapshot,
    )
    # a lost task's executor is replaced in seconds: wait for its slot; a silent member's
    # host is not, and Jet restarts on the members left at once (manual §3.5.4)
    wait = settings_of(context).slot_wait if silent is None else 0.0
    members = members_for_restart(
        plan.member_count,
        lambda: slots_for_restart(context, job) - vanished,
        wait,
        job.cancel_event.is_set,
    )
    if job.cancel_event.is_set():
        raise failure  # the job ends as cancelled
    if members == plan.member_count:
        return plan
    if members == 0:
        raise JobFailedError(
            f"{job.name}: {context.master} has no free task slot left to restart the job on "
            f"after waiting {wait:g} s ({RESTART_SLOT_WAIT})"
        ) from failure
    waited = (
        f"after waiting {wait:g} s ({RESTART_SLOT_WAIT})"
        if silent is None
        else "beside the silent member's (not waited for)"
    )
    _log.warning(
        "%s: rescaled to %d members (was %d): %s has %d free task slots %s; restarting from "
        "snapshot %s",
        job.name,
        members,
        plan.member_count,
        context.master,
        members,
        waited,
        from_snapshot,
    )
    plan.close(failure)
    rescaled = plan_job(
        dag, config, members, engine.default_local_parallelism, queue_bytes=plan.queue_bytes
    )
    hold_slots(context, job, members)
    coordinator.rescale(rescaled)
    return rescaled
