"""The TestSupport harness: correct processors pass, each classic processor bug is caught."""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Any

import pytest

from jetspark.core import AbstractProcessor, Processor, ProcessorMetaSupplier, ProcessorSupplier
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.core.test_support import (
    ALL_AT_ONCE,
    ONE_ITEM,
    ONE_ITEM_RESTORE_EVERY,
    TestMode,
    TestSupport,
)
from jetspark.core.traverser import Traverser, traverse_iterable
from jetspark.core.watermark import IDLE_MESSAGE, Watermark


def verify(supplier: Any) -> TestSupport:
    return TestSupport.verify_processor(supplier).disable_logging()


def failure(builder: TestSupport, expected: list[Any]) -> str:
    """Runs a verification that must fail and returns its message."""
    with pytest.raises(AssertionError) as caught:
        builder.expect_output(expected)
    return str(caught.value)


# --------------------------------------------------------------- correct processors


class Upper(AbstractProcessor):
    def try_process0(self, item: str) -> bool:
        return self.try_emit(item.upper())


class Words(AbstractProcessor):
    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, context)
        self.splitter = self.flat_mapper(str.split)

    def try_process0(self, line: str) -> bool:
        return self.splitter.try_process(line)


class WordCount(AbstractProcessor):
    """A keyed aggregator: one snapshot entry per word, results emitted by complete()."""

    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, context)
        self.counts: Counter[str] = Counter()
        self.results: Traverser | None = None
        self.snapshot: Traverser | None = None

    def try_process0(self, word: str) -> bool:
        self.counts[word] += 1
        return True

    def complete(self) -> bool:
        if self.results is None:
            self.results = traverse_iterable(sorted(self.counts.items()))
        return self.emit_from_traverser(self.results)

    def save_to_snapshot(self) -> bool:
        if self.snapshot is None:
            self.snapshot = traverse_iterable(list(self.counts.items()))
        done = self.emit_from_traverser_to_snapshot(self.snapshot)
        if done:
            self.snapshot = None
        return done

    def restore_from_snapshot_entry(self, key: str, value: int) -> None:
        self.counts[key] += value


class Join(AbstractProcessor):
    """Ordinal 0: (id, name) dimension rows; ordinal 1: (id, amount) facts -> (name, amount)."""

    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, context)
        self.names: dict[int, str] = {}
        self.snapshot: Traverser | None = None

    def try_process0(self, row: tuple[int, str]) -> bool:
        self.names[row[0]] = row[1]
        return True

    def try_process1(self, fact: tuple[int, int]) -> bool:
        return self.try_emit((self.names[fact[0]], fact[1]))

    def save_to_snapshot(self) -> bool:
        if self.snapshot is None:
            self.snapshot = traverse_iterable(list(self.names.items()))
        done = self.emit_from_traverser_to_snapshot(self.snapshot)
        if done:
            self.snapshot = None
        return done

    def restore_from_snapshot_entry(self, key: int, value: str) -> None:
        self.names[key] = value


class EvenOdd(AbstractProcessor):
    def try_process0(self, item: int) -> bool:
        return self.try_emit(item, item % 2)


class Tagger(AbstractProcessor):
    def try_process_item(self, ordinal: int, item: Any) -> bool:
        return self.try_emit((ordinal, item))


class WatermarkAware(AbstractProcessor):
    """Passes items; reports each watermark it sees before the engine forwards it."""

    def try_process0(self, item: Any) -> bool:
        return self.try_emit(item)

    def try_process_watermark(self, watermark: Watermark) -> bool:
        return self.try_emit(("seen", watermark.timestamp))


def test_map_passes() -> None:
    verify(Upper).input(["a", "b", "c"]).expect_output(["A", "B", "C"])


def test_flat_map_with_flat_mapper_passes() -> None:
    lines = ["to be or", "not to be"]
    verify(Words).input(lines).expect_output(["to", "be", "or", "not", "to", "be"])


def test_keyed_aggregator_with_snapshot_state_passes() -> None:
    words = ["b", "a", "b", "c", "a", "b"]
    verify(WordCount).input(words).expect_output([("a", 2), ("b", 3), ("c", 1)])


def test_two_ordinal_join_with_priorities_passes() -> None:
    dims = [(1, "one"), (2, "two")]
    facts = [(2, 20), (1, 10), (2, 22)]
    expected = [("two", 20), ("one", 10), ("two", 22)]
    verify(Join).inputs([dims, facts], priorities=[0, 1]).expect_output(expected)


def test_inputs_are_round_robin_without_priorities_and_by_priority_with_them() -> None:
    inputs = [["a1", "a2"], ["b1", "b2", "b3"]]
    mixed = [(0, "a1"), (1, "b1"), (0, "a2"), (1, "b2"), (1, "b3")]
    verify(Tagger).inputs(inputs).expect_output(mixed)
    by_priority = [(1, "b1"), (1, "b2"), (1, "b3"), (0, "a1"), (0, "a2")]
    verify(Tagger).inputs(inputs, priorities=[5, 1]).expect_output(by_priority)


def test_several_output_ordinals() -> None:
    verify(EvenOdd).input([1, 2, 3, 4, 5]).outputs([[2, 4], [1, 3, 5]])


def test_watermarks_go_to_try_process_watermark_and_are_forwarded() -> None:
    expected = ["x", ("seen", 5), Watermark(5), "y", ("seen", 9), Watermark(9)]
    verify(WatermarkAware).input(["x", Watermark(5), "y", Watermark(9)]).expect_output(expected)


def test_forwarded_watermarks_reach_every_output_ordinal() -> None:
    inputs = [1, Watermark(3), 2]
    verify(EvenOdd).input(inputs).outputs([[Watermark(3), 2], [1, Watermark(3)]])


def test_same_items_any_order_and_custom_checkers() -> None:
    verify(Upper).input(["a", "b"]).output_checker(TestSupport.SAME_ITEMS_ANY_ORDER).expect_output(
        ["B", "A"]
    )
    verify(Upper).input(["a"]).output_checker(lambda e, a: len(e) == len(a)).expect_output(["?"])
    message = failure(
        verify(Upper).input(["a", "b"]).output_checker(TestSupport.SAME_ITEMS_ANY_ORDER), ["A"]
    )
    assert "missing: [] (0 items); unexpected: ['B'] (1 items)" in message


def test_supplier_forms_and_their_lifecycle() -> None:
    events: list[str] = []

    class Supplier(ProcessorSupplier):
        def init(self, context: Any) -> None:
            events.append(f"init member {context.member_index}")

        def get(self, count: int) -> list[Processor]:
            return [Upper() for _ in range(count)]

        def close(self, error: BaseException | None) -> None:
            events.append(f"close {error!r}")

    verify(Supplier()).input(["a"]).expect_output(["A"])
    assert events == ["init member 0", "close None"]
    verify(ProcessorMetaSupplier.of(Upper)).input(["a"]).expect_output(["A"])
    verify(lambda: Upper()).input(["a"]).expect_output(["A"])
    verify(Upper()).input(["a"]).expect_output(["A"])


def test_a_processor_instance_is_copied_for_every_restore() -> None:
    template = WordCount()
    verify(template).input(["a", "a"]).expect_output([("a", 2)])
    assert not hasattr(template, "counts"), "the template itself is never initialised"


def test_context_options_reach_the_processor() -> None:
    class Where(AbstractProcessor):
        def complete(self) -> bool:
            c = self.context
            return self.try_emit(
                (
                    c.global_processor_index,
                    c.local_processor_index,
                    c.total_parallelism,
                    c.local_parallelism,
                    c.member_index,
                    c.member_count,
                )
            )

    builder = (
        verify(Where)
        .total_parallelism(6)
        .local_parallelism(2)
        .global_processor_index(5)
        .local_processor_index(1)
    )
    builder.expect_output([(5, 1, 6, 2, 2, 3)])
    with pytest.raises(ValueError, match="multiple of local_parallelism"):
        verify(Where).total_parallelism(3).local_parallelism(2).expect_output([])


def test_sink_without_outbound_edges_is_verified_with_verify() -> None:
    seen: list[Any] = []

    class Sink(AbstractProcessor):
        def try_process0(self, item: Any) -> bool:
            seen.append(item)
            return True

    verify(Sink).input([1, 2]).modes(ONE_ITEM).verify()
    assert seen == [1, 2]


def test_modes_picks_the_runs() -> None:
    inits: list[int] = []

    class Counting(Upper):
        def init(self, outbox: Any, context: Any) -> None:
            super().init(outbox, context)
            inits.append(1)

    verify(Counting).input(["a"]).modes(ONE_ITEM, ALL_AT_ONCE).expect_output(["A"])
    assert len(inits) == 2
    inits.clear()
    verify(Counting).input(["a"]).disable_snapshots().expect_output(["A"])
    assert len(inits) == 2
    with pytest.raises(ValueError, match="snapshots are disabled"):
        verify(Upper).modes(ONE_ITEM_RESTORE_EVERY).disable_snapshots().expect_output([])


def test_modes_include_inbox_of_all_items_and_custom_sizes() -> None:
    sizes: list[int] = []

    class InboxSizes(Processor):
        def process(self, ordinal: int, inbox: Any) -> None:
            sizes.append(len(inbox))
            inbox.drain(lambda item: None)

    verify(InboxSizes).input([1, 2, 3, 4, 5]).modes(TestMode(inbox_size=2)).verify()
    assert sizes == [2, 2, 1]
    sizes.clear()
    verify(InboxSizes).input([1, 2, 3]).modes(ALL_AT_ONCE).verify()
    assert sizes == [3]


def test_non_cooperative_processors_get_a_larger_outbox() -> None:
    class Burst(Processor):
        def init(self, outbox: Any, context: Any) -> None:
            self.outbox = outbox

        def is_cooperative(self) -> bool:
            return False

        def process(self, ordinal: int, inbox: Any) -> None:
            item = inbox.poll()
            for i in range(10):
                assert self.outbox.offer((item, i))

    expected = [(x, i) for x in "ab" for i in range(10)]
    verify(Burst).input(["a", "b"]).expect_output(expected)


def test_invalid_input_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="watermarks in the input must increase"):
        verify(Upper).input([Watermark(5), Watermark(5)]).expect_output([])
    with pytest.raises(ValueError, match="IDLE_MESSAGE"):
        verify(Upper).input([IDLE_MESSAGE]).expect_output([])
    with pytest.raises(ValueError, match="None cannot be an item"):
        verify(Upper).input([None]).expect_output([])
    with pytest.raises(ValueError, match="2 inputs but 1 priorities"):
        verify(Upper).inputs([[], []], priorities=[0])


def test_processor_exceptions_keep_their_type_and_gain_the_step() -> None:
    class Fails(AbstractProcessor):
        def try_process0(self, item: Any) -> bool:
            raise KeyError(item)

    with pytest.raises(KeyError) as caught:
        verify(Fails).input(["k"]).expect_output([])
    assert "process(ordinal 0) on input item #0 (ordinal 0: 'k')" in caught.value.__notes__[0]


def test_offer_to_a_missing_ordinal_names_the_bucket_count() -> None:
    with pytest.raises(IndexError, match=r"to ordinal\(s\) 1, but the outbox has 1 bucket"):
        verify(EvenOdd).input([2, 3]).expect_output([2])


# ------------------------------------------------------------------ buggy processors


class DropsRefusedItem(AbstractProcessor):
    """Bug: ignores try_emit's result, so a refused item is dropped and the input removed."""

    def try_process0(self, item: int) -> bool:
        self.try_emit(item * 10)
        return True


class RemovesBeforeEmitting(Processor):
    """Bug: takes the item out of the inbox first and keeps its output in a field."""

    def init(self, outbox: Any, context: Any) -> None:
        self.outbox = outbox
        self.pending: int | None = None

    def process(self, ordinal: int, inbox: Any) -> None:
        while True:
            if self.pending is None:
                if inbox.is_empty():
                    return
                self.pending = inbox.poll() * 10
            if not self.outbox.offer(self.pending):
                return
            self.pending = None

    def complete(self) -> bool:
        if self.pending is not None and not self.outbox.offer(self.pending):
            return False
        self.pending = None
        return True


class RunningSumWithoutSnapshot(AbstractProcessor):
    """Bug: keeps a running total but saves nothing to the snapshot."""

    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, context)
        self.total = 0
        self.pending: int | None = None

    def try_process0(self, item: int) -> bool:
        if self.pending is None:
            self.total += item
            self.pending = self.total
        if not self.try_emit(self.pending):
            return False
        self.pending = None
        return True


class WaitsForever(AbstractProcessor):
    """Bug: complete() waits for something that never comes, without emitting."""

    def try_process0(self, item: Any) -> bool:
        return True

    def complete(self) -> bool:
        return False


class Sleeper(AbstractProcessor):
    """Bug: blocks its cooperative thread (`calls` counts its sleeps, across instances)."""

    calls = 0

    def try_process0(self, item: Any) -> bool:
        Sleeper.calls += 1
        time.sleep(0.2)
        return self.try_emit(item)


class ReturnsTrueTooEarly(AbstractProcessor):
    """Bug: complete() reports done although its summary is still being emitted."""

    def try_process0(self, item: Any) -> bool:
        return True

    def complete(self) -> bool:
        self.summary = getattr(self, "summary", None) or traverse_iterable(["total", "end"])
        self.emit_from_traverser(self.summary)
        return True


class EmitsInClose(AbstractProcessor):
    """Bug: emits its result in close(), after the engine stopped draining the outbox."""

    def try_process0(self, item: Any) -> bool:
        return True

    def close(self) -> None:
        self.outbox.offer("bye")


def test_dropping_the_refused_item_is_caught() -> None:
    message = failure(verify(DropsRefusedItem).input([1, 2, 3]), [10, 20, 30])
    assert "broke the outbox contract" in message
    assert "offered item 30 while the earlier offer of 20 was refused" in message
    assert "process(ordinal 0) on input item #2 (ordinal 0: 3)" in message
    assert "The refused offer was made in process(ordinal 0) on input item #1" in message
    assert "removing input item #1 (ordinal 0: 2) before its output was accepted" in message
    assert "mode [inbox of one item, snapshots off]" in message


def test_removing_from_the_inbox_before_emitting_is_caught() -> None:
    message = failure(verify(RemovesBeforeEmitting).input([1, 2, 3]), [10, 20, 30])
    assert "processor output on ordinal 0 does not match" in message
    assert "mode [inbox of one item, restoring every snapshot]" in message
    assert "expected: [10, 20, 30] (3 items)" in message
    assert "actual:   [10, 30] (2 items)" in message
    assert "first difference at position 1: expected 20, actual 30" in message
    assert "actual[1] was emitted by process(ordinal 0) on input item #2 (ordinal 0: 3)" in message
    assert "the outbox refused 20, yet the call emptied the inbox" in message
    assert "an item must stay in the inbox until all of its output is accepted" in message


def test_forgetting_state_across_snapshot_restore_is_caught() -> None:
    message = failure(verify(RunningSumWithoutSnapshot).input([1, 2, 3]), [1, 3, 6])
    assert "mode [inbox of one item, restoring every snapshot]" in message
    assert "first difference at position 1: expected 3, actual 2" in message
    assert "on input item #1 (ordinal 0: 2), after 2 restore(s), the last after input item #0" in (
        message
    )
    assert "the output was right with snapshots off" in message
    assert "save_to_snapshot()" in message


def test_a_processor_that_makes_no_progress_is_caught() -> None:
    message = failure(verify(WaitsForever).input([1]), [])
    assert "complete() after input item #0 (ordinal 0: 1) in mode [inbox of one item, " in message
    assert "made no progress: it emitted nothing and returned False" in message
    assert "disable_progress_assertion()" in message


def test_a_processor_that_sleeps_past_the_cooperative_timeout_is_caught() -> None:
    Sleeper.calls = 0
    message = failure(verify(Sleeper).cooperative_timeout(50).input(["x"]), ["x"])
    assert Sleeper.calls == 1  # the first call over the timeout ends the verification
    assert re.search(r"process\(ordinal 0\) on input item #0 .* took \d+ ms", message)
    assert "over the cooperative timeout of 50 ms" in message
    assert "is_cooperative() -> False" in message
    verify(Sleeper).cooperative_timeout(0).modes(ONE_ITEM).input(["x"]).expect_output(["x"])


def test_emitting_after_complete_returned_true_is_caught() -> None:
    message = failure(verify(ReturnsTrueTooEarly).input([1]), ["total", "end"])
    assert "complete() after input item #0 (ordinal 0: 1)" in message
    assert "returned True while the outbox still refused 'total'" in message
    message = failure(verify(EmitsInClose).input([1]), [])
    assert "close() after input item #0 (ordinal 0: 1) in mode [inbox of one item" in message
    assert "emitted ['bye']" in message


def test_emitting_in_a_snapshot_after_complete_is_caught() -> None:
    class EmitsWhenSaving(Upper):
        def save_to_snapshot(self) -> bool:
            return self.try_emit("saving")

    message = failure(verify(EmitsWhenSaving).modes(ONE_ITEM_RESTORE_EVERY).input([]), [])
    assert "emitted 'saving' after complete() returned True" in message


def test_a_processor_that_emits_the_input_watermark_itself_is_caught() -> None:
    class EmitsWatermark(AbstractProcessor):
        def try_process_watermark(self, watermark: Watermark) -> bool:
            return self.try_emit(watermark)

    message = failure(verify(EmitsWatermark).input([Watermark(7)]), [Watermark(7)])
    assert "put Watermark(timestamp=7) on ordinal 0 after Watermark(timestamp=7)" in message
    assert "must not emit it again" in message


def test_a_key_saved_twice_in_one_snapshot_is_caught() -> None:
    class RestartsItsSnapshot(WordCount):
        def save_to_snapshot(self) -> bool:
            return self.emit_from_traverser_to_snapshot(list(self.counts.items()))

    message = failure(verify(RestartsItsSnapshot).input(["a", "b"]), [("a", 1), ("b", 1)])
    assert "save_to_snapshot() after input item #1 (ordinal 0: 'b')" in message
    assert "saved key 'a' twice in one snapshot" in message


def test_state_that_cannot_leave_the_process_is_caught() -> None:
    class KeepsAGenerator(Upper):
        def save_to_snapshot(self) -> bool:
            return self.try_emit_to_snapshot("state", (x for x in range(3)))

    message = failure(verify(KeepsAGenerator).input(["a"]), ["A"])
    assert "cannot be serialized" in message
    assert "mode [inbox of one item, restoring every snapshot]" in message


# ------------------------------------------------------------------- rescaled restore


class WordCountUnderOneKey(WordCount):
    """Bug: saves all counts under one non-partitioned key."""

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot("counts", dict(self.counts))

    def restore_from_snapshot_entry(self, key: str, value: dict[str, int]) -> None:
        self.counts.update(value)


WORDS = ["apple", "fig", "kiwi", "apple", "plum", "fig", "apple", "pear", "kiwi", "lime"]
COUNTS = sorted(Counter(WORDS).items())


@pytest.mark.parametrize(("n", "m"), [(1, 3), (3, 2), (2, 2), (4, 1)])
def test_keyed_aggregator_survives_rescaled_restore(n: int, m: int) -> None:
    builder = verify(WordCount).input(WORDS).modes(ONE_ITEM)
    builder.restore_rescaled(n, m, key_fn=lambda word: word).expect_output(COUNTS)


def test_state_under_a_non_partitioned_key_fails_rescaled_restore() -> None:
    builder = verify(WordCountUnderOneKey).input(WORDS).modes(ONE_ITEM)
    message = failure(builder.restore_rescaled(2, 3, key_fn=lambda word: word), COUNTS)
    assert "rescaled restore from 2 to 3 processors, snapshot taken after input item #4" in message
    assert "missing: [('apple', 3)" in message
    assert "snapshot key 'counts' was saved by processor(s) [0, 1] of 2, but no item" in message
    assert "broadcast_key(key)" in message


def summed_per_key(expected: list[Any], actual: list[Any]) -> bool:
    """An output checker for partial results: the values summed per key are equal."""

    def totals(entries: list[Any]) -> Counter[Any]:
        counts: Counter[Any] = Counter()
        for key, value in entries:
            counts[key] += value
        return counts

    return totals(expected) == totals(actual)


def test_rescaled_restore_compares_by_the_tests_own_checker() -> None:
    """Words routed by length, counts saved by word: after the restore a word's count can be
    split over two instances (partial results, as a first aggregation stage emits them)."""
    builder = verify(WordCount).input(WORDS).modes(ONE_ITEM).restore_rescaled(2, 3, key_fn=len)
    assert "missing: [('apple', 3)" in failure(builder, COUNTS)  # the default: any order
    builder.output_checker(summed_per_key).expect_output(COUNTS)

    builder.output_checker(lambda expected, actual: sorted(expected) == sorted(actual))
    message = failure(builder, COUNTS)
    assert "(union of all instances, by the output checker, watermarks left out)" in message


def test_broadcast_key_entries_reach_every_new_instance() -> None:
    class CountsWithSharedPrefix(WordCount):
        def init(self, outbox: Any, context: Any) -> None:
            super().init(outbox, context)
            self.prefix = "w"

        def try_process0(self, word: str) -> bool:
            self.prefix = "word"
            return super().try_process0(word)

        def complete(self) -> bool:
            if self.results is None:
                items = sorted((f"{self.prefix}:{k}", v) for k, v in self.counts.items())
                self.results = traverse_iterable(items)
            return self.emit_from_traverser(self.results)

        def save_to_snapshot(self) -> bool:
            if self.snapshot is None:
                entries = [(broadcast_key("prefix"), self.prefix), *self.counts.items()]
                self.snapshot = traverse_iterable(entries)
            return super().save_to_snapshot()

        def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
            if key == broadcast_key("prefix"):
                self.prefix = value
            else:
                super().restore_from_snapshot_entry(key, value)

    expected = [(f"word:{k}", v) for k, v in COUNTS]
    builder = verify(CountsWithSharedPrefix).input(WORDS).modes(ONE_ITEM)
    builder.restore_rescaled(2, 3, key_fn=lambda word: word).expect_output(expected)


def test_rescaled_join_broadcasts_the_dimension_side() -> None:
    dims = [(1, "one"), (2, "two"), (3, "three")]
    facts = [(2, 20), (1, 10), (3, 30), (2, 22)]
    expected = [("two", 20), ("one", 10), ("three", 30), ("two", 22)]
    builder = verify(Join).inputs([dims, facts], priorities=[0, 1]).modes(ONE_ITEM)
    builder.restore_rescaled(2, 3, key_fn=[None, lambda fact: fact[0]])
    builder.output_checker(TestSupport.SAME_ITEMS_ANY_ORDER).expect_output(expected)


def test_restore_rescaled_validates_its_arguments() -> None:
    with pytest.raises(ValueError, match="from_parallelism must be >= 1"):
        verify(WordCount).restore_rescaled(0, 2, key_fn=str)
    with pytest.raises(ValueError, match="1 key functions for 2 inputs"):
        verify(Join).inputs([[], []]).restore_rescaled(1, 2, key_fn=[str]).expect_output([])


class Countdown(AbstractProcessor):
    """A source: emits 3, 2, 1, one per complete() call, keeping its position in the snapshot."""

    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, context)
        self.next = 3

    def complete(self) -> bool:
        if not self.try_emit(self.next):
            return False
        self.next -= 1
        return self.next == 0

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot(broadcast_key("next"), self.next)

    def restore_from_snapshot_entry(self, key: Any, value: int) -> None:
        self.next = value


def test_a_source_is_snapshotted_between_complete_calls() -> None:
    verify(Countdown).expect_output([3, 2, 1])

    class ForgetsPosition(Countdown):
        def save_to_snapshot(self) -> bool:
            return True

    message = failure(verify(ForgetsPosition), [3, 2, 1])
    assert "complete() before any input in mode [inbox of one item, restoring every snapshot]" in (
        message
    )
    assert re.search(r"is call number \d+ of this run, which never ends: the processor", message)
    assert "start over after each snapshot restore" in message


def test_disable_complete_call_for_a_streaming_processor() -> None:
    class Streaming(Upper):
        def complete(self) -> bool:
            return False

    verify(Streaming).disable_complete_call().input(["a"]).expect_output(["A"])


_UNSET = object()


def test_a_processor_instance_keeps_its_sentinels_when_copied() -> None:
    class WithSentinel(Upper):
        def __init__(self) -> None:
            self.pending = _UNSET
            self.options = {"default": _UNSET}

        def complete(self) -> bool:
            return self.try_emit(self.pending is _UNSET and self.options["default"] is _UNSET)

    verify(WithSentinel()).input(["a"]).expect_output(["A", True])
