"""Tests of Processor's defaults and AbstractProcessor (manual §8.3-8.4), driven by hand."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from jetspark.core import (
    AbstractProcessor,
    ArrayDequeInbox,
    Context,
    FlatMapper,
    OutboxImpl,
    Processor,
    UnsupportedOperationError,
    Watermark,
)
from jetspark.core.traversers import traverse_iterable


def context(vertex_name: str = "v") -> Context:
    return Context(vertex_name=vertex_name, total_parallelism=1, local_parallelism=1)


def started(processor: Processor, capacities=(16,), snapshot_capacity: int = 1024) -> OutboxImpl:
    """Calls `processor.init` as the runtime would; returns its outbox."""
    outbox = OutboxImpl(list(capacities), snapshot_capacity)
    processor.init(outbox, context())
    return outbox


def run_to_completion(callback: Callable[[], bool], outbox: OutboxImpl) -> tuple[list, int]:
    """Calls `callback` until True, emptying the outbox after each call as the runtime would.

    Returns everything emitted (data buckets in ordinal order, then the snapshot bucket, per
    call) and how many calls it took.
    """
    emitted: list = []
    for calls in range(1, 1000):
        done = callback()
        for bucket in [*outbox.buckets, outbox.snapshot_bucket]:
            emitted.extend(bucket)
            bucket.clear()
        if done:
            return emitted, calls
    raise AssertionError("the callback never returned True")


class SubclassedInbox(ArrayDequeInbox):
    """Takes AbstractProcessor's general Inbox path instead of its deque fast path."""

    __slots__ = ()


INBOXES = [ArrayDequeInbox, SubclassedInbox]


# --- Processor's defaults -----------------------------------------------------------------------


class BareP(Processor):
    pass


@pytest.mark.parametrize(
    "callback",
    [
        lambda p: p.is_cooperative(),
        lambda p: p.try_process_watermark(Watermark(10)),
        lambda p: p.try_process(),
        lambda p: p.complete_edge(0),
        lambda p: p.complete(),
        lambda p: p.save_to_snapshot(),
        lambda p: p.finish_snapshot_restore(),
    ],
    ids=[
        "is_cooperative",
        "try_process_watermark",
        "try_process",
        "complete_edge",
        "complete",
        "save_to_snapshot",
        "finish_snapshot_restore",
    ],
)
def test_processor_boolean_callbacks_default_to_true(callback):
    assert callback(BareP()) is True


def test_processor_init_and_close_do_nothing():
    processor = BareP()
    assert processor.init(OutboxImpl([1]), context()) is None
    assert processor.close() is None


@pytest.mark.parametrize(
    ("callback", "message"),
    [
        (lambda p, inbox: p.process(2, inbox), "BareP received items on inbound ordinal 2"),
        (lambda p, inbox: p.restore_from_snapshot(inbox), "BareP was given snapshot data"),
    ],
    ids=["process", "restore_from_snapshot"],
)
def test_processor_without_process_or_restore_raises_naming_the_class(callback, message):
    inbox = ArrayDequeInbox([("k", "v")])
    with pytest.raises(UnsupportedOperationError, match=message):
        callback(BareP(), inbox)
    assert len(inbox) == 1


# --- receiving: try_process0..4 and the catch-all ------------------------------------------------


class CatchAllP(AbstractProcessor):
    def __init__(self) -> None:
        self.received: list[tuple[int, object]] = []

    def try_process_item(self, ordinal, item):
        self.received.append((ordinal, item))
        return True


@pytest.mark.parametrize("ordinal", [0, 1, 2, 3, 4, 7])
@pytest.mark.parametrize("inbox_type", INBOXES)
def test_every_ordinal_reaches_the_catch_all_by_default(ordinal, inbox_type):
    processor = CatchAllP()
    started(processor)
    inbox = inbox_type(["a", "b"])
    processor.process(ordinal, inbox)
    assert processor.received == [(ordinal, "a"), (ordinal, "b")]
    assert inbox.is_empty()


def ordinal_specific_processor(n: int) -> AbstractProcessor:
    """An AbstractProcessor overriding only `try_process{n}`."""

    def try_process_n(self, item):
        self.received.append(item)
        return True

    cls = type(f"Only{n}P", (AbstractProcessor,), {f"try_process{n}": try_process_n})
    processor = cls()
    processor.received = []
    return processor


@pytest.mark.parametrize("n", range(5))
def test_try_process_n_receives_the_items_of_ordinal_n(n):
    processor = ordinal_specific_processor(n)
    started(processor)
    processor.process(n, ArrayDequeInbox([n, n + 10]))
    assert processor.received == [n, n + 10]
    other = (n + 1) % 5
    inbox = ArrayDequeInbox(["stray"])
    with pytest.raises(
        UnsupportedOperationError, match=f"Only{n}P .* try_process{other}\\(item\\)"
    ):
        processor.process(other, inbox)
    assert list(inbox.queue) == ["stray"]


@pytest.mark.parametrize("ordinal", [0, 4, 7])
def test_not_overriding_any_try_process_is_a_clear_error(ordinal):
    class SilentP(AbstractProcessor):
        pass

    processor = SilentP()
    started(processor)
    inbox = ArrayDequeInbox(["item"])
    with pytest.raises(UnsupportedOperationError) as raised:
        processor.process(ordinal, inbox)
    assert str(raised.value) == (
        f"SilentP received item 'item' on inbound ordinal {ordinal} but overrides neither "
        f"try_process{ordinal}(item) nor try_process_item(ordinal, item)"
    )
    assert len(inbox) == 1


class TimesTenP(AbstractProcessor):
    """Emits item * 10 and reports whether the outbox took it, as the manual's rule says."""

    def try_process0(self, item):
        return self.try_emit(item * 10)


@pytest.mark.parametrize("inbox_type", INBOXES)
def test_an_item_stays_in_the_inbox_until_try_process_returns_true(inbox_type):
    processor = TimesTenP()
    outbox = started(processor, capacities=[1])
    inbox = inbox_type([1, 2, 3])
    processor.process(0, inbox)
    assert list(outbox.buckets[0]) == [10]
    assert list(inbox.queue) == [2, 3]  # 2 was refused: it is not removed
    processor.process(0, inbox)  # the outbox is still full: nothing moves
    assert (list(outbox.buckets[0]), list(inbox.queue)) == ([10], [2, 3])
    emitted, calls = run_to_completion(
        lambda: processor.process(0, inbox) or inbox.is_empty(), outbox
    )
    assert emitted == [10, 20, 30]
    assert calls == 3


def test_try_emit_targets_ordinals():
    processor = TimesTenP()
    outbox = started(processor, capacities=[1, 1])
    assert processor.try_emit("x", 1) is True
    assert processor.try_emit("y", [0]) is True
    assert processor.try_emit("z") is False
    assert [list(b) for b in outbox.buckets] == [["y"], ["x"]]


def test_try_process_watermark_defaults_to_true():
    processor = TimesTenP()
    started(processor)
    assert processor.try_process_watermark(Watermark(5)) is True


# --- emitting through traversers ------------------------------------------------------------------


class EmitAllP(AbstractProcessor):
    """The manual's GenerateNumbersP shape: complete() emits from the source it was given."""

    def __init__(self, source, ordinal=None) -> None:
        self.source = source
        self.ordinal = ordinal

    def complete(self):
        return self.emit_from_traverser(self.source, self.ordinal)


@pytest.mark.parametrize(
    "make_source",
    [
        lambda: traverse_iterable(range(7)),
        lambda: list(range(7)),
        lambda: tuple(range(7)),
        lambda: range(7),
        lambda: (i for i in range(7)),
    ],
    ids=["traverser", "list", "tuple", "range", "generator"],
)
def test_emit_from_traverser_resumes_at_the_refused_item(make_source):
    processor = EmitAllP(make_source())
    outbox = started(processor, capacities=[3])
    emitted, calls = run_to_completion(processor.complete, outbox)
    assert emitted == list(range(7))
    assert calls == 3  # 3 + 3 + 1 items: refused twice, resumed where it stopped


def test_emit_from_traverser_to_one_ordinal():
    processor = EmitAllP([1, 2], ordinal=1)
    outbox = started(processor, capacities=[4, 4])
    assert processor.complete()
    assert [list(b) for b in outbox.buckets] == [[], [1, 2]]


def test_a_list_emitted_again_after_completion_starts_from_its_head():
    buffer = [1, 2]
    processor = EmitAllP(buffer)
    outbox = started(processor, capacities=[10])
    assert processor.complete()
    buffer[:] = [3, 4]  # the same list object, refilled
    assert processor.complete()
    assert list(outbox.buckets[0]) == [1, 2, 3, 4]


def test_a_new_list_is_emitted_in_full():
    processor = EmitAllP([1, 2])
    outbox = started(processor, capacities=[10])
    processor.complete()
    processor.source = [3]
    processor.complete()
    assert list(outbox.buckets[0]) == [1, 2, 3]


class ItemAndSuccessorP(AbstractProcessor):
    """The manual's §8.4.3 example: for each number, emit it and its successor."""

    def __init__(self, as_list: bool = False) -> None:
        if as_list:
            self.flat_mapper_ = self.flat_mapper(lambda i: [i, i + 1])
        else:
            self.flat_mapper_ = self.flat_mapper(lambda i: traverse_iterable([i, i + 1]))

    def try_process_item(self, ordinal, item):
        return self.flat_mapper_.try_process(item)


@pytest.mark.parametrize("as_list", [False, True], ids=["traverser", "list"])
def test_flat_mapper_emits_every_output_of_every_item_once(as_list):
    processor = ItemAndSuccessorP(as_list)
    assert isinstance(processor.flat_mapper_, FlatMapper)
    outbox = started(processor, capacities=[1])
    inbox = ArrayDequeInbox([1, 10, 20])
    processor.process(0, inbox)
    assert list(inbox.queue) == [1, 10, 20]  # 1 emitted, 2 refused: the item 1 stays
    emitted, _ = run_to_completion(lambda: processor.process(0, inbox) or inbox.is_empty(), outbox)
    assert emitted == [1, 2, 10, 11, 20, 21]


def test_flat_mapper_to_an_ordinal():
    processor = CatchAllP()
    outbox = started(processor, capacities=[2, 2])
    mapper = processor.flat_mapper(lambda s: s.split(), ordinal=0)
    assert mapper.try_process("to be") is True
    assert [list(b) for b in outbox.buckets] == [["to", "be"], []]


# --- snapshots ------------------------------------------------------------------------------------


class CounterP(AbstractProcessor):
    """Keeps counts per key; saves them to the snapshot and restores them entry by entry."""

    def __init__(self, counts=None, as_list: bool = False) -> None:
        self.counts = dict(counts or {})
        self.as_list = as_list
        self.restored: list = []
        self.entries = None

    def save_to_snapshot(self):
        if self.entries is None:
            items = list(self.counts.items())
            self.entries = items if self.as_list else traverse_iterable(items)
        if self.emit_from_traverser_to_snapshot(self.entries):
            self.entries = None
            return True
        return False

    def restore_from_snapshot_entry(self, key, value):
        self.restored.append((key, value))
        self.counts[key] = value


@pytest.mark.parametrize("as_list", [False, True], ids=["traverser", "list"])
def test_emit_from_traverser_to_snapshot_resumes_and_saves_each_entry_once(as_list):
    counts = {f"k{i}": i for i in range(5)}
    processor = CounterP(counts, as_list)
    outbox = started(processor, capacities=[1], snapshot_capacity=2)
    entries, calls = run_to_completion(processor.save_to_snapshot, outbox)
    assert entries == list(counts.items())
    assert calls == 3
    assert not outbox.has_unfinished_item()


def test_try_emit_to_snapshot_reports_a_full_snapshot_bucket():
    processor = CounterP()
    outbox = started(processor, snapshot_capacity=1)
    assert processor.try_emit_to_snapshot("a", 1) is True
    assert processor.try_emit_to_snapshot("b", 2) is False
    assert list(outbox.snapshot_bucket) == [("a", 1)]
    assert [list(b) for b in outbox.buckets] == [[]]


def test_restore_from_snapshot_passes_each_entry_to_restore_from_snapshot_entry():
    processor = CounterP()
    started(processor)
    inbox = ArrayDequeInbox([("a", 1), ("b", 2)])
    processor.restore_from_snapshot(inbox)
    assert processor.restored == [("a", 1), ("b", 2)]
    assert processor.counts == {"a": 1, "b": 2}
    assert inbox.is_empty()


def test_restore_without_restore_from_snapshot_entry_is_a_clear_error():
    processor = CatchAllP()
    started(processor)
    with pytest.raises(UnsupportedOperationError, match="CatchAllP was given snapshot entry 'a'"):
        processor.restore_from_snapshot(ArrayDequeInbox([("a", 1)]))


# --- init -----------------------------------------------------------------------------------------


class InitP(AbstractProcessor):
    def init(self, outbox, context):
        super().init(outbox, context)
        self.seen_in_init = (self.outbox, self.context, self.logger)


def test_init_sets_outbox_context_and_logger():
    processor = InitP()
    outbox = OutboxImpl([1])
    ctx = context("tokenize")
    processor.init(outbox, ctx)
    assert processor.seen_in_init == (outbox, ctx, ctx.logger)
    assert isinstance(processor.logger, logging.Logger)
    assert processor.logger.name == "jetspark.tokenize"
    processor.try_emit("x")
    assert list(outbox.buckets[0]) == ["x"]
