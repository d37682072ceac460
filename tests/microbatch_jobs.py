"""What the micro-batch tests share (no tests here): their job config and a SparkEngine on the
session's local[2] context holding a list of words."""

from __future__ import annotations

from typing import Any

import fault_tolerance_jobs as jobs

from jetspark.core import ExecutionMode, JobConfig, ProcessingGuarantee


def guaranteed(
    mode: ExecutionMode = ExecutionMode.MICRO_BATCH, *, max_restarts: int = 10
) -> JobConfig:
    """Exactly-once in `mode`, with a snapshot (a batch) as often as the sources allow."""
    return JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=3,
        execution_mode=mode,
        max_restarts=max_restarts,
    )


def engine_with_words(
    spark_engine: Any, words: int, *, keys: int = 7, members: int = 2, batch_items: int = 100
) -> Any:
    """A SparkEngine on the session's context whose list "words" holds `words` words drawn
    from `keys` distinct ones."""
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=members, batch_items=batch_items)
    engine.get_list("words").extend(jobs.words(words, keys))
    return engine
