"""Port of Jet 0.7 `com.hazelcast.jet.core.WatermarkSourceUtilTest`, the part jetspark has.

jetspark has no `WatermarkSourceUtil`: its sources emit no watermarks, and
`insert_watermarks_p` holds the single-partition logic (one policy, throttling, idle timeout).
Ported: the single-partition test, on InsertWatermarksP with an injected clock (Jet passes
`now` in nanoseconds to `handleEvent`; jetspark's clock is in milliseconds). Not ported: the
multi-partition tests (`smokeTest`, `smokeTest_disabledIdleTimeout`, `test_zeroPartitions`,
`when_eventInOneOfTwoPartitions_then_wmAndIdleMessageForwardedAfterTimeout`).
"""

from __future__ import annotations

from typing import Any

from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext
from jetspark.core.watermark import IDLE_MESSAGE, Watermark
from jetspark.processors import insert_watermarks_p, whole_item
from jetspark.processors.watermark_policies import limiting_lag, no_throttling

from .support import Clock, do_and_drain

LAG = 3


def test_when_idle_event_idle_then_two_idle_messages_sent() -> None:
    """`WatermarkSourceUtilTest.when_idle_event_idle_then_twoIdleMessagesSent`."""
    clock = Clock(0)
    outbox = TestOutbox(1024)
    processor = insert_watermarks_p(
        whole_item, limiting_lag(LAG), no_throttling(), 10, clock=clock
    )()
    processor.init(outbox, TestProcessorContext())

    def handle(event: int | None) -> list[Any]:
        drained: list[Any] = []
        if event is None:
            do_and_drain(processor.try_process, outbox, drained)
        else:
            inbox = TestInbox().add(event)

            def process_once() -> bool:
                processor.process(0, inbox)
                return inbox.is_empty()

            do_and_drain(process_once, outbox, drained)
        return drained

    assert handle(10) == [Watermark(10 - LAG), 10]
    # When - become idle
    clock.now = 10
    assert handle(None) == [IDLE_MESSAGE]
    # When - another event, but no new WM
    assert handle(10) == [10]
    # When - become idle again
    assert handle(None) == []
    clock.now = 20
    assert handle(None) == [IDLE_MESSAGE]
