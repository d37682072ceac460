"""The member runtime: Jet's execution model in Python, shared by LocalEngine and Spark tasks.

Two steps, kept apart because on Spark they run in different places:

1. `plan_job(dag, config, member_count, default_local_parallelism)` computes the job-wide facts
   once (on Spark: on the driver): local parallelism per vertex, meta-supplier `init`/`get`,
   partition tables, all-to-one targets. The JobPlan is plain data.
2. `build_member(plan, members, vertices, exchange=...)` builds the processors of some members
   (LocalEngine: all; a Spark task: its own) for some vertices (a Spark stage), wires them with
   bounded queues and routers, and returns a MemberRuntime to `run()` or drive with `run_iter()`.

Links that leave a member or the built vertices go through an `Exchange` (see exchange.py):
`LoopbackExchange` serializes them inside one process; the Spark translator plugs in records.

Jobs with a processing guarantee pass a `SnapshotCoordinator` (snapshot.py) to `build_member`:
every processor then runs in a `SnapshottingTasklet` (snapshot_tasklet.py) that restores,
saves and forwards `SnapshotBarrier`s, aligned per processor by a `BarrierAligner`
(barrier.py); restore.py routes a snapshot's entries to the processors of a new plan.
"""

from __future__ import annotations

from jetspark.core.runtime.barrier import BarrierAligner, SnapshotBarrier
from jetspark.core.runtime.build import build_member
from jetspark.core.runtime.coalescer import WatermarkCoalescer
from jetspark.core.runtime.exchange import Exchange, Link, LoopbackExchange, SerializingChannel
from jetspark.core.runtime.inbound import InboundStream
from jetspark.core.runtime.member import Backoff, MemberRuntime
from jetspark.core.runtime.metrics import EdgeMetrics, JobMetrics, ProcessorMetrics
from jetspark.core.runtime.outbox import TaskletOutbox
from jetspark.core.runtime.plan import EdgePlan, JobPlan, VertexPlan, plan_job
from jetspark.core.runtime.queue import DONE_ITEM, Queue
from jetspark.core.runtime.restore import RestoredProcessor, route_snapshot
from jetspark.core.runtime.snapshot import SnapshotCoordinator
from jetspark.core.runtime.snapshot_tasklet import SnapshottingTasklet
from jetspark.core.runtime.tasklet import (
    DONE,
    MADE_PROGRESS,
    NO_PROGRESS,
    ProcessorTasklet,
    Tasklet,
)

__all__ = [
    "DONE",
    "DONE_ITEM",
    "MADE_PROGRESS",
    "NO_PROGRESS",
    "Backoff",
    "BarrierAligner",
    "EdgeMetrics",
    "EdgePlan",
    "Exchange",
    "InboundStream",
    "JobMetrics",
    "JobPlan",
    "Link",
    "LoopbackExchange",
    "MemberRuntime",
    "ProcessorMetrics",
    "ProcessorTasklet",
    "Queue",
    "RestoredProcessor",
    "SerializingChannel",
    "SnapshotBarrier",
    "SnapshotCoordinator",
    "SnapshottingTasklet",
    "Tasklet",
    "TaskletOutbox",
    "VertexPlan",
    "WatermarkCoalescer",
    "build_member",
    "plan_job",
    "route_snapshot",
]
