"""Stateful mapping (processors/stateful.py): map_stateful_p, filter_stateful_p and
flat_map_stateful_p, keyed and ungrouped, with Jet 4's time-to-live, eviction and late items,
their snapshots at the same and at another parallelism, and a Core DAG restored from a
snapshot of 2 members onto 3 with exactly-once output."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fault_tolerance_jobs import SMALL_QUEUES, committed_lines, config, engine
from pyspark import cloudpickle

from jetspark.core import DAG, JobCancelledError
from jetspark.core.snapshot_keys import BroadcastKey
from jetspark.core.suppliers import ProcessorFn
from jetspark.core.test_support import (
    TestInbox,
    TestOutbox,
    TestProcessorContext,
    TestSupport,
)
from jetspark.core.traversers import traverse_items
from jetspark.core.watermark import Watermark
from jetspark.edges import between
from jetspark.processors import (
    entry_key,
    filter_stateful_p,
    flat_map_stateful_p,
    map_stateful_p,
    read_journal_p,
    stream_journal_p,
    write_file_transactional_p,
)
from jetspark.processors.events import JetEvent, event_timestamp
from jetspark.processors.journal import DEFAULT_JOURNAL_PARTITIONS
from jetspark.processors.watermark_policies import MAX_TIMESTAMP, MIN_TIMESTAMP


def counter() -> list[int]:
    """A mutable state: one int in a list (Jet's `long[1]`)."""
    return [0]


def running_total(state: list[int], key: Any, item: tuple[str, int]) -> tuple[str, int]:
    state[0] += item[1]
    return (key, state[0])


def event_key(event: JetEvent) -> Any:
    return event.item[0]


def event_total(state: list[int], key: Any, event: JetEvent) -> JetEvent:
    state[0] += event.item[1]
    return JetEvent(event.timestamp, (key, state[0]))


def evicted(state: list[int], key: Any, watermark: int) -> tuple[str, str, int, int]:
    return ("evicted", key, state[0], watermark)


def ttl_totals(ttl: int = 2) -> ProcessorFn:
    return map_stateful_p(
        counter,
        event_total,
        key_fn=event_key,
        ttl=ttl,
        timestamp_fn=event_timestamp,
        on_evict_fn=evicted,
    )


PAIRS = [("a", 1), ("b", 2), ("a", 3), ("c", 5), ("b", 4), ("a", 10), ("c", 1)]
TOTALS = [("a", 1), ("b", 2), ("a", 4), ("c", 5), ("b", 6), ("a", 14), ("c", 6)]


# ------------------------------------------------------------------------- keyed state


def test_running_totals_per_key_survive_every_snapshot_and_rescale() -> None:
    keyed = map_stateful_p(counter, running_total, key_fn=entry_key)
    TestSupport.verify_processor(keyed).disable_logging().input(PAIRS).expect_output(TOTALS)
    for before, after in [(2, 3), (3, 1), (1, 4)]:
        (
            TestSupport.verify_processor(keyed)
            .disable_logging()
            .input(PAIRS)
            .restore_rescaled(before, after, key_fn=entry_key)
            .expect_output(TOTALS)
        )


def test_a_key_state_is_saved_under_the_key_with_its_top_timestamp() -> None:
    processor = map_stateful_p(counter, running_total, key_fn=entry_key)()
    outbox = TestOutbox(16)
    processor.init(outbox, TestProcessorContext())
    processor.process(0, TestInbox(PAIRS[:3]))
    assert processor.save_to_snapshot()
    saved = list(outbox.snapshot_queue())
    assert saved[:2] == [("a", (MIN_TIMESTAMP, [4])), ("b", (MIN_TIMESTAMP, [2]))]  # no ttl
    assert [type(key) for key, _ in saved[2:]] == [BroadcastKey], "the watermark, broadcast"


def test_map_fn_returning_none_emits_nothing() -> None:
    def every_second(state: list[int], key: Any, item: Any) -> Any:
        state[0] += 1
        return item if state[0] % 2 == 0 else None

    supplier = map_stateful_p(counter, every_second, key_fn=entry_key)
    (
        TestSupport.verify_processor(supplier)
        .disable_logging()
        .input(PAIRS)
        .expect_output([("a", 3), ("b", 4), ("c", 1)])
    )


def test_keyed_filter_keeps_the_items_its_predicate_passes_with_the_key_state() -> None:
    def even_total(state: list[int], key: Any, item: tuple[str, int]) -> bool:
        state[0] += item[1]
        return state[0] % 2 == 0

    supplier = filter_stateful_p(counter, even_total, key_fn=entry_key)
    expected = [pair for pair, (_, total) in zip(PAIRS, TOTALS, strict=True) if total % 2 == 0]
    assert expected == [("b", 2), ("a", 3), ("b", 4), ("a", 10), ("c", 1)]
    (
        TestSupport.verify_processor(supplier)
        .disable_logging()
        .input(PAIRS)
        .restore_rescaled(2, 3, key_fn=entry_key)
        .expect_output(expected)
    )


def test_keyed_flat_map_emits_every_item_of_a_list_traverser_or_generator_and_none() -> None:
    def expand(state: list[int], key: Any, item: tuple[str, int]) -> Any:
        state[0] += item[1]
        if key == "a":
            return [(key, state[0]), (key, -state[0])]
        if key == "b":
            return traverse_items((key, state[0]))
        if key == "c":
            return ((key, n) for n in range(state[0], state[0] + 2))
        return None

    supplier = flat_map_stateful_p(counter, expand, key_fn=entry_key)
    (
        TestSupport.verify_processor(supplier)
        .disable_logging()
        .input([*PAIRS, ("d", 1)])
        .expect_output(
            [
                ("a", 1),
                ("a", -1),
                ("b", 2),
                ("a", 4),
                ("a", -4),
                ("c", 5),
                ("c", 6),
                ("b", 6),
                ("a", 14),
                ("a", -14),
                ("c", 6),
                ("c", 7),
            ]
        )
    )


# --------------------------------------------------------------------- ungrouped state


def count_items(state: list[int], item: Any) -> tuple[Any, int]:
    state[0] += 1
    return (item, state[0])


def test_an_ungrouped_counter_numbers_the_items_of_its_processor() -> None:
    items = ["x", "y", "x", "z"]
    (
        TestSupport.verify_processor(map_stateful_p(counter, count_items))
        .disable_logging()
        .input(items)
        .expect_output([("x", 1), ("y", 2), ("x", 3), ("z", 4)])
    )


def test_ungrouped_filter_and_flat_map_take_state_and_item() -> None:
    def first_time(seen: set[Any], item: Any) -> bool:
        new = item not in seen
        seen.add(item)
        return new

    def with_count(state: list[int], item: Any) -> list[Any]:
        state[0] += 1
        return [item] * state[0]

    items = ["x", "y", "x", "z", "y"]
    (
        TestSupport.verify_processor(filter_stateful_p(set, first_time))
        .disable_logging()
        .input(items)
        .expect_output(["x", "y", "z"])
    )
    (
        TestSupport.verify_processor(flat_map_stateful_p(counter, with_count))
        .disable_logging()
        .input(["p", "q", "r"])
        .expect_output(["p", "q", "q", "r", "r", "r"])
    )


def saved_by(supplier: ProcessorFn, total: int, items: list[list[Any]]) -> list[Any]:
    """The snapshot entries of `total` processors, processor i having processed `items[i]`."""
    entries: list[Any] = []
    for index in range(total):
        processor, outbox = supplier(), TestOutbox(16)
        context = TestProcessorContext().set_total_parallelism(total)
        processor.init(outbox, context.set_global_processor_index(index))
        processor.process(0, TestInbox(items[index]))
        assert processor.save_to_snapshot()
        entries += outbox.snapshot_queue()
    return entries


def restored(supplier: ProcessorFn, total: int, index: int, entries: list[Any]) -> Any:
    """Processor `index` of `total`, restored from `entries`, and its outbox."""
    processor, outbox = supplier(), TestOutbox(16)
    context = TestProcessorContext().set_total_parallelism(total)
    processor.init(outbox, context.set_global_processor_index(index))
    processor.restore_from_snapshot(TestInbox(entries))
    assert processor.finish_snapshot_restore()
    return processor, outbox


def test_an_ungrouped_state_is_per_processor_and_goes_to_processor_i_mod_the_new_total() -> None:
    supplier = map_stateful_p(counter, count_items)
    entries = saved_by(supplier, 2, [["a"], ["b", "c"]])
    for index, expected in [(0, ("d", 2)), (1, ("d", 3)), (2, ("d", 1))]:
        processor, outbox = restored(supplier, 3, index, entries)
        processor.process(0, TestInbox(["d"]))
        assert list(outbox.queue(0)) == [expected]


def test_restoring_two_ungrouped_states_into_one_processor_fails() -> None:
    supplier = map_stateful_p(counter, count_items)
    entries = saved_by(supplier, 2, [["a"], ["b"]])
    with pytest.raises(ValueError, match="states of several processors"):
        restored(supplier, 1, 0, entries)


def test_a_key_state_saved_by_two_processors_fails_the_restore() -> None:
    supplier = map_stateful_p(counter, running_total, key_fn=entry_key)
    entries = saved_by(supplier, 2, [[("a", 1)], [("a", 2)]])
    with pytest.raises(ValueError, match="state of key 'a' was saved twice"):
        restored(supplier, 1, 0, entries)


# ------------------------------------------------------------------ time-to-live (Jet 4)


def test_eviction_output_comes_before_the_watermark_and_completion_evicts_the_rest() -> None:
    (
        TestSupport.verify_processor(ttl_totals())
        .disable_logging()
        .input(
            [
                JetEvent(0, ("a", 1)),
                JetEvent(1, ("b", 2)),
                JetEvent(2, ("a", 3)),
                Watermark(4),  # b (top timestamp 1) is stale: 1 < 4 - 2
                JetEvent(4, ("b", 5)),
                Watermark(5),  # a (top timestamp 2) is stale
            ]
        )
        .restore_rescaled(2, 3, key_fn=event_key)
        .expect_output(
            [
                JetEvent(0, ("a", 1)),
                JetEvent(1, ("b", 2)),
                JetEvent(2, ("a", 4)),
                ("evicted", "b", 2, 4),
                Watermark(4),
                JetEvent(4, ("b", 5)),
                ("evicted", "a", 4, 5),
                Watermark(5),
                ("evicted", "b", 5, MAX_TIMESTAMP),
            ]
        )
    )


def test_a_state_is_kept_while_the_watermark_is_within_ttl_of_its_top_timestamp() -> None:
    (
        TestSupport.verify_processor(ttl_totals())
        .disable_logging()
        .disable_complete_call()
        .input([JetEvent(5, ("a", 1)), Watermark(7), JetEvent(7, ("a", 1))])
        .expect_output([JetEvent(5, ("a", 1)), Watermark(7), JetEvent(7, ("a", 2))])
    )


def test_eviction_goes_least_recently_used_first_and_stops_at_the_first_fresh_state() -> None:
    # as Jet's access-ordered map: b, used after a but with an older timestamp, is not evicted
    # at Watermark(5) behind the fresh a (its total goes on to 2)
    (
        TestSupport.verify_processor(ttl_totals())
        .disable_logging()
        .input(
            [
                JetEvent(10, ("a", 1)),
                JetEvent(0, ("b", 1)),
                Watermark(5),
                JetEvent(11, ("b", 1)),
                Watermark(13),
            ]
        )
        .expect_output(
            [
                JetEvent(10, ("a", 1)),
                JetEvent(0, ("b", 1)),
                Watermark(5),
                JetEvent(11, ("b", 2)),
                ("evicted", "a", 1, 13),
                Watermark(13),
                ("evicted", "b", 2, MAX_TIMESTAMP),
            ]
        )
    )


def test_on_evict_fn_returning_none_emits_nothing() -> None:
    def only_a(state: list[int], key: Any, watermark: int) -> Any:
        return (key, "evicted") if key == "a" else None

    supplier = map_stateful_p(
        counter,
        event_total,
        key_fn=event_key,
        ttl=1,
        timestamp_fn=event_timestamp,
        on_evict_fn=only_a,
    )
    (
        TestSupport.verify_processor(supplier)
        .disable_logging()
        .input([JetEvent(0, ("a", 1)), JetEvent(0, ("b", 1)), Watermark(10)])
        .expect_output(
            [JetEvent(0, ("a", 1)), JetEvent(0, ("b", 1)), ("a", "evicted"), Watermark(10)]
        )
    )


def test_flat_map_eviction_emits_every_item_of_on_evict_fn() -> None:
    def twice(state: list[int], key: Any, event: JetEvent) -> list[Any]:
        state[0] += event.item[1]
        return [event, event]

    def goodbye(state: list[int], key: Any, watermark: int) -> Any:
        return traverse_items((key, state[0]), (key, "bye"))

    supplier = flat_map_stateful_p(
        counter,
        twice,
        key_fn=event_key,
        ttl=1,
        timestamp_fn=event_timestamp,
        on_evict_fn=goodbye,
    )
    (
        TestSupport.verify_processor(supplier)
        .disable_logging()
        .input([JetEvent(0, ("a", 3)), Watermark(2)])
        .expect_output(
            [JetEvent(0, ("a", 3)), JetEvent(0, ("a", 3)), ("a", 3), ("a", "bye"), Watermark(2)]
        )
    )


def test_with_ttl_an_item_behind_the_watermark_is_dropped_as_late_without_one_it_is_not() -> None:
    late = [JetEvent(5, ("a", 1)), Watermark(6), JetEvent(3, ("a", 1)), JetEvent(6, ("a", 1))]
    (
        TestSupport.verify_processor(ttl_totals(ttl=100))
        .disable_logging()
        .disable_complete_call()
        .input(late)
        .expect_output([JetEvent(5, ("a", 1)), Watermark(6), JetEvent(6, ("a", 2))])
    )
    (
        TestSupport.verify_processor(map_stateful_p(counter, event_total, key_fn=event_key))
        .disable_logging()
        .input(late)
        .expect_output(
            [JetEvent(5, ("a", 1)), Watermark(6), JetEvent(3, ("a", 2)), JetEvent(6, ("a", 3))]
        )
    )
    processor, outbox = ttl_totals(ttl=100)(), TestOutbox(16)
    processor.init(outbox, TestProcessorContext())
    assert processor.try_process_watermark(Watermark(6))
    processor.process(0, TestInbox([JetEvent(3, ("a", 1))]))
    assert processor.late_events_dropped == 1 and not outbox.queue(0)


def test_the_watermark_restores_as_the_minimum_so_late_items_stay_late_after_a_rescale() -> None:
    items = [
        JetEvent(5, ("a", 1)),
        JetEvent(5, ("b", 1)),
        Watermark(6),
        JetEvent(3, ("a", 1)),
        JetEvent(3, ("b", 1)),
        JetEvent(7, ("a", 1)),
        JetEvent(7, ("b", 1)),
    ]
    expected = [
        JetEvent(5, ("a", 1)),
        JetEvent(5, ("b", 1)),
        Watermark(6),
        JetEvent(7, ("a", 2)),
        JetEvent(7, ("b", 2)),
    ]
    (
        TestSupport.verify_processor(ttl_totals(ttl=100))
        .disable_logging()
        .disable_complete_call()
        .input(items)
        .restore_rescaled(2, 3, key_fn=event_key)
        .expect_output(expected)
    )


def test_a_save_during_complete_first_finishes_the_evictions() -> None:
    processor, outbox = ttl_totals()(), TestOutbox(1)
    processor.init(outbox, TestProcessorContext())
    emitted: list[Any] = []
    for event in [JetEvent(0, ("a", 1)), JetEvent(0, ("b", 1))]:
        processor.process(0, TestInbox([event]))
        outbox.drain_queue(0, emitted)
    assert not processor.complete()  # a's eviction went out, b's waits for room
    outbox.drain_queue(0, emitted)
    assert processor.save_to_snapshot()
    outbox.drain_queue(0, emitted)
    assert emitted[2:] == [("evicted", "a", 1, MAX_TIMESTAMP), ("evicted", "b", 1, MAX_TIMESTAMP)]
    assert [type(key) for key, _ in outbox.snapshot_queue()] == [BroadcastKey], "no state left"
    assert processor.complete()
    assert not outbox.queue(0)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: map_stateful_p(None, running_total), TypeError, "create_fn must be callable"),
        (lambda: map_stateful_p(counter, 3), TypeError, "map_fn must be callable"),
        (lambda: filter_stateful_p(counter, "f"), TypeError, "filter_fn must be callable"),
        (lambda: flat_map_stateful_p(counter, []), TypeError, "flat_map_fn must be callable"),
        (lambda: map_stateful_p(counter, running_total, key_fn=1), TypeError, "key_fn must be"),
        (
            lambda: map_stateful_p(counter, running_total, key_fn=entry_key, ttl=-1),
            ValueError,
            "ttl must not be negative",
        ),
        (
            lambda: map_stateful_p(counter, running_total, key_fn=entry_key, ttl=10),
            ValueError,
            "needs key_fn and timestamp_fn",
        ),
        (
            lambda: map_stateful_p(counter, count_items, ttl=10, timestamp_fn=event_timestamp),
            ValueError,
            "needs key_fn and timestamp_fn",
        ),
        (
            lambda: map_stateful_p(counter, running_total, key_fn=entry_key, on_evict_fn=evicted),
            ValueError,
            "used only with a ttl",
        ),
        (
            lambda: map_stateful_p(
                counter, running_total, key_fn=entry_key, timestamp_fn=event_timestamp
            ),
            ValueError,
            "used only with a ttl",
        ),
    ],
)
def test_bad_arguments_fail_naming_the_argument(call: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_the_suppliers_survive_cloudpickle() -> None:
    suppliers = [
        map_stateful_p(counter, count_items),
        filter_stateful_p(set, lambda s, k, item: True, key_fn=entry_key),
        flat_map_stateful_p(
            counter,
            lambda s, k, e: [e],
            key_fn=event_key,
            ttl=5,
            timestamp_fn=event_timestamp,
            on_evict_fn=evicted,
        ),
        ttl_totals(),
    ]
    for supplier in suppliers:
        copy = cloudpickle.loads(cloudpickle.dumps(supplier))
        processor = copy()
        processor.init(TestOutbox(16), TestProcessorContext())


# ------------------------------------------------- a Core DAG restored on more members

KEYS = DEFAULT_JOURNAL_PARTITIONS
"""Keys `offset % KEYS`: each key's items are those of one journal partition, read in offset
order by one source processor, so they reach the stateful vertex in order."""


def journal_event(offset: int) -> tuple[int, str, int]:
    """(offset, key, value) of the journal's item at `offset`."""
    return (offset, f"k{offset % KEYS}", offset % 5 + 1)


def journal_key(item: tuple[int, str, int]) -> str:
    return item[1]


def total_line(state: list[int], key: str, item: tuple[int, str, int]) -> str:
    state[0] += item[2]
    return f"{key} {item[0]} {state[0]}"


def expected_lines(count: int) -> list[str]:
    totals: dict[str, int] = {}
    lines = []
    for offset in range(count):
        _, key, value = journal_event(offset)
        totals[key] = totals.get(key, 0) + value
        lines.append(f"{key} {offset} {totals[key]}")
    return sorted(lines)


def totals_dag(source: ProcessorFn, out: str) -> DAG:
    """journal("events") -> running total per key (distributed, partitioned) -> file sink."""
    dag = DAG("running-totals")
    read = dag.new_vertex("source", source).local_parallelism(2)
    totals = dag.new_vertex(
        "totals", map_stateful_p(counter, total_line, key_fn=journal_key)
    ).local_parallelism(2)
    sink = dag.new_vertex("sink", write_file_transactional_p(out)).local_parallelism(1)
    dag.edge(between(read, totals).distributed().partitioned(journal_key).set_config(SMALL_QUEUES))
    dag.edge(between(totals, sink).set_config(SMALL_QUEUES))
    return dag


def has_key_states(snapshot: Any) -> bool:
    return any(
        not isinstance(key, BroadcastKey)
        for _, saved in snapshot.states_of(["totals"])
        for key, _ in saved.entries()
    )


@pytest.mark.timeout(60)
def test_a_cancelled_job_restored_on_three_members_emits_every_running_total_once(tmp_path):
    out = str(tmp_path / "out")
    first = engine(2)
    first.get_list("events").extend(map(journal_event, range(300)))
    job = first.new_job(totals_dag(stream_journal_p("events"), out), config(interval=2))
    store = job.snapshot_store
    assert store is not None
    while (latest := store.latest()) is None or not has_key_states(latest):
        time.sleep(0.01)  # bounded by the test's timeout, whatever the machine's speed
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(30)
    snapshot = store.latest()
    assert snapshot is not None and has_key_states(snapshot)
    second = engine(3)
    second.get_list("events").extend(map(journal_event, range(600)))
    resumed = second.new_job(
        totals_dag(read_journal_p("events"), out), config(interval=2), restore_from=snapshot
    )
    resumed.join(30)
    assert committed_lines(out) == expected_lines(600)
