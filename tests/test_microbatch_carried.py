"""What a micro-batch takes on from the previous batch of its run, where keyed state moves
between processors at every restore: the watermarks its coalescers carry (kept as they ended,
except on a queue whose upstream restores keyed entries another processor saved before passing
a watermark over them: the stock-exchange job at 3 members on 2 task slots lost such frames),
and which processors are restored as completed (never one taking over keyed entries of a
processor still running: at a stream's end the latency benchmark lost such frames)."""

from __future__ import annotations

from jetspark.core import DAG, JobConfig
from jetspark.core.runtime.coalescer import CarriedWatermarks
from jetspark.core.runtime.plan import JobPlan, plan_job
from jetspark.core.runtime.restore import completed_without_state
from jetspark.core.serialization import encode_batch
from jetspark.core.snapshot_keys import broadcast_key, snapshot_targets
from jetspark.core.snapshot_store import ProcessorSnapshot, Snapshot
from jetspark.core.spark.microbatch.carried import carried_watermarks, queue_senders
from jetspark.core.spark.task_restore import (
    SavedRouting,
    restoring_members,
    restoring_processors,
    taking_over,
)
from jetspark.edges import between
from jetspark.partitioning import PartitionAssignment
from jetspark.processors import noop_p

MEMBERS = 3


def frames_then_windows() -> JobPlan:
    """'frames' (one processor per member) -> distributed partitioned -> 'windows'."""
    dag = DAG("carried")
    frames = dag.new_vertex("frames", noop_p).local_parallelism(1)
    windows = dag.new_vertex("windows", noop_p).local_parallelism(1)
    dag.edge(between(frames, windows).distributed().partitioned(lambda item: item))
    return plan_job(dag, JobConfig(), MEMBERS, 1)


def ended_at(*watermarks: float) -> CarriedWatermarks:
    """A coalescer that ended the batch with these queue watermarks, none idle."""
    return (watermarks, (False,) * len(watermarks), min(watermarks), False)


def windows_ended(plan: JobPlan) -> dict[tuple[str, int], CarriedWatermarks]:
    """Frames processor 0 lags: it sent 266,300; processors 1 and 2 sent 319,600."""
    return {("windows", index): ended_at(266_300, 319_600, 319_600) for index in range(MEMBERS)}


def test_each_queue_belongs_to_the_upstream_processor_the_runtime_wires_to_it() -> None:
    plan = frames_then_windows()
    assert queue_senders(plan, ("windows", 1)) == [("frames", 0), ("frames", 1), ("frames", 2)]
    assert queue_senders(plan, ("frames", 0)) == []


def test_watermarks_end_as_they_were_when_every_processor_restores_its_own_entries() -> None:
    plan = frames_then_windows()
    own = {("frames", index): frozenset({index}) for index in range(MEMBERS)}
    assert carried_watermarks(plan, windows_ended(plan), own) == windows_ended(plan)


def test_a_processor_restoring_entries_of_a_lagging_one_carries_the_lagging_watermark() -> None:
    """Processor 1 takes on frames processor 0 saved above 266,300: every downstream waits for
    a new watermark from processor 1, sent after those frames, instead of passing 266,300."""
    plan = frames_then_windows()
    moved = {("frames", 0): frozenset({0, 1}), ("frames", 1): frozenset({1})}
    carried = carried_watermarks(plan, windows_ended(plan), moved)
    for index in range(MEMBERS):
        watermarks, idle, last_emitted, _ = carried[("windows", index)]
        assert watermarks == (266_300, 266_300, 319_600)
        assert idle == (False, False, False)
        assert last_emitted == 266_300


def test_the_processors_that_restore_a_saved_state_are_its_keys_owners() -> None:
    plan = frames_then_windows()
    assignment = PartitionAssignment(MEMBERS, 1, plan.config.partition_count)
    keys = ["AAPL", "GOOG", "HZC", "JET", "SPRK"]
    owners = frozenset(t for key in keys for t in snapshot_targets(key, assignment))
    states = {
        ("frames", 0): ProcessorSnapshot(encode_batch([(key, 1) for key in keys])),
        ("frames", 1): ProcessorSnapshot(encode_batch([(broadcast_key("offset"), 7)])),
        ("frames", 2): ProcessorSnapshot(encode_batch([])),
    }
    routing = restoring_processors(plan, states)
    assert routing == {
        ("frames", 0): SavedRouting(owners, broadcast=False),
        ("frames", 1): SavedRouting(frozenset(), broadcast=True),
        ("frames", 2): SavedRouting(frozenset(), broadcast=False),
    }
    assert restoring_members(plan, {("frames", 0): routing[("frames", 0)]}) == owners
    assert restoring_members(plan, routing) == frozenset(range(MEMBERS))  # a broadcast entry
    assert restoring_members(plan, {("frames", 2): routing[("frames", 2)]}) == frozenset()


def test_a_completed_processor_taking_over_keys_of_a_running_one_runs_again() -> None:
    """At a stream's end one member's chain may complete a batch before another's: the keyed
    state the running one saved and the completed one owns must be processed, not dropped."""
    plan = frames_then_windows()
    snapshot = Snapshot(
        snapshot_id=4,
        member_count=MEMBERS,
        local_parallelism={"frames": 1, "windows": 1},
        processors={
            ("frames", 0): ProcessorSnapshot(b"", completed=True),
            ("frames", 1): ProcessorSnapshot(b"", completed=False),
            ("frames", 2): ProcessorSnapshot(b"", completed=True),
            **{("windows", i): ProcessorSnapshot(b"", completed=False) for i in range(MEMBERS)},
        },
    )
    keyed = {("frames", 1): frozenset({0, 1}), ("frames", 2): frozenset({1})}
    assert taking_over(snapshot, keyed) == {("frames", 0)}
    spec = restore_spec_flags(snapshot, plan, keyed)
    assert spec[("frames", 0)] is False and spec[("frames", 2)] is True
    assert restore_spec_flags(snapshot, plan, None)[("frames", 0)] is True


def restore_spec_flags(
    snapshot: Snapshot, plan: JobPlan, keyed: dict[tuple[str, int], frozenset[int]] | None
) -> dict[tuple[str, int], bool]:
    """Which processors the driver restores as completed, knowing `keyed` or not."""
    moved = taking_over(snapshot, keyed) if keyed is not None else frozenset()
    return completed_without_state(snapshot, plan, moved)
