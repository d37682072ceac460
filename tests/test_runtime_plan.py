"""The execution plan: job-wide facts once per job, then per-member builds of any vertex subset."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from jetspark.core import (
    DAG,
    Context,
    JobConfig,
    JobFailedError,
    Outbox,
    Processor,
    ProcessorMetaSupplier,
    ProcessorSupplier,
)
from jetspark.core.context import ProcessorMetaSupplierContext, ProcessorSupplierContext
from jetspark.core.runtime import LoopbackExchange, build_member, plan_job
from jetspark.edges import between


class Noop(Processor):
    def init(self, outbox: Outbox, context: Context) -> None:
        self.context = context


class CountingSupplier(ProcessorSupplier):
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def init(self, context: ProcessorSupplierContext) -> None:
        self.calls.append(("supplier.init", context.member_index, context.local_parallelism))

    def get(self, count: int) -> list[Processor]:
        self.calls.append(("supplier.get", count))
        return [Noop() for _ in range(count)]

    def close(self, error: BaseException | None) -> None:
        self.calls.append(("supplier.close", error))


class CountingMeta(ProcessorMetaSupplier):
    def __init__(self, calls: list[Any], preferred: int = -1, fail_in: str = "") -> None:
        self.calls = calls
        self.preferred = preferred
        self.fail_in = fail_in

    def preferred_local_parallelism(self) -> int:
        return self.preferred

    def init(self, context: ProcessorMetaSupplierContext) -> None:
        self.calls.append(("meta.init", context.total_parallelism, context.member_count))
        if self.fail_in == "init":
            raise RuntimeError("meta init failed")

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], Any]:
        self.calls.append(("meta.get", list(member_indexes)))
        return lambda member: CountingSupplier(self.calls)

    def close(self, error: BaseException | None) -> None:
        self.calls.append(("meta.close", type(error).__name__ if error else None))


def test_local_parallelism_vertex_then_preferred_then_engine_default() -> None:
    dag = DAG()
    explicit = dag.new_vertex("explicit", Noop, 3)
    preferred = dag.new_vertex("preferred", CountingMeta([], preferred=2))
    default = dag.new_vertex("default", Noop)
    dag.edge(between(explicit, preferred)).edge(between(preferred, default))
    plan = plan_job(dag, JobConfig(), 2, 5)
    assert {n: v.local_parallelism for n, v in plan.vertices.items()} == {
        "explicit": 3,
        "preferred": 2,
        "default": 5,
    }
    assert plan.vertices["preferred"].total_parallelism == 4


def test_meta_supplier_runs_once_per_job_and_suppliers_once_per_member() -> None:
    calls: list[Any] = []
    dag = DAG()
    dag.new_vertex("v", CountingMeta(calls), 2)
    plan = plan_job(dag, JobConfig(), 3, 1)
    assert calls == [("meta.init", 6, 3), ("meta.get", [0, 1, 2])]
    calls.clear()
    runtime = build_member(plan, [1, 2], exchange=LoopbackExchange())
    assert calls == [
        ("supplier.init", 1, 2),
        ("supplier.get", 2),
        ("supplier.init", 2, 2),
        ("supplier.get", 2),
    ]
    contexts = [t.context for t in runtime.tasklets]  # type: ignore[attr-defined]
    assert [
        (c.member_index, c.local_processor_index, c.global_processor_index) for c in contexts
    ] == [
        (1, 0, 2),
        (1, 1, 3),
        (2, 0, 4),
        (2, 1, 5),
    ]
    calls.clear()
    runtime.run()
    assert calls == [("supplier.close", None)] * 2
    plan.close(None)
    assert calls[-1] == ("meta.close", None)


def test_a_failing_meta_supplier_fails_the_plan_and_closes_the_started_ones() -> None:
    calls: list[Any] = []
    dag = DAG()
    first = dag.new_vertex("first", CountingMeta(calls))
    second = dag.new_vertex("second", CountingMeta(calls, fail_in="init"))
    dag.edge(between(first, second))
    with pytest.raises(JobFailedError) as caught:
        plan_job(dag, JobConfig(), 1, 1)
    error = caught.value
    assert (error.vertex_name, error.processor_index, error.callback) == (
        "second",
        None,
        "ProcessorMetaSupplier.init",
    )
    assert isinstance(error.__cause__, RuntimeError)
    assert [c for c in calls if c[0] == "meta.close"] == [("meta.close", "JobFailedError")] * 2


def test_all_to_one_target_is_chosen_once_per_job_from_the_seed() -> None:
    dag = DAG()
    a = dag.new_vertex("a", Noop)
    b = dag.new_vertex("b", Noop)
    dag.edge(between(a, b).distributed().all_to_one())
    chosen = {
        plan_job(dag, JobConfig(), 2, 2, seed=7).edges[0].all_to_one_partition for _ in range(3)
    }
    assert len(chosen) == 1
    assert 0 <= chosen.pop() < 271


def test_a_subset_build_needs_an_exchange_for_links_leaving_it() -> None:
    dag = DAG()
    a = dag.new_vertex("a", Noop)
    b = dag.new_vertex("b", Noop)
    dag.edge(between(a, b))
    plan = plan_job(dag, JobConfig(), 1, 1)
    with pytest.raises(ValueError, match="needs an exchange"):
        build_member(plan, [0], ["a"])
    with pytest.raises(ValueError, match="no such vertices"):
        build_member(plan, [0], ["nope"])
    with pytest.raises(ValueError, match="members must be"):
        build_member(plan, [1])
