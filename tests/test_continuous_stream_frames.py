"""A stream between two continuous members delivers a frame that holds more items than the
downstream queue takes, part by part (core/spark/continuous/streams.py), and bounds a link by
bytes as well as entries (flow.py).

A non-cooperative upstream pushes from its own thread, so several of its chunks can wait for the
stream's next round and leave as one frame of up to the link's window (two queue sizes). The
receiver used to move a frame into the queue only whole: such a frame never fit, no ack came
back, and the job froze (the latency benchmark at 100,000 events/s did). No Spark is needed:
the two members' streams talk over a loopback connection.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from proven_sockets import proven_pair

from jetspark.core import DAG, JobConfig
from jetspark.core.runtime.exchange import Link
from jetspark.core.runtime.plan import plan_job
from jetspark.core.runtime.queue import DONE_ITEM, Queue
from jetspark.core.runtime.wakeup import Wakeup
from jetspark.core.spark.continuous.security import job_certificate
from jetspark.core.spark.continuous.streams import PeerStream
from jetspark.edges import EdgeConfig, between
from jetspark.processors import noop_p

QUEUE_SIZE = 4
LONG_WAIT = 60.0
"""Longer than the wake-up test's timeout: a wait that returns did so because it was woken."""


@pytest.fixture
def link() -> Link:
    """The link from processor 0 (member 0) to processor 1 (member 1) of a distributed edge
    whose queues hold QUEUE_SIZE entries."""
    dag = DAG("two-members")
    source = dag.new_vertex("source", noop_p(), local_parallelism=1)
    sink = dag.new_vertex("sink", noop_p(), local_parallelism=1)
    dag.edge(between(source, sink).distributed().set_config(EdgeConfig(queue_size=QUEUE_SIZE)))
    return Link(plan_job(dag, JobConfig(), 2, 1).edges[0], 0, 1)


@pytest.fixture(params=[None, job_certificate()], ids=["plain", "tls"])
def streams(request: pytest.FixtureRequest) -> Iterator[tuple[PeerStream, PeerStream]]:
    """Member 0's and member 1's streams to each other, over a proven loopback connection
    (over TLS, too)."""
    (left, left_frames), (right, right_frames) = proven_pair(tls=request.param)
    for end in (left, right):
        end.setblocking(False)
    yield PeerStream(0, 1, left, left_frames), PeerStream(1, 0, right, right_frames)
    left.close()
    right.close()


def _take(queue: Queue) -> list[Any]:
    """What the downstream processor's inbound edge takes out of the queue in one round."""
    items: list[Any] = []
    while queue.chunks:
        chunk = queue.chunks.popleft()
        items += chunk
        queue.popped += len(chunk)
    return items


def test_a_frame_larger_than_the_downstream_queue_arrives_whole_and_is_acknowledged(
    link: Link, streams: tuple[PeerStream, PeerStream]
) -> None:
    sender, receiver = streams
    channel = sender.channel(link)
    queue = Queue(QUEUE_SIZE)
    receiver.receive_into(link, queue)
    items = list(range(2 * QUEUE_SIZE))  # the whole window, in chunks that each fit
    for start in range(0, len(items), 3):
        channel.push(items[start : start + 3])
    assert channel.room() == 0

    received: list[Any] = []
    for _ in range(20):  # rounds of both members; the downstream takes what is queued each time
        sender.call()
        receiver.call()
        received += _take(queue)
    assert received == items
    assert channel.room() == channel.window  # every item acknowledged: the upstream may go on


MB = 1 << 20


def _push_while_room(channel: Any, items: list[bytes], sender: PeerStream) -> int:
    """Pushes one item at a time while the channel has room, letting the stream frame each
    (as the member's rounds do); the number pushed."""
    pushed = 0
    while pushed < len(items) and channel.room() > 0:
        channel.push([items[pushed]])
        pushed += 1
        sender.call()
    return pushed


def test_megabyte_items_stop_the_sender_at_the_byte_window_and_the_queue_at_its_bytes(
    link: Link, streams: tuple[PeerStream, PeerStream]
) -> None:
    """With the default 4 MB window and 2 MB queue per link (flow.py), items of just under
    1 MB fill both by bytes first: 4 in flight, 2 in the queue, where entries allowed 8 and 4."""
    sender, receiver = streams
    channel = sender.channel(link)
    queue = Queue(QUEUE_SIZE)
    receiver.receive_into(link, queue)
    items = [bytes([i]) * (MB - 1024) for i in range(20)]

    assert _push_while_room(channel, items, sender) == 4
    for _ in range(50):  # the receiver reads everything, moves what its queue's bytes allow
        receiver.call()
        sender.call()
    assert queue.size() == 2
    assert _push_while_room(channel, items[4:], sender) == 2  # acknowledged: room again

    received = _take(queue)
    pushed = 6
    for _ in range(500):  # rounds of both members until every item went through
        pushed += _push_while_room(channel, items[pushed:], sender)
        receiver.call()
        sender.call()
        received += _take(queue)
        if len(received) == len(items):
            break
    assert received == items
    assert channel.room() == 4


@pytest.mark.timeout(30)
def test_a_push_from_the_upstreams_thread_ends_the_member_loops_idle_wait(
    link: Link, streams: tuple[PeerStream, PeerStream]
) -> None:
    """A non-cooperative upstream pushes from its own thread: the loop that frames its items
    must not sleep out its backoff first (that was up to 1 ms on every cross-member item)."""
    sender, receiver = streams
    channel = sender.channel(link)
    queue = Queue(QUEUE_SIZE)
    receiver.receive_into(link, queue)
    wakeup = Wakeup()
    sender.wake_on_input(wakeup)
    waiting = threading.Event()

    def block(seconds: float) -> None:
        waiting.set()
        wakeup._block(seconds)

    def upstream() -> None:
        waiting.wait()
        channel.push([7])

    thread = threading.Thread(target=upstream)
    thread.start()
    wakeup.begin_round()
    wakeup.wait(LONG_WAIT, block)  # returns once the push woke it
    thread.join()
    for _ in range(10):
        sender.call()
        receiver.call()
    assert _take(queue) == [7]
    wakeup.begin_round()
    channel.push_control(DONE_ITEM)
    assert wakeup.notified, "the end of the link wakes the loop too"
    wakeup.close()
