"""How many members a continuous job restarts on after it lost one.

A barrier stage needs a free task slot per member, all at once, and a lost executor takes its
slots with it: Spark would hold the restarted stage back, looking again every 15 s, and fail the
job after 40 looks. So a restart first waits, at most `spark.jetspark.restart.slot.wait`, for
the cluster to have a slot for every member again (a standalone worker, YARN and Kubernetes
replace a lost executor); past that wait the job restarts on the members it has slots for, and
the snapshot it restores rescales to them, as `restore_from` does at another member count (Jet
restarts a job on the members that are left).
"""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_SECONDS = 0.2
"""How often the wait looks at the cluster's free slots."""


def members_for_restart(
    members: int,
    free_slots: Callable[[], int],
    wait: float,
    cancelled: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """The members to restart on: `members` as soon as `free_slots()` reaches it, else what
    it has after `wait` seconds (0 when it has none); at once what it has when `cancelled()`
    (the job was cancelled meanwhile: nothing restarts)."""
    deadline = clock() + wait
    while True:
        free = free_slots()
        if free >= members:
            return members
        if clock() >= deadline or cancelled():
            return max(free, 0)
        sleep(POLL_SECONDS)
