"""Job-level configuration: the processing guarantee, snapshots, watermark retention and how
the job runs on Spark."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal


class ProcessingGuarantee(enum.Enum):
    """How a job behaves after a failure (manual §3.5): none, at-least-once, exactly-once."""

    NONE = "none"
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


class ExecutionMode(enum.Enum):
    """How a job runs: asked in `JobConfig.execution_mode`, told by `job.execution_mode` (never
    AUTO there: what AUTO chose). LocalEngine runs every job in Jet's own model, in-process: its
    jobs say CONTINUOUS, whatever was asked.

    STAGES: RDD stages, one `mapPartitions` per group of local edges, a shuffle per distributed
    edge (bounded jobs without a processing guarantee). CONTINUOUS: Jet's own model, every
    member a long-running task of one Spark barrier stage, records flowing between members as
    they are produced, snapshots in-band. MICRO_BATCH: one Spark job per snapshot interval
    (needs a processing guarantee). AUTO: CONTINUOUS for unbounded jobs and jobs with a
    guarantee when the cluster has a task slot per member, else MICRO_BATCH (with a guarantee)
    or STAGES; jobs reading a Spark stream (`read_stream_p`) run as micro-batches; bounded jobs
    without a guarantee run as STAGES.
    """

    AUTO = "auto"
    STAGES = "stages"
    CONTINUOUS = "continuous"
    MICRO_BATCH = "micro_batch"


@dataclass
class JobConfig:
    """Settings of one job; the defaults match Jet's.

    `max_watermark_retain_millis` < 0 disables retention (Jet's default); `slow_callback_millis`
    makes the runtime warn when a cooperative callback runs longer (None: off).
    `ignore_state_of_removed_vertices` lets `restore_from` drop the state a snapshot holds for
    vertices the DAG no longer has (a job upgrade); without it such a snapshot is refused.
    `renamed_vertices` maps a vertex's new name to its name in the snapshot `restore_from`
    (`{"new": "old"}`), so a renamed vertex continues from its state.
    `state_on_routing_change` lets `restore_from` restore a vertex with keyed state whose
    inbound edge routes otherwise than when the snapshot was taken: "rekey" moves each key's
    state to the processor that receives the key now, "drop" restores none of it; without it
    (None) such a snapshot is refused.
    `state_on_definition_change="drop"` lets `restore_from` restore a snapshot into a DAG that
    changed the window, aggregate operation, key function or processor class of a vertex with
    state: that vertex starts empty (its state is not restored); without it (None) such a
    snapshot is refused, naming the vertex and both definitions.
    `execution_mode` chooses how SparkEngine runs the job; `max_restarts` bounds how often a
    continuous job restarts from its last snapshot by itself after losing a member.
    """

    name: str | None = None
    processing_guarantee: ProcessingGuarantee = ProcessingGuarantee.NONE
    snapshot_interval_millis: int = 10_000
    max_watermark_retain_millis: int = -1
    slow_callback_millis: float | None = None
    partition_count: int = 271
    execution_mode: ExecutionMode = ExecutionMode.AUTO
    max_restarts: int = 10
    ignore_state_of_removed_vertices: bool = False
    renamed_vertices: Mapping[str, str] = field(default_factory=dict)
    state_on_routing_change: Literal["rekey", "drop"] | None = None
    state_on_definition_change: Literal["drop"] | None = None

    def __post_init__(self) -> None:
        if self.name is not None and not isinstance(self.name, str):
            raise TypeError(f"name must be a str or None, got {self.name!r}")
        for setting in (
            "snapshot_interval_millis",
            "max_watermark_retain_millis",
            "partition_count",
            "max_restarts",
        ):
            _require_int(setting, getattr(self, setting))
        slow = self.slow_callback_millis
        if slow is not None and (
            isinstance(slow, bool) or not isinstance(slow, (int, float)) or not slow > 0
        ):
            raise TypeError(f"slow_callback_millis must be a positive number or None, got {slow!r}")
        if not isinstance(self.ignore_state_of_removed_vertices, bool):
            raise TypeError(
                "ignore_state_of_removed_vertices must be a bool, "
                f"got {self.ignore_state_of_removed_vertices!r}"
            )
        _check_renames(self.renamed_vertices)
        if self.state_on_routing_change not in (None, "rekey", "drop"):
            raise ValueError(
                'state_on_routing_change must be "rekey", "drop" or None, '
                f"got {self.state_on_routing_change!r}"
            )
        if self.state_on_definition_change not in (None, "drop"):
            raise ValueError(
                'state_on_definition_change must be "drop" or None, '
                f"got {self.state_on_definition_change!r}"
            )
        if not isinstance(self.processing_guarantee, ProcessingGuarantee):
            raise TypeError(
                "processing_guarantee must be a ProcessingGuarantee, "
                f"got {self.processing_guarantee!r}"
            )
        if not isinstance(self.execution_mode, ExecutionMode):
            raise TypeError(f"execution_mode must be an ExecutionMode, got {self.execution_mode!r}")
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {self.max_restarts}")
        if self.snapshot_interval_millis <= 0:
            raise ValueError(
                f"snapshot_interval_millis must be positive, got {self.snapshot_interval_millis}"
            )
        if self.partition_count <= 0:
            raise ValueError(f"partition_count must be positive, got {self.partition_count}")


def _check_renames(renamed: object) -> None:
    """TypeError unless `renamed` maps str to str; ValueError when two new names share an old
    one (one vertex's state cannot continue in two)."""
    if not isinstance(renamed, Mapping) or not all(
        isinstance(name, str) for pair in renamed.items() for name in pair
    ):
        raise TypeError(
            'renamed_vertices must map new vertex names to old ones ({"new": "old"}), '
            f"got {renamed!r}"
        )
    new_names: dict[str, list[str]] = {}
    for new, old in renamed.items():
        new_names.setdefault(old, []).append(new)
    for old, news in new_names.items():
        if len(news) > 1:
            names = " and ".join(repr(name) for name in sorted(news))
            raise ValueError(
                f"renamed_vertices gives vertex {old!r} two new names, {names}: "
                "a vertex's state continues in one vertex only"
            )


def _require_int(setting: str, value: object) -> None:
    if type(value) is not int:
        raise TypeError(f"{setting} must be an int, got {type(value).__name__} {value!r}")
