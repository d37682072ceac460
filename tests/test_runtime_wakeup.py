"""Waking an idle driver when another thread pushes into its queues (core/runtime/wakeup.py)."""

from __future__ import annotations

import select
import threading

import pytest

from jetspark.core import DAG, Context, Inbox, JobConfig, Outbox, Processor, Stores
from jetspark.core.runtime import Queue, build_member, plan_job
from jetspark.core.runtime.wakeup import Wakeup
from jetspark.edges import between

pytestmark = pytest.mark.timeout(30)

LONG_WAIT = 60.0
"""Longer than the test's timeout: a wait that returns did so because it was woken."""


def test_a_notification_before_the_wait_keeps_the_driver_from_waiting():
    wakeup = Wakeup()
    blocked: list[float] = []
    wakeup.begin_round()
    wakeup.notify()
    wakeup.wait(LONG_WAIT, blocked.append)
    assert blocked == []
    wakeup.begin_round()
    wakeup.wait(0.0, blocked.append)
    assert blocked == [0.0], "a round without input waits"
    wakeup.close()


def test_a_notification_from_another_thread_ends_a_wait_under_way():
    wakeup = Wakeup()
    waiting = threading.Event()

    def block(seconds: float) -> None:
        waiting.set()
        wakeup._block(seconds)

    producer = threading.Thread(target=lambda: (waiting.wait(), wakeup.notify()))
    producer.start()
    wakeup.begin_round()
    wakeup.wait(LONG_WAIT, block)
    producer.join()
    assert not wakeup.waiting
    readable, _, _ = select.select([wakeup], [], [], 0)
    assert readable == [], "the wait took the notification's byte: no later wait ends early"
    wakeup.close()


def test_a_notification_after_close_does_nothing():
    wakeup = Wakeup()
    wakeup.waiting = True
    wakeup.close()
    wakeup.notify()


def test_a_push_notifies_the_consumers_wakeup():
    queue = Queue(10)
    wakeup = Wakeup()
    queue.wakeup = wakeup
    wakeup.begin_round()
    queue.push([1, 2])
    assert wakeup.notified
    wakeup.begin_round()
    queue.push_control("entry")
    assert wakeup.notified
    wakeup.close()


class Forward(Processor):
    def __init__(self, cooperative: bool) -> None:
        self._cooperative = cooperative

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox

    def is_cooperative(self) -> bool:
        return self._cooperative

    def process(self, ordinal: int, inbox: Inbox) -> None:
        while not inbox.is_empty() and self.outbox.offer(inbox.peek()):
            inbox.remove()


class Numbers(Processor):
    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox

    def complete(self) -> bool:
        return self.outbox.offer(1)


def test_each_queue_wakes_the_driver_of_its_consumer():
    dag = DAG()
    source = dag.new_vertex("source", Numbers).local_parallelism(1)
    threaded = dag.new_vertex("threaded", lambda: Forward(False)).local_parallelism(1)
    looped = dag.new_vertex("looped", lambda: Forward(True)).local_parallelism(1)
    dag.edge(between(source, threaded))
    dag.edge(between(threaded, looped))
    runtime = build_member(plan_job(dag, JobConfig(), 1, 1, stores=Stores()))
    runtime.run()
    by_name = {t.name: t for t in runtime.tasklets}
    (into_thread,) = by_name["threaded#0"].streams[0].queues
    (into_loop,) = by_name["looped#0"].streams[0].queues
    assert into_loop.wakeup is runtime.wakeup
    assert into_thread.wakeup is not None and into_thread.wakeup is not runtime.wakeup
