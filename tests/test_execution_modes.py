"""One ExecutionMode on every engine (#45): the README's engines table and the enum agree
(STAGES is a mode one can ask for), and `job.execution_mode` says how a job ran on LocalEngine
and on SparkEngine alike."""

from __future__ import annotations

from typing import Any

import pytest

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DagValidationError,
    ExecutionMode,
    JobConfig,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.suppliers import unbounded
from jetspark.edges import between
from jetspark.processors import read_list_p, write_list_p


def copy_dag(source: Any = None) -> DAG:
    dag = DAG("copy")
    numbers = dag.new_vertex("numbers", source or read_list_p("numbers"))
    dag.edge(between(numbers, dag.new_vertex("sink", write_list_p("out"))))
    return dag


class Endless(AbstractProcessor):
    def complete(self) -> bool:
        return False


def test_a_local_engine_job_runs_in_jets_own_model_continuous() -> None:
    engine = LocalEngine()
    engine.get_list("numbers").extend(range(5))
    job = engine.new_job(copy_dag(), JobConfig(execution_mode=ExecutionMode.STAGES))
    job.join(60)
    assert job.execution_mode is ExecutionMode.CONTINUOUS
    assert sorted(engine.get_list("out")) == list(range(5))


@pytest.mark.spark
def test_stages_asked_runs_a_bounded_job_as_rdd_stages(spark_engine: Any) -> None:
    spark_engine.get_list("numbers").extend(range(5))
    job = spark_engine.new_job(copy_dag(), JobConfig(execution_mode=ExecutionMode.STAGES))
    job.join(120)
    assert job.execution_mode is ExecutionMode.STAGES
    assert job.metrics.execution_mode == ExecutionMode.STAGES.value
    assert sorted(spark_engine.get_list("out")) == list(range(5))


@pytest.mark.spark
def test_stages_asked_with_a_guarantee_or_an_endless_source_is_refused(spark_engine: Any) -> None:
    guaranteed = JobConfig(
        execution_mode=ExecutionMode.STAGES,
        processing_guarantee=ProcessingGuarantee.AT_LEAST_ONCE,
    )
    with pytest.raises(ValueError, match="STAGES runs the job as RDD stages, which take no"):
        spark_engine.new_job(copy_dag(), guaranteed)
    stages = JobConfig(execution_mode=ExecutionMode.STAGES)
    with pytest.raises(DagValidationError, match="vertex 'numbers' never completes"):
        spark_engine.new_job(copy_dag(unbounded(Endless)), stages)
