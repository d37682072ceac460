"""Model inference in a stream: `map_batched_using_context_p` and `map_using_model_p`.

TestSupport runs both the way an engine stresses them (a one-item and an all-items inbox, a
cooperative outbox full on every other call, snapshots restored into new instances, a snapshot
of N processors restored into M); DAGs on both engines show the batches an engine hands them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest
from pyspark import cloudpickle
from test_processors_helpers import any_order, verify

from jetspark.core import DAG, LocalEngine
from jetspark.core.test_support import (
    ALL_AT_ONCE,
    ONE_ITEM,
    ONE_ITEM_RESTORE_EVERY,
    ONE_ITEM_RESTORE_EVERY_OTHER,
    TestInbox,
    TestOutbox,
)
from jetspark.core.test_support import TestProcessorContext as Context
from jetspark.core.watermark import Watermark
from jetspark.edges import between, from_
from jetspark.processors import (
    ContextFactory,
    map_batched_using_context_p,
    map_using_model_p,
    read_list_p,
    write_list_p,
)

NO_CONTEXT = ContextFactory(lambda context: None)


def doubled(ctx: object, items: list[int]) -> list[int]:
    return [2 * x for x in items]


def with_batch_size(ctx: object, items: list[int]) -> list[tuple[int, int]]:
    """Each item with the size of the batch it came in."""
    return [(x, len(items)) for x in items]


# ------------------------------------------------------------ map_batched_using_context_p


def test_batches_are_mapped_in_order_in_every_mode():
    verify(map_batched_using_context_p(NO_CONTEXT, doubled, max_batch_size=3)).input(
        list(range(10))
    ).expect_output([2 * x for x in range(10)])


def test_a_backlog_goes_in_batches_of_at_most_max_batch_size_each_mapped_once():
    """An inbox of all ten items and an outbox that takes one result per call: four calls of
    batch_fn, each on the items at the head of the inbox, none mapped twice, none lost."""
    calls: list[list[int]] = []

    def record(ctx: object, items: list[int]) -> list[int]:
        calls.append(list(items))
        return [x + 100 for x in items]

    verify(map_batched_using_context_p(NO_CONTEXT, record, max_batch_size=3)).modes(
        ALL_AT_ONCE
    ).input(list(range(10))).expect_output([x + 100 for x in range(10)])
    assert calls == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]


def test_a_lone_item_is_mapped_at_once_without_waiting_for_a_batch():
    calls: list[list[int]] = []

    def record(ctx: object, items: list[int]) -> list[int]:
        calls.append(list(items))
        return items

    verify(map_batched_using_context_p(NO_CONTEXT, record, max_batch_size=100)).modes(
        ONE_ITEM
    ).input([7, 8]).expect_output([7, 8])
    assert calls == [[7], [8]]


def test_none_results_drop_their_items_and_watermarks_keep_their_place():
    def odd_only(ctx: object, items: list[int]) -> list[int | None]:
        return [x if x % 2 else None for x in items]

    verify(map_batched_using_context_p(NO_CONTEXT, odd_only, max_batch_size=4)).input(
        [1, 2, 3, Watermark(10), 4, 5, 6, 7]
    ).expect_output([1, 3, Watermark(10), 5, 7])


def test_the_context_is_made_once_per_processor_and_passed_to_every_batch():
    events: list[str] = []

    def create(context: object) -> dict[str, str]:
        events.append("create")
        return {"suffix": "!"}

    factory = ContextFactory(create, lambda ctx: events.append("destroy"))
    verify(
        map_batched_using_context_p(factory, lambda ctx, items: [x + ctx["suffix"] for x in items])
    ).modes(ALL_AT_ONCE).input(["a", "b"]).expect_output(["a!", "b!"])
    assert events == ["create", "destroy"]


def test_cooperative_unless_the_factory_is_non_cooperative():
    cooperative = map_batched_using_context_p(NO_CONTEXT, doubled)()
    blocking = map_batched_using_context_p(NO_CONTEXT.non_cooperative(), doubled)()
    assert cooperative.is_cooperative() and not blocking.is_cooperative()


def test_a_result_count_other_than_the_batch_size_fails_naming_the_vertex():
    builder = verify(map_batched_using_context_p(NO_CONTEXT, lambda ctx, items: items[:-1]))
    with pytest.raises(ValueError, match=r"vertex 'test': batch_fn returned 1 results for a batch"):
        builder.modes(ALL_AT_ONCE).input([1, 2]).expect_output([1, 2])


def test_a_result_that_is_no_sequence_fails_naming_the_vertex():
    builder = verify(map_batched_using_context_p(NO_CONTEXT, lambda ctx, items: None))
    with pytest.raises(TypeError, match="vertex 'test': batch_fn returned NoneType"):
        builder.input([1]).expect_output([1])


@pytest.mark.parametrize("size", [0, -1, 2.5, None])
def test_max_batch_size_must_be_a_positive_int(size):
    with pytest.raises(ValueError, match="max_batch_size must be an int >= 1"):
        map_batched_using_context_p(NO_CONTEXT, doubled, max_batch_size=size)
    with pytest.raises(ValueError, match="max_batch_size must be an int >= 1"):
        map_using_model_p(load, predict, max_batch_size=size)


# ------------------------------------------------------------------- map_using_model_p

LOADS: list[str] = []
"""The references `load` was called with, in order."""


@dataclass
class Model:
    """A model that cannot be pickled (it holds a lock), so a snapshot cannot hold it."""

    name: str
    lock: threading.Lock


def load(reference: str) -> Model:
    LOADS.append(reference)
    return Model(reference, threading.Lock())


def predict(model: Model, items: list[int]) -> list[tuple[int, str]]:
    return [(x, model.name) for x in items]


@pytest.fixture(autouse=True)
def _no_loads_yet():
    LOADS.clear()


def model_p(max_batch_size: int = 2):
    return map_using_model_p(load, predict, max_batch_size=max_batch_size)


def test_a_later_model_replaces_an_earlier_one_for_the_items_after_it():
    """Round-robin delivery: 1, m1, 2, m2, 3, 4, 5."""
    verify(model_p()).inputs([[1, 2, 3, 4, 5], ["m1", "m2"]]).expect_output(
        [(1, "m1"), (2, "m1"), (3, "m2"), (4, "m2"), (5, "m2")]
    )


def test_the_reference_survives_every_snapshot_restore_and_the_model_is_loaded_again():
    """Restoring every snapshot into a new instance: the restored reference loads m1 again,
    never the model itself (it cannot be pickled, and TestSupport serializes the state)."""
    verify(model_p()).modes(ONE_ITEM_RESTORE_EVERY, ONE_ITEM_RESTORE_EVERY_OTHER).inputs(
        [[1, 2, 3], ["m1"]]
    ).expect_output([(1, "m1"), (2, "m1"), (3, "m1")])
    assert set(LOADS) == {"m1"}
    assert len(LOADS) > 2  # once per run, and again after restores


def test_the_reference_restores_into_any_parallelism():
    """Items partitioned over the processors, references broadcast to all of them: a snapshot
    of 2 processors restored into 3 and of 3 into 1 predicts with the model it held."""
    items = list(range(1, 9))
    expected = [(x, "m1") for x in items[:4]] + [(x, "m2") for x in items[4:]]
    (
        any_order(model_p())
        .inputs([items, ["m1", "m1", "m1", "m2"]], priorities=[0, 0])
        .restore_rescaled(2, 3, key_fn=[lambda x: x, None])
        .restore_rescaled(3, 1, key_fn=[lambda x: x, None])
        .expect_output(expected)
    )


def test_items_before_the_first_model_wait_for_it_and_go_first():
    """Ordinal 0 delivered before ordinal 1 (priorities): every item came before any model."""
    verify(model_p()).inputs([[1, 2, 3], ["m1", "m2"]], priorities=[0, 1]).expect_output(
        [(1, "m1"), (2, "m1"), (3, "m1")]
    )
    assert "m2" not in LOADS or LOADS.index("m1") < LOADS.index("m2")


def test_items_waiting_for_the_first_model_survive_a_rescaled_restore():
    any_order(model_p()).inputs([[1, 2, 3, 4], ["m1"]], priorities=[0, 1]).restore_rescaled(
        2, 3, key_fn=[lambda x: x, None]
    ).expect_output([(x, "m1") for x in range(1, 5)])


def test_watermarks_keep_their_place_once_there_is_a_model_and_pass_held_items_before():
    items = [1, Watermark(5), 2]
    verify(model_p()).inputs([items, ["m"]], priorities=[1, 0]).expect_output(
        [(1, "m"), Watermark(5), (2, "m")]
    )
    verify(model_p()).inputs([items, ["m"]], priorities=[0, 1]).expect_output(
        [Watermark(5), (1, "m"), (2, "m")]
    )
    # 1, m, Watermark(5), 2: the item held for m goes out before the watermark
    verify(model_p()).inputs([items, ["m"]]).expect_output([(1, "m"), Watermark(5), (2, "m")])


def test_a_model_is_loaded_only_when_items_need_it():
    verify(model_p()).modes(ONE_ITEM).inputs(
        [[1], ["m1", "m2", "m3"]], priorities=[1, 0]
    ).expect_output([(1, "m3")])
    assert LOADS == ["m3"]


def test_predicted_in_batches_of_at_most_max_batch_size():
    batches: list[int] = []

    def sizes(model: Model, items: list[int]) -> list[int]:
        batches.append(len(items))
        return items

    verify(map_using_model_p(load, sizes, max_batch_size=3)).modes(ALL_AT_ONCE).inputs(
        [list(range(8)), ["m"]], priorities=[1, 0]
    ).expect_output(list(range(8)))
    assert batches == [3, 3, 2]


def test_an_outbox_refusing_part_of_a_batch_loses_and_repeats_nothing():
    """Driven by hand: TestSupport gives a non-cooperative processor a roomy outbox."""
    batches: list[list[int]] = []

    def record(model: Model, items: list[int]) -> list[int]:
        batches.append(list(items))
        return [10 * x for x in items]

    processor = map_using_model_p(load, record, max_batch_size=4)()
    outbox = TestOutbox(3)
    processor.init(outbox, Context())
    processor.process(1, TestInbox(["m"]))
    inbox = TestInbox(range(10))
    emitted: list[int] = []
    while not inbox.is_empty():
        processor.process(0, inbox)
        assert len(inbox) + len(emitted) + len(outbox.queue(0)) == 10  # no item left early
        outbox.drain_queue(0, emitted)
    assert emitted == [10 * x for x in range(10)]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_non_cooperative_since_loading_a_model_blocks():
    assert not model_p()().is_cooperative()


def test_items_and_no_model_when_the_input_ends_fail_naming_the_vertex():
    with pytest.raises(RuntimeError, match="vertex 'test': the input ended with 2 items still"):
        verify(model_p()).modes(ONE_ITEM).inputs([[1, 2], []]).expect_output([])


def test_a_model_that_fails_to_load_fails_naming_the_vertex_and_the_reference():
    def broken(reference: str) -> Model:
        raise FileNotFoundError(f"no such model: {reference}")

    builder = verify(map_using_model_p(broken, predict)).modes(ONE_ITEM)
    with pytest.raises(RuntimeError, match=r"vertex 'test': load_model\('v9'\) failed") as error:
        builder.inputs([[1], ["v9"]], priorities=[1, 0]).expect_output([])
    assert isinstance(error.value.__cause__, FileNotFoundError)


def test_items_on_a_third_ordinal_fail_naming_the_vertex():
    with pytest.raises(ValueError, match="vertex 'test': map_using_model_p takes items on"):
        verify(model_p()).modes(ONE_ITEM).inputs([[], [], [1]]).expect_output([])


@pytest.mark.parametrize(
    "factory",
    [map_batched_using_context_p(NO_CONTEXT, doubled), map_using_model_p(load, predict)],
    ids=["batched", "model"],
)
def test_factories_round_trip_through_cloudpickle(factory):
    assert type(cloudpickle.loads(cloudpickle.dumps(factory))()) is type(factory())


# -------------------------------------------------------------------------- engines


def batch_sizes_dag(max_batch_size: int) -> DAG:
    dag = DAG("batched")
    source = dag.new_vertex("source", read_list_p("numbers"), local_parallelism=1)
    batched = dag.new_vertex(
        "batched",
        map_batched_using_context_p(NO_CONTEXT, with_batch_size, max_batch_size),
        local_parallelism=1,
    )
    sink = dag.new_vertex("sink", write_list_p("out"), local_parallelism=1)
    dag.edge(between(source, batched)).edge(between(batched, sink))
    return dag


def check_batches(out: list[tuple[int, int]], count: int, max_batch_size: int) -> None:
    assert sorted(x for x, _ in out) == list(range(count))
    sizes = [size for _, size in out]
    assert max(sizes) <= max_batch_size
    assert max(sizes) > 1  # a backlog went in batches


def test_a_backlog_goes_in_batches_on_the_local_engine():
    engine = LocalEngine()
    engine.get_list("numbers").extend(range(3000))
    engine.new_job(batch_sizes_dag(64)).join()
    check_batches(list(engine.get_list("out")), 3000, 64)


def model_dag() -> DAG:
    """Both references before any item (a prioritized edge): the later one predicts them all."""
    dag = DAG("model")
    items = dag.new_vertex("items", read_list_p("numbers"), local_parallelism=1)
    models = dag.new_vertex("models", read_list_p("models"), local_parallelism=1)
    classify = dag.new_vertex("classify", map_using_model_p(load, predict, 50))
    sink = dag.new_vertex("sink", write_list_p("out"), local_parallelism=1)
    dag.edge(between(items, classify))
    dag.edge(from_(models).to(classify, 1).distributed().broadcast().priority(-1))
    dag.edge(between(classify, sink))
    return dag


def test_the_later_of_two_models_predicts_on_the_local_engine():
    engine = LocalEngine(members=2)
    engine.get_list("numbers").extend(range(500))
    engine.get_list("models").extend(["m1", "m2"])
    engine.new_job(model_dag()).join()
    assert sorted(engine.get_list("out")) == [(x, "m2") for x in range(500)]


@pytest.mark.spark
def test_a_backlog_goes_in_batches_on_spark(spark_engine):
    spark_engine.get_list("numbers").clear()
    spark_engine.get_list("numbers").extend(range(3000))
    spark_engine.get_list("out").clear()
    try:
        spark_engine.new_job(batch_sizes_dag(64)).join()
        check_batches(list(spark_engine.get_list("out")), 3000, 64)
    finally:  # the session's engine is shared: leave its lists as they were
        for name in ("numbers", "out"):
            spark_engine.get_list(name).clear()


@pytest.mark.spark
def test_the_later_of_two_models_predicts_on_spark(spark_engine):
    for name, items in (("numbers", range(500)), ("models", ["m1", "m2"]), ("out", [])):
        spark_engine.get_list(name).clear()
        spark_engine.get_list(name).extend(items)
    try:
        spark_engine.new_job(model_dag()).join()
        assert sorted(spark_engine.get_list("out")) == [(x, "m2") for x in range(500)]
    finally:  # the session's engine is shared: leave its lists as they were
        for name in ("numbers", "models", "out"):
            spark_engine.get_list(name).clear()
