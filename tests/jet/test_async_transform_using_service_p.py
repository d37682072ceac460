"""Port of Jet 4 `com.hazelcast.jet.impl.processor.AsyncTransformUsingServicePTest` (ordered and
unordered), `AsyncTransformUsingServiceBatchedPTest`, and the stress tests of
`AsyncTransformUsingServiceP_IntegrationTest` and
`AsyncTransformUsingServiceBatchP_IntegrationTest`.

Deliberate differences:

- Jet's processor queues a watermark behind the items in flight and keeps taking items; here
  the runtime forwards a watermark once `try_process_watermark` returns True and delivers no
  items meanwhile, so the processor returns False until the items before the watermark have
  their results emitted. `test_wmNotCountedToParallelOps` and `test_watermarksConflated`
  check that instead (a watermark takes no slot of `max_concurrent_ops`; watermarks that wait
  are coalesced by the runtime, not by the processor).
- Jet's futures "completed in a separate thread" are spawned and the harness spins until they
  complete; here the processor is polled until the results come, with a deadline far longer
  than they take (the harness's call budget would make the test depend on thread scheduling).
- `when_returnedListContainsNull_then_error`: jetspark's batched function returns a list of
  results, None dropping an item (Jet's flattened traverser fails on a null); the port checks
  that, and that a list of the wrong length fails.
- The integration tests use the DAG API on LocalEngine: a journal source, inserted watermarks
  (`limiting_lag(10)`, one every 10 ms of event time, as Jet's throttling frame), the
  asynchronous vertex at local parallelism 2 with short queues, a shared ThreadPoolExecutor(8)
  as the service, each call sleeping 0-4 ms. Jet's graceful restarts become `job.restart()`,
  which restores the last snapshot: its output is a rolling count per result, which must
  reach exactly 1 for every result (a list sink would repeat what followed the snapshot).
"""

from __future__ import annotations

import concurrent.futures
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fault_tolerance_jobs import EXACTLY_ONCE, config, engine
from test_processors_helpers import verify
from test_processors_service import FOO, completed, member, wait_until

from jetspark.core import DAG, JobCancelledError
from jetspark.core.test_support import ALL_AT_ONCE
from jetspark.core.traversers import traverse_items, traverse_iterable
from jetspark.core.watermark import Watermark
from jetspark.edges import EdgeConfig, between
from jetspark.processors import (
    ServiceFactories,
    flat_map_using_service_async_p,
    insert_watermarks_p,
    map_using_service_async_batched_p,
    read_journal_p,
    stream_journal_p,
    whole_item,
    write_list_p,
    write_map_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.rolling import rolling_aggregate_p
from jetspark.processors.service import DEFAULT_MAX_CONCURRENT_OPS
from jetspark.processors.watermark_policies import emit_by_min_step, limiting_lag

pytestmark = pytest.mark.timeout(120)

NUM_ITEMS = 2_000
"""Items of the stress test without restarts (Jet: 10,000)."""
RESTARTED_ITEMS = 1_000
"""Items of the stress test with restarts, where each watermark waits for the items before it
and each snapshot for the backlog before its barrier."""
ORDERED = pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])


def wm(timestamp: int) -> Watermark:
    return Watermark(timestamp)


def supplier(
    ordered: bool, flat_map_fn: Callable[[Any, Any], Any], max_concurrent_ops: int = 4
) -> Any:
    """Jet's `getSupplier`: a non-shared "foo" service, Jet's default concurrency."""
    return flat_map_using_service_async_p(
        FOO, flat_map_fn, max_concurrent_ops, preserve_order=ordered, key_fn=whole_item
    )


def batched(batch_fn: Callable[[Any, list[Any]], Any]) -> Any:
    """Jet's batched `getSupplier`: batches of up to 128, Jet's default concurrency."""
    return map_using_service_async_batched_p(FOO, 128, batch_fn, DEFAULT_MAX_CONCURRENT_OPS)


def in_thread(pool: concurrent.futures.ThreadPoolExecutor, fn: Callable[[], Any]) -> Any:
    """A future completed by a thread of `pool` with `fn()` (Jet's `spawn(() -> f.complete())`)."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    pool.submit(lambda: future.set_result(fn()))
    return future


def results_up_to(driven: Any, watermark: Watermark) -> list[Any]:
    """Offers `watermark` until the processor lets it pass; the results emitted meanwhile."""
    out: list[Any] = []

    def passed() -> bool:
        done = driven.processor.try_process_watermark(watermark)
        out.extend(driven.drain())
        return bool(done)

    wait_until(passed, f"{watermark} to pass")
    return out


# ------------------------------------------------------- AsyncTransformUsingServicePTest


@ORDERED
def test_completed_futures(ordered):
    """`test_completedFutures`."""
    expected = ["a-1", "a-2", "b-1", "b-2"]
    verify(
        supplier(ordered, lambda ctx, item: completed(traverse_items(f"{item}-1", f"{item}-2")))
    ).input(["a", "b"]).output_checker(
        lambda _, actual: (
            actual == expected or (not ordered and actual == ["b-1", "b-2", "a-1", "a-2"])
        )
    ).expect_output(["<see code>"])


@ORDERED
def test_futures_completed_in_separate_thread(ordered):
    """`test_futuresCompletedInSeparateThread`, polled (module docstring)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:

        def both(ctx: Any, item: str) -> Any:
            return in_thread(pool, lambda: traverse_items(f"{item}-1", f"{item}-2"))

        with member(supplier(ordered, both)) as m:
            driven = m.new()
            driven.process(["a", "b"])
            actual = results_up_to(driven, wm(10))
    assert actual == ["a-1", "a-2", "b-1", "b-2"] or (
        not ordered and actual == ["b-1", "b-2", "a-1", "a-2"]
    )


@ORDERED
def test_forward_watermarks_without_items(ordered):
    """`test_forwardWatermarksWithoutItems`."""

    def unsupported(ctx: Any, item: Any) -> Any:
        raise NotImplementedError

    verify(supplier(ordered, unsupported)).input([wm(10)]).expect_output([wm(10)])


@ORDERED
def test_when_map_fn_returns_null_future_then_filtered_out(ordered):
    """`when_mapFnReturnsNullFuture_then_filteredOut`."""
    verify(supplier(ordered, lambda ctx, item: None)).input(["a", "b"]).expect_output([])


@ORDERED
def test_when_future_returns_null_traverser_then_result_filtered_out(ordered):
    """`when_futureReturnsNullTraverser_then_resultFilteredOut` (Jet's test returns a null
    future; a future completed with None is checked too)."""
    verify(supplier(ordered, lambda ctx, item: None)).input([wm(10)]).expect_output([wm(10)])
    verify(supplier(ordered, lambda ctx, item: completed(None))).input(["a", wm(10)]).expect_output(
        [wm(10)]
    )


@ORDERED
def test_when_future_completed_exceptionally_then_job_fails(ordered):
    """`when_futureCompletedExceptionally_then_jobFails`."""
    failed: concurrent.futures.Future[Any] = concurrent.futures.Future()
    failed.set_exception(RuntimeError("test exception"))
    with pytest.raises(RuntimeError, match="test exception"):
        verify(supplier(ordered, lambda ctx, item: failed)).input(["a"]).expect_output([])


@contextmanager
def foo_in_flight(ordered: bool) -> Iterator[tuple[Any, concurrent.futures.Future[Any]]]:
    """A processor with `max_concurrent_ops=2` whose call for "foo" is in flight: the processor
    (driven by hand) and the future, which the test completes (Jet's never-completed one)."""
    pending: list[concurrent.futures.Future[Any]] = []

    def manual(ctx: Any, item: Any) -> Any:
        pending.append(concurrent.futures.Future())
        return pending[-1]

    with member(supplier(ordered, manual, max_concurrent_ops=2)) as m:
        driven = m.new(capacity=128)
        driven.process(["foo"])
        assert driven.inbox.is_empty(), "inbox not empty"
        yield driven, pending[0]


@ORDERED
def test_wm_not_counted_to_parallel_ops(ordered):
    """`test_wmNotCountedToParallelOps` (module docstring): the watermark waits for "foo", and
    once it passed two items are in flight again with `max_concurrent_ops=2`."""
    with foo_in_flight(ordered) as (driven, foo):
        processor = driven.processor
        assert not processor.try_process_watermark(wm(0)), "wm passed an item in flight"
        foo.set_result(None)
        assert processor.try_process_watermark(wm(0)), "wm rejected"
        driven.process(["bar", "baz"])
        assert driven.inbox.is_empty(), "2nd item rejected even though max parallel ops is 2"


@ORDERED
def test_watermarks_conflated(ordered):
    """`test_watermarksConflated` (module docstring): each watermark waits while "foo" is in
    flight, and every one passes once it completed."""
    with foo_in_flight(ordered) as (driven, foo):
        processor = driven.processor
        assert not any(processor.try_process_watermark(wm(t)) for t in (0, 1, 2))
        foo.set_result(None)
        assert all(processor.try_process_watermark(wm(t)) for t in (0, 1, 2)), "wm rejected"


# ------------------------------------------------ AsyncTransformUsingServiceBatchedPTest


def test_batched_completed_futures():
    """`AsyncTransformUsingServiceBatchedPTest.test_completedFutures`."""
    verify(batched(lambda ctx, items: completed([f"{item}-1" for item in items]))).input(
        ["a", "b"]
    ).expect_output(["a-1", "b-1"])


def test_batched_futures_completed_in_separate_thread():
    """`AsyncTransformUsingServiceBatchedPTest.test_futuresCompletedInSeparateThread`,
    polled."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:

        def each(ctx: Any, items: list[str]) -> Any:
            return in_thread(pool, lambda: [f"{item}-1" for item in items])

        with member(batched(each)) as m:
            driven = m.new()
            driven.process(["a", "b"])
            assert results_up_to(driven, wm(10)) == ["a-1", "b-1"]


def test_batched_forward_watermarks_without_items():
    """`AsyncTransformUsingServiceBatchedPTest.test_forwardWatermarksWithoutItems`."""

    def unsupported(ctx: Any, items: list[Any]) -> Any:
        raise NotImplementedError

    verify(batched(unsupported)).input([wm(10)]).expect_output([wm(10)])


def test_batched_when_map_fn_returns_null_future_then_result_filtered_out():
    """`AsyncTransformUsingServiceBatchedPTest.when_mapFnReturnsNullFuture_then_...`."""
    verify(batched(lambda ctx, items: None)).input(["a", "b"]).expect_output([])
    verify(batched(lambda ctx, items: None)).input([wm(10)]).expect_output([wm(10)])


def test_batched_when_returned_list_contains_none_then_those_items_are_dropped():
    """`when_returnedListContainsNull_then_error` (module docstring)."""
    verify(batched(lambda ctx, items: completed([None for _ in items]))).input(
        ["a", "b"]
    ).expect_output([])
    with pytest.raises(ValueError, match="returned 1 results for a batch of 2 items"):
        verify(batched(lambda ctx, items: completed(["x"]))).modes(ALL_AT_ONCE).input(
            ["a", "b"]
        ).expect_output([])


def test_batched_when_future_completed_exceptionally_then_job_fails():
    """`AsyncTransformUsingServiceBatchedPTest.when_futureCompletedExceptionally_...`."""
    failed: concurrent.futures.Future[Any] = concurrent.futures.Future()
    failed.set_exception(RuntimeError("test exception"))
    with pytest.raises(RuntimeError, match="test exception"):
        verify(batched(lambda ctx, items: failed)).input(["a"]).expect_output([])


# ---------------------------------------------- AsyncTransformUsingServiceP_IntegrationTest


def executor_service() -> Any:
    """Jet's `sharedService(pctx -> Executors.newFixedThreadPool(8), ExecutorService::shutdown)`."""
    return ServiceFactories.shared_service(
        lambda context: concurrent.futures.ThreadPoolExecutor(8), lambda pool: pool.shutdown()
    )


def after_random_latency(pool: concurrent.futures.ThreadPoolExecutor, fn: Callable[[], Any]) -> Any:
    """Jet's `transformNotPartitionedFn`: `fn()` on the pool after 0-4 ms (a call's latency)."""

    def call() -> Any:
        time.sleep(random.randrange(5) / 1000)
        return fn()

    return pool.submit(call)


def five_results(pool: concurrent.futures.ThreadPoolExecutor, i: int) -> Any:
    return after_random_latency(pool, lambda: traverse_iterable([f"{i}-{k}" for k in range(1, 6)]))


def five_results_each(pool: concurrent.futures.ThreadPoolExecutor, items: list[int]) -> Any:
    return after_random_latency(pool, lambda: [f"{i}-1" for i in items])


SHORT_QUEUE_IN = EdgeConfig(queue_size=128)
"""Jet's queue into the mapper: the barrier from the source is not held back for long."""
SHORT_QUEUE_OUT = EdgeConfig(queue_size=10)
"""Jet's queue out of the mapper: the sink's backpressure is felt."""


def stress_dag(vertex: Any, source: Any, sink: Callable[[DAG, Any], None]) -> DAG:
    """source -> watermarks -> the async vertex (local parallelism 2) -> `sink(dag, mapper)`."""
    dag = DAG()
    read = dag.new_vertex("source", source)
    watermarks = dag.new_vertex(
        "watermarks", insert_watermarks_p(whole_item, limiting_lag(10), emit_by_min_step(10))
    )
    mapper = dag.new_vertex("map", vertex).local_parallelism(2)
    dag.edge(between(read, watermarks))
    dag.edge(between(watermarks, mapper).set_config(SHORT_QUEUE_IN))
    sink(dag, mapper)
    return dag


def to_list(dag: DAG, mapper: Any) -> None:
    """The results into list "sink"."""
    out = dag.new_vertex("sink", write_list_p("sink"))
    dag.edge(between(mapper, out).set_config(SHORT_QUEUE_OUT))


def to_counts(dag: DAG, mapper: Any) -> None:
    """A rolling count per result into map "counts"."""
    count = dag.new_vertex(
        "count", rolling_aggregate_p(whole_item, counting(), lambda item, key, n: (key, n))
    )
    out = dag.new_vertex("sink", write_map_p("counts"))
    dag.edge(
        between(mapper, count).distributed().partitioned(whole_item).set_config(SHORT_QUEUE_OUT)
    )
    dag.edge(between(count, out))


@pytest.mark.parametrize("kind", ["ordered", "unordered", "batched"])
def test_stress_test_no_restart(kind):
    """`stressTest_noRestart`, of both integration tests; snapshots are taken meanwhile."""
    results = 1 if kind == "batched" else 5
    if kind == "batched":
        vertex = map_using_service_async_batched_p(
            executor_service(), 128, five_results_each, DEFAULT_MAX_CONCURRENT_OPS
        )
    else:
        vertex = flat_map_using_service_async_p(
            executor_service(), five_results, preserve_order=kind == "ordered"
        )
    local = engine()
    local.get_list("items").extend(range(NUM_ITEMS))
    dag = stress_dag(vertex, read_journal_p("items"), to_list)
    local.new_job(dag, config(EXACTLY_ONCE)).join(100)
    expected = sorted(f"{i}-{k}" for i in range(NUM_ITEMS) for k in range(1, results + 1))
    assert sorted(local.get_list("sink")) == expected


@ORDERED
def test_stress_test_with_restart(ordered):
    """`stressTest_withRestart_graceful` (module docstring): restarted 3 times, each time after
    more results came."""
    local = engine()
    local.get_list("items").extend(range(RESTARTED_ITEMS))
    vertex = flat_map_using_service_async_p(
        executor_service(), five_results, preserve_order=ordered
    )
    job = local.new_job(stress_dag(vertex, stream_journal_p("items"), to_counts), config())
    counts = local.get_map("counts")
    total = RESTARTED_ITEMS * 5
    for restart in range(1, 4):
        wait_until(lambda restart=restart: len(counts) >= total * restart // 4, "more results")
        job = job.restart()
    wait_until(lambda: len(counts) == total, "every result")
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(30)
    assert dict(counts) == {f"{i}-{k}": 1 for i in range(RESTARTED_ITEMS) for k in range(1, 6)}
