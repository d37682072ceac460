"""Port of Jet 0.7 `com.hazelcast.jet.impl.connector.WriteLoggerPTest`.

Deliberate differences: Mockito's mocks become a logger whose records the test reads and a
TestOutbox that must stay empty; Jet's FINE level is Python's DEBUG.
"""

from __future__ import annotations

import logging

from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext
from jetspark.core.watermark import Watermark
from jetspark.processors import write_logger_p


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelno, record.getMessage()))


def test_test() -> None:
    """`WriteLoggerPTest.test`."""
    records = Records()
    logger = logging.getLogger("jetspark.test.write_logger_p")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.handlers = [records]
    processor = write_logger_p()()
    outbox = TestOutbox(1)
    processor.init(outbox, TestProcessorContext().set_logger(logger))
    processor.process(0, TestInbox().add(1))
    wm = Watermark(2)
    assert processor.try_process_watermark(wm)
    assert list(outbox.queue(0)) == []
    assert records.records == [(logging.INFO, "1"), (logging.DEBUG, str(wm))]
