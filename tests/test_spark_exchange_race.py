"""The records a non-cooperative processor's thread sends while the task thread takes the
task's output are each taken exactly once (no Spark needed: the exchange alone)."""

from __future__ import annotations

import sys
import threading
from types import SimpleNamespace
from typing import Any

from jetspark.core.serialization import decode_batch
from jetspark.core.spark.stages.exchange import SparkExchange


def test_records_sent_from_another_thread_while_the_task_takes_them_are_never_lost() -> None:
    exchange = SparkExchange(iter(()), stage=0, heir_of=frozenset())
    edge = SimpleNamespace(id=3, queue_size=4)
    link = SimpleNamespace(edge=edge, downstream_local=0, upstream=0, downstream_member=1)
    sender = exchange.sender(link, None)  # type: ignore[arg-type]
    chunks = 5_000
    done = threading.Event()

    def send() -> None:
        for n in range(chunks):
            sender.push([n, n, n, n])
        done.set()

    taken: list[Any] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        thread = threading.Thread(target=send)
        thread.start()
        while not done.is_set():
            taken.extend(exchange.take_output())
        thread.join()
        taken.extend(exchange.take_output())
    finally:
        sys.setswitchinterval(interval)
    assert [body[3] for _, body in taken] == list(range(chunks))  # sequence numbers, in order
    items = [item for _, body in taken for item in decode_batch(body[4])]
    assert items == [n for n in range(chunks) for _ in range(4)]
