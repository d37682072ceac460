"""Port of Jet 0.7 `com.hazelcast.jet.core.PeekingWrapperTest`, parametrized as Jet's on default
versus custom `to_string`/`should_log` functions, each through the three supplier forms.

Deliberate differences: an item offered to every ordinal at once (`offer(item)`, Jet's ordinal
-1) is logged once as "Output: item" (jetspark's outbox accepts it in every bucket or in none),
where Jet logs "Output to ordinal N" per ordinal; an item offered to one ordinal is logged as
Jet's "Output to ordinal N". A snapshot entry reaches `to_string` as a `(key, value)` tuple
(Jet: an `Entry`, printed `key=value`). Jet's `JetEvent` items do not exist in jetspark.
Mockito's `verify(logger)` becomes a logger whose records the test reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from jetspark.core import Processor, ProcessorMetaSupplier, ProcessorSupplier
from jetspark.core.inbox import Inbox
from jetspark.core.outbox import Outbox
from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext
from jetspark.core.watermark import Watermark
from jetspark.processors import peek_input_p, peek_output_p, peek_snapshot_p


class Records(logging.Handler):
    """Collects the messages a logger emits."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def take(self) -> list[str]:
        taken, self.messages = self.messages, []
        return taken


class Mode:
    """Default functions (None) or Jet's custom ones: "a" + item, even ints only."""

    def __init__(self, custom: bool) -> None:
        self.custom = custom

    def to_string(self, item: Any) -> str:
        return f"a{item}" if self.custom else str(item)

    def should_log(self, item: Any) -> bool:
        return not self.custom or not isinstance(item, int) or item % 2 == 0

    def wrapper_args(self) -> tuple[Any, ...]:
        return (self.to_string, self.should_log) if self.custom else ()

    def snapshot_args(self) -> tuple[Any, ...]:
        if not self.custom:
            return ()
        return (
            lambda entry: f"{self.to_string(entry[0])}={self.to_string(entry[1])}",
            lambda entry: self.should_log(entry[0]),
        )


@pytest.fixture(params=[False, True], ids=["defaultFunctions", "customFunctions"])
def mode(request: pytest.FixtureRequest) -> Mode:
    return Mode(request.param)


@pytest.fixture
def records() -> Records:
    return Records()


def context(records: Records) -> TestProcessorContext:
    logger = logging.getLogger(f"jetspark.test.peek.{id(records)}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.handlers = [records]
    return TestProcessorContext().set_logger(logger)


class PeekRemoveProcessor(Processor):
    """Takes its input with peek() and poll()."""

    def process(self, ordinal: int, inbox: Inbox) -> None:
        while (item := inbox.peek()) is not None:
            assert inbox.peek() == item, "second peek didn't return the same object"
            assert inbox.poll() == item, "poll didn't return the same object"
        assert inbox.peek() is None


class PollProcessor(Processor):
    """Takes its input with poll()."""

    def process(self, ordinal: int, inbox: Inbox) -> None:
        while inbox.poll() is not None:
            pass


class ListSource(Processor):
    """Emits its items to every ordinal, one per `complete()` call that finds room."""

    def __init__(self, *items: Any) -> None:
        self._items = list(items)

    def init(self, outbox: Outbox, context: Any) -> None:
        self._outbox = outbox

    def complete(self) -> bool:
        while self._items:
            if not self._outbox.offer(self._items[0]):
                return False
            self._items.pop(0)
        return True


class CountingSource(Processor):
    """Emits 0, 1, 2... and saves its counter as `(counter, counter)`."""

    def __init__(self) -> None:
        self._counter = 0

    def init(self, outbox: Outbox, context: Any) -> None:
        self._outbox = outbox

    def complete(self) -> bool:
        if self._outbox.offer(self._counter):
            self._counter += 1
        return False

    def save_to_snapshot(self) -> bool:
        return self._outbox.offer_to_snapshot(self._counter, self._counter)


SUPPLIER_FORMS: dict[str, Callable[[Callable[[], Processor]], Any]] = {
    "distributedSupplier": lambda fn: fn,
    "processorSupplier": ProcessorSupplier.of,
    "metaSupplier": ProcessorMetaSupplier.of,
}


def one_processor(peeking: ProcessorMetaSupplier) -> Processor:
    """The single processor a peeking meta-supplier makes for one member."""
    return peeking.get([0])(0).get(1)[0]


def assert_peek_input(processor: Processor, mode: Mode, records: Records) -> None:
    processor.init(TestOutbox(1), context(records))
    processor.process(0, TestInbox().add(0))
    assert records.take() == [f"Input from ordinal 0: {mode.to_string(0)}"]
    processor.process(1, TestInbox().add(0))
    assert records.take() == [f"Input from ordinal 1: {mode.to_string(0)}"]
    processor.process(0, TestInbox().add(1))
    assert records.take() == ([] if mode.custom else ["Input from ordinal 0: 1"])
    wm = Watermark(1)
    processor.try_process_watermark(wm)
    assert records.take() == [f"Input: {wm}"]


@pytest.mark.parametrize(
    ("jet_test", "form", "wrapped"),
    [
        (
            "when_peekInputWithPeekingProcessor_distributedSupplier",
            "distributedSupplier",
            PeekRemoveProcessor,
        ),
        (
            "when_peekInputWithPollingProcessor_distributedSupplier",
            "distributedSupplier",
            PollProcessor,
        ),
        ("when_peekInput_processorSupplier", "processorSupplier", PeekRemoveProcessor),
        ("when_peekInput_metaSupplier", "metaSupplier", PeekRemoveProcessor),
    ],
)
def test_when_peek_input(jet_test: str, form: str, wrapped: Any, mode: Mode, records: Records):
    """`PeekingWrapperTest.when_peekInput*` (four tests, named in `jet_test`)."""
    peeking = peek_input_p(SUPPLIER_FORMS[form](wrapped), *mode.wrapper_args())
    assert_peek_input(one_processor(peeking), mode, records)


@pytest.mark.parametrize(
    "jet_test",
    [
        "when_peekOutput_distributedSupplier",
        "when_peekOutput_processorSupplier",
        "when_peekOutput_metaSupplier",
    ],
)
def test_when_peek_output(jet_test: str, mode: Mode, records: Records) -> None:
    """`PeekingWrapperTest.when_peekOutput*` (three tests, named in `jet_test`)."""
    form = jet_test.rsplit("_", 1)[1]
    source = SUPPLIER_FORMS[form](lambda: ListSource(0, 1, Watermark(2)))
    processor = one_processor(peek_output_p(source, *mode.wrapper_args()))
    outbox = TestOutbox(1, 1)
    processor.init(outbox, context(records))

    def next_round() -> list[str]:
        outbox.reset()
        processor.complete()
        return records.take()

    assert next_round() == [f"Output: {mode.to_string(0)}"]
    assert next_round() == ([] if mode.custom else ["Output: 1"])
    assert next_round() == [f"Output: {Watermark(2)}"]
    wm = Watermark(3)
    processor.try_process_watermark(wm)
    assert records.take() == [f"Output forwarded: {wm}"]


@pytest.mark.parametrize(
    "jet_test",
    [
        "when_peekSnapshot_distributedSupplier",
        "when_peekSnapshot_procSupplier",
        "when_peekSnapshot_metaSupplier",
    ],
)
def test_when_peek_snapshot(jet_test: str, mode: Mode, records: Records) -> None:
    """`PeekingWrapperTest.when_peekSnapshot*` (three tests, named in `jet_test`)."""
    form = {"procSupplier": "processorSupplier"}.get(jet_test.rsplit("_", 1)[1])
    form = form or jet_test.rsplit("_", 1)[1]
    processor = one_processor(
        peek_snapshot_p(SUPPLIER_FORMS[form](CountingSource), *mode.snapshot_args())
    )
    processor.init(TestOutbox(16, snapshot_capacity=16), context(records))
    processor.save_to_snapshot()
    expected = "a0=a0" if mode.custom else "(0, 0)"
    assert records.take() == [f"Output to snapshot: {expected}"]
    processor.complete()  # advance the counter
    processor.save_to_snapshot()
    assert records.take() == ([] if mode.custom else ["Output to snapshot: (1, 1)"])
