"""Services (processors/service.py): ServiceFactory and ServiceFactories, the synchronous
`*_using_service_p` processors and the asynchronous ones.

The asynchronous processors are driven by hand where timing matters: the services here return
futures that a test completes when it says so (`ManualService`), so which results are ready at
each callback is fixed. Coroutines run on the vertex's event-loop thread; a test waiting for
their results polls with a deadline far longer than they take, so only a hang can fail it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from fault_tolerance_jobs import EXACTLY_ONCE, config, engine
from test_processors_helpers import verify

from jetspark.core import DAG, JobCancelledError, JobFailedError, LocalEngine
from jetspark.core.context import ProcessorMetaSupplierContext, ProcessorSupplierContext
from jetspark.core.processor import Processor
from jetspark.core.suppliers import ProcessorMetaSupplier
from jetspark.core.test_support import (
    ALL_AT_ONCE,
    ONE_ITEM,
    TestInbox,
    TestOutbox,
    TestProcessorContext,
    TestSupport,
)
from jetspark.core.traversers import traverse_items
from jetspark.core.watermark import Watermark
from jetspark.edges import between
from jetspark.processors import (
    ContextFactory,
    ServiceFactories,
    ServiceFactory,
    filter_using_service_p,
    flat_map_using_service_async_p,
    flat_map_using_service_p,
    map_using_service_async_batched_p,
    map_using_service_async_p,
    map_using_service_p,
    read_list_p,
    stream_journal_p,
    whole_item,
    write_list_p,
    write_map_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.rolling import rolling_aggregate_p

pytestmark = pytest.mark.timeout(60)

DEADLINE_SECONDS = 20.0
"""How long a test waits for something another thread does (far longer than it takes)."""
FOO = ServiceFactories.non_shared_service(lambda context: "foo")


def completed(value: Any) -> concurrent.futures.Future[Any]:
    """A Future already completed with `value`."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_result(value)
    return future


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Polls `condition` until it holds; fails after DEADLINE_SECONDS."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class ManualService:
    """A service whose calls return futures completed only by the test, recording how many
    calls are under way at once (started, not completed)."""

    def __init__(self) -> None:
        self.started: list[Any] = []
        self.futures: dict[Any, concurrent.futures.Future[Any]] = {}
        self.running = 0
        self.most_running = 0

    def __call__(self, service: Any, item: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.started.append(item)
        self.futures[item] = future  # the latest call for the item
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        return future

    def complete(self, item: Any, result: Any = "<item!>") -> None:
        """Completes the latest call for `item` with `result` (default: `item!`)."""
        self.running -= 1
        self.futures[item].set_result(f"{item}!" if result == "<item!>" else result)

    def fail(self, item: Any, error: Exception) -> None:
        """Completes the latest call for `item` with `error`."""
        self.running -= 1
        self.futures[item].set_exception(error)


class Driven:
    """One processor, initialised with an outbox of its own, its callbacks called by hand."""

    def __init__(self, processor: Processor, vertex: str, capacity: int) -> None:
        self.processor = processor
        self.outbox = TestOutbox(capacity)
        self.context = TestProcessorContext(vertex_name=vertex)
        processor.init(self.outbox, self.context)
        self.inbox = TestInbox()

    def process(self, items: Sequence[Any] = ()) -> list[Any]:
        """Adds `items` to the inbox, calls `process` once; what it emitted."""
        self.inbox.add_all(items)
        self.processor.process(0, self.inbox)
        return self.drain()

    def try_process(self) -> list[Any]:
        assert self.processor.try_process() is True
        return self.drain()

    def drain(self) -> list[Any]:
        out: list[Any] = []
        self.outbox.drain_queue(0, out)
        return out

    def until(self, count: int) -> list[Any]:
        """Calls `try_process` (`process` while the inbox has items) until `count` items came."""
        out: list[Any] = []

        def enough() -> bool:
            out.extend(self.process() if len(self.inbox) else self.try_process())
            return len(out) >= count

        wait_until(enough, f"{count} results")
        return out

    def save(self) -> list[tuple[Any, Any]]:
        """Calls `save_to_snapshot` once, which must finish; the entries."""
        assert self.processor.save_to_snapshot() is True
        entries: list[tuple[Any, Any]] = []
        self.outbox.drain_snapshot_queue(entries)
        return entries


class Member:
    """A vertex's ProcessorSupplier on one member, its lifecycle driven by hand."""

    def __init__(self, meta: ProcessorMetaSupplier, vertex: str) -> None:
        self.vertex = vertex
        shape = {"vertex_name": vertex, "total_parallelism": 1, "local_parallelism": 1}
        meta.init(ProcessorMetaSupplierContext(**shape))
        self.supplier = meta.get([0])(0)
        self.supplier.init(ProcessorSupplierContext(**shape, member_index=0))

    def new(self, capacity: int = 64) -> Driven:
        """A new processor of the vertex, initialised."""
        [processor] = self.supplier.get(1)
        return Driven(processor, self.vertex, capacity)


@contextmanager
def member(meta: ProcessorMetaSupplier, vertex: str = "svc") -> Iterator[Member]:
    """The vertex on one member; its supplier is closed on the way out."""
    one = Member(meta, vertex)
    try:
        yield one
    finally:
        one.supplier.close(None)


def segments_match(expected: list[Any], actual: list[Any]) -> bool:
    """The same watermarks in the same places, and between them the same items in any order."""

    def segments(items: list[Any]) -> list[Any]:
        parts: list[Any] = [[]]
        for item in items:
            if isinstance(item, Watermark):
                parts += [item, []]
            else:
                parts[-1].append(item)
        return [sorted(p, key=repr) if isinstance(p, list) else p for p in parts]

    return segments(expected) == segments(actual)


# ------------------------------------------------------------------------- factories


def test_a_service_factory_is_immutable_and_each_with_method_returns_a_changed_copy():
    def create_context(context):
        return "ctx"

    base = ServiceFactory.with_create_context_fn(create_context)
    full = (
        base.with_create_service_fn(lambda context, ctx: (ctx, context.global_processor_index))
        .with_destroy_service_fn(print)
        .with_destroy_context_fn(print)
        .to_non_cooperative()
    )
    assert base.create_service_fn is None and base.cooperative
    assert full.create_context_fn is create_context and not full.cooperative
    assert full.destroy_service_fn is print and full.destroy_context_fn is print
    with pytest.raises(TypeError, match="create_service_fn must be callable"):
        base.with_create_service_fn("not a function")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"no create_service_fn.*with_create_service_fn"):
        map_using_service_p(base, lambda service, item: item)


def test_processor_factories_refuse_what_they_cannot_use():
    with pytest.raises(TypeError, match="map_using_service_async_p: expected a ServiceFactory"):
        map_using_service_async_p("factory", lambda s, i: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_concurrent_ops must be an int >= 1, got 0"):
        map_using_service_async_p(FOO, lambda s, i: None, max_concurrent_ops=0)
    with pytest.raises(ValueError, match="max_batch_size must be an int >= 1, got 0"):
        map_using_service_async_batched_p(FOO, 0, lambda s, i: None)
    with pytest.raises(TypeError, match="the function must be callable"):
        filter_using_service_p(FOO, None)  # type: ignore[arg-type]


class Lifecycle:
    """Records the creation and destruction of service contexts and services."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, Any]] = []

    def note(self, event: str, what: Any) -> Any:
        with self.lock:
            self.events.append((event, what))
        return what

    def count(self, event: str) -> int:
        return sum(1 for name, _ in self.events if name == event)


def run_on_two_members(supplier: ProcessorMetaSupplier) -> list[Any]:
    """list "in" -> the vertex (2 processors per member) -> list "out" on LocalEngine(2)."""
    local = LocalEngine(2)
    local.get_list("in").extend(range(20))
    dag = DAG()
    source = dag.new_vertex("source", read_list_p("in"))
    vertex = dag.new_vertex("svc", supplier).local_parallelism(2)
    sink = dag.new_vertex("sink", write_list_p("out"))
    dag.edge(between(source, vertex)).edge(between(vertex, sink))
    local.new_job(dag).join(30)
    return list(local.get_list("out"))


def test_a_shared_service_is_made_once_per_member_and_used_by_all_its_processors():
    life = Lifecycle()
    factory = ServiceFactories.shared_service(
        lambda context: life.note("create", f"service of member {context.member_index}"),
        lambda service: life.note("destroy", service),
    )
    out = run_on_two_members(map_using_service_p(factory, lambda service, item: (service, item)))
    assert life.count("create") == 2 and life.count("destroy") == 2
    assert {service for service, _ in out} == {"service of member 0", "service of member 1"}
    assert sorted(item for _, item in out) == list(range(20))


def test_a_non_shared_service_is_made_per_processor_from_the_members_context():
    life = Lifecycle()
    factory = (
        ServiceFactory.with_create_context_fn(
            lambda context: life.note("context", f"m{context.member_index}")
        )
        .with_create_service_fn(
            lambda context, ctx: life.note("service", f"{ctx}p{context.global_processor_index}")
        )
        .with_destroy_service_fn(lambda service: life.note("destroy service", service))
        .with_destroy_context_fn(lambda ctx: life.note("destroy context", ctx))
    )

    async def tag(service: str, item: int) -> tuple[str, int]:
        return service, item

    out = run_on_two_members(map_using_service_async_p(factory, tag))
    assert life.count("context") == life.count("destroy context") == 2
    assert life.count("service") == life.count("destroy service") == 4
    assert {service for service, _ in out} == {"m0p0", "m0p1", "m1p2", "m1p3"}
    assert sorted(item for _, item in out) == list(range(20))
    # every service is destroyed before its member's context
    order = [what for event, what in life.events if event.startswith("destroy")]
    for ctx in ("m0", "m1"):
        assert all(order.index(s) < order.index(ctx) for s in order if s.startswith(f"{ctx}p"))


def test_a_context_factory_serves_as_a_non_shared_service_factory():
    context_factory = ContextFactory(lambda context: "ctx").non_cooperative()
    adapted = ServiceFactory.of(context_factory)
    assert not adapted.cooperative
    assert ServiceFactory.of(adapted) is adapted
    verify(map_using_service_p(context_factory, lambda ctx, item: ctx + item)).input(
        ["a", "b"]
    ).expect_output(["ctxa", "ctxb"])
    with member(map_using_service_p(context_factory, lambda ctx, item: item)) as m:
        assert not m.new().processor.is_cooperative()


# ------------------------------------------------------------------------ synchronous


def test_map_using_service_p_maps_with_the_service_and_drops_none_results():
    verify(map_using_service_p(FOO, lambda s, x: None if x == 2 else f"{s}{x}")).input(
        [1, 2, Watermark(5), 3]
    ).expect_output(["foo1", Watermark(5), "foo3"])


def test_filter_using_service_p_keeps_the_items_the_predicate_accepts():
    verify(filter_using_service_p(FOO, lambda s, x: s == "foo" and x % 2)).input(
        [1, 2, 3, 4, 5]
    ).expect_output([1, 3, 5])


def test_flat_map_using_service_p_emits_iterables_traversers_and_nothing_for_none():
    def explode(service: str, x: int) -> Any:
        if x == 0:
            return None
        return traverse_items(service) if x == 1 else [x] * x

    verify(flat_map_using_service_p(FOO, explode)).input([0, 1, 2, 3]).expect_output(
        ["foo", 2, 2, 3, 3, 3]
    )


# ----------------------------------------------------------------------- asynchronous


@pytest.mark.parametrize("preserve_order", [True, False])
def test_completed_futures_in_every_harness_mode(preserve_order):
    supplier = flat_map_using_service_async_p(
        FOO,
        lambda s, x: completed([f"{x}-1", f"{x}-2"]),
        max_concurrent_ops=2,
        preserve_order=preserve_order,
    )
    items = ["a", "b", "c", Watermark(1), "d", "e"]
    expected = ["a-1", "a-2", "b-1", "b-2", "c-1", "c-2", Watermark(1), "d-1", "d-2", "e-1", "e-2"]
    harness = verify(supplier).input(items)
    if not preserve_order:
        harness.output_checker(segments_match)
    harness.expect_output(expected)


def test_keyed_unordered_in_flight_items_restore_onto_another_parallelism():
    supplier = map_using_service_async_p(
        FOO, lambda s, x: completed(x * 10), preserve_order=False, key_fn=lambda x: x % 3
    )
    verify(supplier).modes(ONE_ITEM, ALL_AT_ONCE).restore_rescaled(
        2, 3, lambda x: x % 3
    ).output_checker(TestSupport.SAME_ITEMS_ANY_ORDER).input(list(range(12))).expect_output(
        [x * 10 for x in range(12)]
    )


def test_ordered_results_come_in_input_order_whatever_the_completion_order():
    service = ManualService()
    with member(map_using_service_async_p(FOO, service, max_concurrent_ops=3)) as m:
        p = m.new()
        assert p.process(["a", "b", "c"]) == []
        service.complete("c")
        service.complete("b")
        assert p.try_process() == []
        assert not p.processor.complete()
        service.complete("a")
        assert p.try_process() == ["a!", "b!", "c!"]
        assert p.processor.complete()


def test_unordered_results_come_as_they_complete():
    service = ManualService()
    supplier = map_using_service_async_p(FOO, service, max_concurrent_ops=3, preserve_order=False)
    with member(supplier) as m:
        p = m.new()
        p.process(["a", "b", "c"])
        service.complete("c")
        assert p.try_process() == ["c!"]
        service.complete("a")
        service.complete("b")
        assert p.try_process() == ["a!", "b!"]
        assert p.processor.complete()


@pytest.mark.parametrize("preserve_order", [True, False])
def test_no_more_than_max_concurrent_ops_are_in_flight(preserve_order):
    service = ManualService()
    supplier = map_using_service_async_p(
        FOO, service, max_concurrent_ops=3, preserve_order=preserve_order
    )
    with member(supplier) as m:
        p = m.new()
        out = p.process(range(10))
        assert service.started == [0, 1, 2] and len(p.inbox) == 7
        assert p.process() == [] and len(p.inbox) == 7, "nothing completed: nothing taken"
        for item in (2, 0, 1, 3, 5, 4, 6, 9, 8, 7):
            service.complete(item)
            out += p.process()
        out += p.try_process()
    assert service.most_running == 3
    assert service.started == list(range(10))
    expected = [f"{x}!" for x in range(10)]
    assert out == expected if preserve_order else sorted(out) == sorted(expected)


def test_an_ordered_result_not_yet_emitted_still_counts_as_in_flight():
    service = ManualService()
    with member(map_using_service_async_p(FOO, service, max_concurrent_ops=2)) as m:
        p = m.new()
        p.process(["a", "b", "c"])
        service.complete("b")  # done, but held behind "a"
        assert p.process() == [] and list(p.inbox.queue) == ["c"]


def test_a_full_outbox_holds_results_back_and_loses_none():
    service = ManualService()
    supplier = flat_map_using_service_async_p(FOO, service, max_concurrent_ops=2)
    with member(supplier) as m:
        p = m.new(capacity=2)
        p.process(["a", "b"])
        service.complete("a", ["a1", "a2", "a3"])
        service.complete("b", ["b1"])
        processor = p.processor
        assert processor.try_process() and not processor.complete()  # the outbox is full
        out = p.drain()
        assert out == ["a1", "a2"]
        assert processor.complete()
        out += p.drain()
    assert out == ["a1", "a2", "a3", "b1"]


@pytest.mark.parametrize("preserve_order", [True, False])
def test_a_watermark_waits_for_the_results_of_every_item_before_it(preserve_order):
    service = ManualService()
    supplier = map_using_service_async_p(FOO, service, preserve_order=preserve_order)
    with member(supplier) as m:
        p = m.new()
        p.process(["a", "b"])
        processor = p.processor
        assert not processor.try_process_watermark(Watermark(10))
        service.complete("b")
        held = processor.try_process_watermark(Watermark(10))
        assert not held and p.drain() == ([] if preserve_order else ["b!"])
        service.complete("a")
        assert processor.try_process_watermark(Watermark(10))
        assert p.drain() == (["a!", "b!"] if preserve_order else ["a!"])


def test_a_watermark_without_items_in_flight_passes_at_once():
    with member(map_using_service_async_p(FOO, lambda s, x: None)) as m:
        assert m.new().processor.try_process_watermark(Watermark(10))


def test_unordered_saves_the_items_in_flight_and_restored_each_result_comes_once():
    service = ManualService()
    supplier = map_using_service_async_p(FOO, service, preserve_order=False)
    with member(supplier) as m:
        first = m.new()
        first.process([1, 2, 3])
        service.complete(2)
        out = first.try_process()
        entries = first.save()
        assert [saved.value for _, saved in entries] == [[1, 3]]
        service.complete(3)  # after the snapshot: its result is not part of it
        assert first.try_process() == ["3!"]
        first.processor.close()
        restored = m.new()
        restored.processor.restore_from_snapshot(TestInbox(entries))
        assert restored.processor.finish_snapshot_restore()
        assert service.started == [1, 2, 3, 1, 3], "the items in flight are started again"
        service.complete(3)
        service.complete(1)
        out += restored.until(2)
        assert restored.processor.complete()
    assert out == ["2!", "3!", "1!"]  # 2 before the snapshot; 3 and 1 by the restored run


def test_unordered_keyed_saves_the_items_in_flight_under_their_keys():
    service = ManualService()
    supplier = map_using_service_async_p(
        FOO, service, preserve_order=False, key_fn=lambda item: item[0]
    )
    with member(supplier) as m:
        p = m.new()
        p.process(["a1", "b1", "a2"])
        assert p.save() == [("a", ["a1", "a2"]), ("b", ["b1"])]


def test_restored_items_start_no_more_than_max_concurrent_ops_at_a_time():
    service = ManualService()
    supplier = map_using_service_async_p(
        FOO, service, max_concurrent_ops=2, preserve_order=False, key_fn=whole_item
    )
    with member(supplier) as m:
        p = m.new()
        p.processor.restore_from_snapshot(TestInbox([(1, [1]), (2, [2]), (3, [3])]))
        assert not p.processor.finish_snapshot_restore()
        assert service.started == [1, 2]
        service.complete(2)
        assert p.processor.finish_snapshot_restore()
        assert service.started == [1, 2, 3] and p.drain() == ["2!"]


def test_ordered_save_waits_for_the_items_in_flight_and_saves_nothing():
    service = ManualService()
    with member(map_using_service_async_p(FOO, service)) as m:
        p = m.new()
        p.process([1, 2])
        processor = p.processor
        assert not processor.save_to_snapshot()
        service.complete(1)
        assert not processor.save_to_snapshot()
        assert p.drain() == ["1!"]
        service.complete(2)
        assert p.save() == []
        assert p.drain() == ["2!"]


def test_a_failed_operation_fails_naming_the_vertex_and_keeping_the_cause():
    service = ManualService()
    with member(map_using_service_async_p(FOO, service), vertex="lookup") as m:
        p = m.new()
        p.process(["a"])
        service.fail("a", KeyError("no such key"))
        with pytest.raises(RuntimeError, match="vertex 'lookup' for 'a' completed exceptionally"):
            p.try_process()


def test_a_failed_operation_fails_the_job_on_local_engine_naming_the_vertex():
    async def fail(service: str, item: int) -> int:
        raise ValueError(f"no result for {item}")

    dag = DAG()
    source = dag.new_vertex("source", read_list_p("in"))
    lookup = dag.new_vertex("lookup", map_using_service_async_p(FOO, fail))
    dag.edge(between(source, lookup))
    local = LocalEngine()
    local.get_list("in").append(1)
    with pytest.raises(JobFailedError, match="vertex 'lookup'") as failure:
        local.new_job(dag).join(30)
    assert isinstance(failure.value.__cause__.__cause__, ValueError)


def test_a_result_of_the_wrong_type_fails_naming_the_vertex():
    supplier = map_using_service_async_p(FOO, lambda s, x: x)
    with (
        member(supplier, vertex="lookup") as m,
        pytest.raises(TypeError, match="vertex 'lookup': the async function returned int"),
    ):
        m.new().process([1])


def test_none_drops_the_item_and_none_results_are_dropped():
    def lookup(service: str, x: int) -> Any:
        return None if x == 1 else completed(None if x == 2 else x)

    def many(service: str, x: int) -> Any:
        return completed(None if x == 1 else [x, None, x])

    verify(map_using_service_async_p(FOO, lookup)).input([1, 2, 3]).expect_output([3])
    verify(flat_map_using_service_async_p(FOO, many)).input([1, 2]).expect_output([2, 2])


def test_coroutines_run_on_the_vertex_loop_thread_which_ends_with_the_vertex():
    threads: set[str] = set()

    async def double(service: str, x: int) -> int:
        threads.add(threading.current_thread().name)
        await asyncio.sleep(0)
        return 2 * x

    with member(map_using_service_async_p(FOO, double), vertex="doubler") as m:
        p = m.new()
        p.process([1, 2, 3])
        assert p.until(3) == [2, 4, 6]
    assert threads == {"jetspark-doubler-0-loop"}
    assert "jetspark-doubler-0-loop" not in {t.name for t in threading.enumerate()}


def test_an_operation_still_running_is_cancelled_when_the_vertex_closes():
    started, cancelled = threading.Event(), threading.Event()

    async def forever(service: str, x: int) -> int:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return x

    with member(map_using_service_async_p(FOO, forever)) as m:
        p = m.new()
        p.process([1])
        assert started.wait(DEADLINE_SECONDS)
        assert p.try_process() == [] and not p.processor.complete()
        p.processor.close()
    assert cancelled.is_set()


def test_futures_of_an_executor_complete_on_its_threads():
    with concurrent.futures.ThreadPoolExecutor(2) as executor:
        factory = ServiceFactories.shared_service(lambda context: executor)
        supplier = map_using_service_async_p(
            factory, lambda pool, x: pool.submit(lambda: x + 1), preserve_order=False
        )
        with member(supplier) as m:
            p = m.new()
            p.process(range(4))
            assert sorted(p.until(4)) == [1, 2, 3, 4]


def test_batches_hold_up_to_max_batch_size_of_the_items_waiting():
    sizes: list[int] = []

    def upper(service: str, items: list[str]) -> concurrent.futures.Future[Any]:
        sizes.append(len(items))
        return completed([None if item == "x" else item.upper() for item in items])

    items = list("abcdexfg")
    verify(map_using_service_async_batched_p(FOO, 3, upper)).input(items).expect_output(
        list("ABCDEFG")
    )
    assert max(sizes) == 3 and 1 in sizes  # all at once: 3, 3, 2; one item per inbox: 1s


def test_a_batch_result_of_the_wrong_length_fails_naming_the_vertex():
    service = ManualService()
    supplier = map_using_service_async_batched_p(FOO, 4, lambda s, items: service(s, tuple(items)))
    with member(supplier, vertex="batch") as m:
        p = m.new()
        p.process(["a", "b"])
        service.complete(("a", "b"), ["A"])
        with pytest.raises(ValueError, match=r"vertex 'batch'.* 1 results for a batch of 2"):
            p.try_process()


def test_batches_in_flight_are_bounded_and_ordered():
    service = ManualService()
    supplier = map_using_service_async_batched_p(FOO, 2, lambda s, items: service(s, tuple(items)))
    with member(supplier) as m:
        p = m.new()
        p.process(range(7))
        assert service.started == [(0, 1), (2, 3)] and len(p.inbox) == 3
        service.complete((2, 3), [2, 3])
        assert p.process() == []
        service.complete((0, 1), [0, 1])
        assert p.process() == [0, 1, 2, 3]
        assert service.started[2:] == [(4, 5), (6,)]


# --------------------------------------------------------------------- end to end


class Gated:
    """The service of the end-to-end test: `r<item>` after a short sleep on the event loop;
    the items in `held` never complete (their operations are in flight at every later
    snapshot). Records the items it was called for."""

    def __init__(self, held: set[int]) -> None:
        self.held = held
        self.lock = threading.Lock()
        self.called: list[int] = []

    async def __call__(self, service: Any, item: int) -> str:
        with self.lock:
            self.called.append(item)
        if item in self.held:
            await asyncio.get_running_loop().create_future()  # never done
        await asyncio.sleep(0.001)
        return f"r{item}"


def exactly_once_dag(service: Gated, preserve_order: bool, keyed: bool) -> DAG:
    """journal "in" -> async map -> rolling count per result -> map "counts"."""
    dag = DAG()
    source = dag.new_vertex("source", stream_journal_p("in")).local_parallelism(1)
    mapper = dag.new_vertex(
        "lookup",
        map_using_service_async_p(
            FOO,
            service,
            max_concurrent_ops=4,
            preserve_order=preserve_order,
            key_fn=whole_item if keyed else None,
        ),
    ).local_parallelism(2)
    count = dag.new_vertex(
        "count", rolling_aggregate_p(whole_item, counting(), lambda item, key, n: (key, n))
    ).local_parallelism(2)
    sink = dag.new_vertex("sink", write_map_p("counts")).local_parallelism(1)
    into_mapper = between(source, mapper)
    dag.edge(into_mapper.distributed().partitioned(whole_item) if keyed else into_mapper)
    dag.edge(between(mapper, count).distributed().partitioned(whole_item))
    dag.edge(between(count, sink))
    return dag


@pytest.mark.parametrize(
    ("preserve_order", "keyed"), [(True, False), (False, False), (False, True)]
)
def test_every_result_once_after_a_restore_onto_more_members(preserve_order, keyed):
    items, more = list(range(120)), list(range(120, 180))
    held = set() if preserve_order else {117, 118, 119}
    first = Gated(held)
    two = engine(2)
    two.get_list("in").extend(items)
    job = two.new_job(exactly_once_dag(first, preserve_order, keyed), config(EXACTLY_ONCE))
    counts = two.get_map("counts")
    store = job.snapshot_store
    assert store is not None
    if held:
        wait_until(lambda: sorted(first.called) == items, "every item to be started")
        wait_until(lambda: len(counts) == len(items) - len(held), "the results not held back")
    else:
        wait_until(lambda: len(counts) >= len(items) // 2, "half the results")
    latest = store.latest()
    after = latest.snapshot_id + 2 if latest is not None else 1
    wait_until(
        lambda: (s := store.latest()) is not None and s.snapshot_id >= after, "two more snapshots"
    )
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(30)

    second = Gated(set())
    three = engine(3)
    three.get_list("in").extend(items + more)
    three.get_map("counts").update(counts)  # the sink's map outlives the job
    resumed = three.new_job(
        exactly_once_dag(second, preserve_order, keyed),
        config(EXACTLY_ONCE),
        restore_from=store.latest(),
    )
    final = three.get_map("counts")
    wait_until(lambda: len(final) == len(items) + len(more), "every result")
    resumed.cancel()
    with pytest.raises(JobCancelledError):
        resumed.join(30)
    assert dict(final) == {f"r{item}": 1 for item in items + more}
    assert held <= set(second.called), "the items in flight were saved and started again"
