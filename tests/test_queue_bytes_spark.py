"""Issue 45 on SparkEngine: 80 items of 20 MB through a local edge keep the member's Python worker
within the byte bounds of its queues (`spark.jetspark.queue.maxSize`), and every item arrives
intact; the setting is read from the context's configuration."""

from __future__ import annotations

from typing import Any

import pytest
from big_items import big_items_dag, check_report
from spark_conf import configured

from jetspark.core import ExecutionMode, JobConfig
from jetspark.core.runtime.queue import DEFAULT_QUEUE_BYTES
from jetspark.core.spark.continuous.settings import QUEUE_MAX_SIZE

pytestmark = pytest.mark.spark


@pytest.fixture
def engine(spark_engine: Any) -> Any:
    from jetspark.core.spark import SparkEngine

    return SparkEngine(spark_engine.context, members=1)


@pytest.mark.parametrize("mode", [ExecutionMode.CONTINUOUS, ExecutionMode.STAGES])
def test_eighty_items_of_twenty_megabytes_keep_the_workers_peak_rss_within_the_bounds(
    engine: Any, mode: ExecutionMode
) -> None:
    report = f"big-items-{mode.value}"
    job = engine.new_job(big_items_dag(report), JobConfig(execution_mode=mode))
    job.join(240)
    assert job.execution_mode is mode
    check_report(engine.get_list(report), DEFAULT_QUEUE_BYTES)


def test_the_byte_bound_is_read_from_the_spark_configuration(engine: Any) -> None:
    assert engine.queue_bytes == DEFAULT_QUEUE_BYTES
    with configured(engine.context, {QUEUE_MAX_SIZE: "1m"}):
        assert engine.queue_bytes == 1 << 20
    with (
        configured(engine.context, {QUEUE_MAX_SIZE: "0"}),
        pytest.raises(ValueError, match=QUEUE_MAX_SIZE),
    ):
        engine.queue_bytes  # noqa: B018
