"""Task slots on Spark: how many the cluster has, how many its configuration asks for, and how
many are free beside the continuous jobs running on the same SparkContext.

A continuous job holds a slot per member for as long as it runs (its barrier stage's tasks
never end before the job does), so a second one counts only the slots left: Spark would
otherwise accept its barrier stage and leave it waiting for slots with no word.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from pyspark import SparkContext

from jetspark.core.spark.session import master_of, runs_in_driver

EXECUTORS_WAIT_SECONDS = 60.0
"""On a cluster, how long a choice waits for the executors the configuration asks for before
counting slots (they register some seconds after the context starts)."""
ENDING_WAIT_SECONDS = 120.0
"""How long a choice waits for continuous jobs that were cancelled to end and free their
slots (their tasks stop when they notice)."""

_lock = threading.Lock()
_held: dict[int, dict[int, tuple[Any, int]]] = {}
"""id(SparkContext) -> id(job) -> (the job, its members): the continuous jobs holding slots."""


def task_slots(context: SparkContext) -> int:
    """How many tasks the cluster can run at once (all executors' cores / cores per task)."""
    scheduler = context._jsc.sc()  # type: ignore[union-attr]
    profile = scheduler.resourceProfileManager().defaultResourceProfile()
    return int(scheduler.maxNumConcurrentTasks(profile))


def configured_slots(conf: Any, master: str) -> int | None:
    """The task slots `conf` asks the cluster of `master` for, once every executor registered:
    `spark.executor.instances` executors of `spark.executor.cores` (YARN, Kubernetes), or
    `spark.cores.max` cores (standalone), over `spark.task.cpus`; None when the configuration
    does not say (a standalone application takes what the workers offer)."""
    task_cpus = int(conf.get("spark.task.cpus") or 1)
    if master.startswith("spark://"):
        cores = conf.get("spark.cores.max")
        return int(cores) // task_cpus if cores else None
    if master.startswith(("yarn", "k8s://")):
        instances = conf.get("spark.executor.instances")
        if not instances:
            return None
        return int(instances) * (int(conf.get("spark.executor.cores") or 1) // task_cpus)
    return None


def wait_for_slots(context: SparkContext, needed: int) -> int:
    """The cluster's task slots; on a cluster, once there are `needed` of them or after
    EXECUTORS_WAIT_SECONDS, whichever comes first."""
    slots = task_slots(context)
    if slots >= needed or runs_in_driver(master_of(context)):
        return slots
    deadline = time.monotonic() + EXECUTORS_WAIT_SECONDS
    while slots < needed and time.monotonic() < deadline:
        time.sleep(0.2)
        slots = task_slots(context)
    return slots


def take_slots(
    context: SparkContext, slots: int, members: int, holder: Any = None
) -> tuple[int, list[tuple[Any, int]]]:
    """The free slots out of `slots` and the running continuous jobs (job, members) that hold
    the others; continuous jobs being cancelled are waited for first (ENDING_WAIT_SECONDS at
    most). With `members` free and a `holder` job, the holder takes them until
    `release_slots`."""
    deadline = time.monotonic() + ENDING_WAIT_SECONDS
    while True:
        with _lock:
            held = _held.setdefault(id(context), {})
            holders = [(job, n) for job, n in held.values() if not job.status.is_terminal]
            free = slots - sum(n for _, n in holders)
            if free >= members:
                if holder is not None:
                    held[id(holder)] = (holder, members)
                return free, holders
        ending = any(job.cancel_event.is_set() for job, _ in holders)
        if not ending or time.monotonic() >= deadline:
            return free, holders
        time.sleep(0.05)


def slots_for_restart(context: SparkContext, holder: Any) -> int:
    """The task slots the continuous job `holder` may restart on: the cluster's slots now,
    less those the other running continuous jobs hold."""
    slots = task_slots(context)
    with _lock:
        held = _held.get(id(context), {})
        return slots - sum(
            n for key, (job, n) in held.items() if key != id(holder) and not job.status.is_terminal
        )


def hold_slots(context: SparkContext, holder: Any, members: int) -> None:
    """The continuous job `holder` holds `members` slots from now on (it restarted on them)."""
    with _lock:
        _held.setdefault(id(context), {})[id(holder)] = (holder, members)


def release_slots(context: SparkContext, holder: Any) -> None:
    """The continuous job `holder` ended: its slots are free."""
    with _lock:
        _held.get(id(context), {}).pop(id(holder), None)


def holders_text(holders: list[tuple[Any, int]]) -> str:
    """The running continuous jobs that hold slots, for a message."""
    return ", ".join(f"{job.name} ({members})" for job, members in holders)
