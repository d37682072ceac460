"""Port of Jet 0.7.1 `com.hazelcast.jet.pipeline.SinkBuilderTest`, and the contract of the
SinkBuilder's functions: one state per sink processor from `create_fn(context)`,
`on_receive_fn(state, item)` per item, `flush_fn(state)` after each batch of items,
`destroy_fn(state)` once at the end. Runs on LocalEngine with two members.

Deliberate difference: Jet's `fileSink` records each processor's directory in a Jet list
through `context.jetInstance()`; the port records it in a list of the test.
"""

from __future__ import annotations

import os
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from jetspark.core.pipeline import Pipeline, Sinks, Sources

from .support import ITEM_COUNT, WAIT_SECONDS, assert_same_bag, execute, sequence, serving

pytestmark = pytest.mark.timeout(180)


def draw_input(engine: Any, pipeline: Pipeline) -> Any:
    engine.get_list("src").extend(sequence(ITEM_COUNT))
    return pipeline.draw_from(Sources.list("src"))


def test_file_sink(engine: Any, tmp_path: Any) -> None:
    """`SinkBuilderTest.fileSink`: each processor appends to a file of its own; together the
    files hold every item."""
    directories: list[str] = []

    def create(context: Any) -> str:
        directory = tmp_path / f"sink-{context.global_processor_index}"
        directory.mkdir()
        path = directory / "items.txt"
        path.touch()
        directories.append(str(directory))
        return str(path)

    def append(path: str, item: int) -> None:
        with open(path, "a", encoding="utf-8") as file:
            file.write(f"{item}\n")

    p = Pipeline.create()
    draw_input(engine, p).drain_to(Sinks.builder(create, "file-sink").on_receive_fn(append).build())
    execute(engine, p)
    lines = []
    for directory in directories:
        for name in os.listdir(directory):
            with open(os.path.join(directory, name), encoding="utf-8") as file:
                lines += file.read().splitlines()
    assert len(directories) == 2  # one sink processor per member
    assert_same_bag(lines, [str(i) for i in range(ITEM_COUNT)])


class LineCounter(socketserver.ThreadingTCPServer):
    """A TCP server on 127.0.0.1 counting the lines its clients send."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CountLines)
        self.lines = 0
        self.lock = threading.Lock()

    @property
    def port(self) -> int:
        return self.server_address[1]


class _CountLines(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        server: Any = self.server
        for _ in self.rfile:
            with server.lock:
                server.lines += 1


@pytest.fixture
def line_counter() -> Iterator[LineCounter]:
    server = LineCounter()
    with serving(server):
        yield server


def test_socket_sink(engine: Any, line_counter: LineCounter) -> None:
    """`SinkBuilderTest.socketSink`: a writer per processor, flushed after each batch and
    closed at the end; the server reads every item."""
    port = line_counter.port

    def connect(context: Any) -> Any:
        return socket.create_connection(("127.0.0.1", port)).makefile("w", encoding="utf-8")

    sink = (
        Sinks.builder(connect, "socket-sink")
        .on_receive_fn(lambda writer, item: writer.write(f"{item}\n"))
        .flush_fn(lambda writer: writer.flush())
        .destroy_fn(lambda writer: writer.close())
        .build()
    )
    p = Pipeline.create()
    draw_input(engine, p).drain_to(sink)
    execute(engine, p)
    deadline = time.monotonic() + WAIT_SECONDS
    while line_counter.lines < ITEM_COUNT:  # the server reads after the job ended
        assert time.monotonic() < deadline, f"{line_counter.lines} of {ITEM_COUNT} lines"
        time.sleep(0.01)
    assert line_counter.lines == ITEM_COUNT


@dataclass
class SinkState:
    """What one sink processor did, in order: ("item", item), ("flush",), ("destroy",)."""

    index: int
    events: list[Any] = field(default_factory=list)


def test_functions_are_called_per_processor_state(engine: Any) -> None:
    """Every sink processor (two per member here) has its own state; each item is received
    by exactly one of them, every batch is followed by a flush, and each state is destroyed
    once, last."""
    states: list[SinkState] = []
    lock = threading.Lock()

    def create(context: Any) -> SinkState:
        state = SinkState(context.global_processor_index)
        with lock:
            states.append(state)
        return state

    sink = (
        Sinks.builder(create, "recording-sink")
        .on_receive_fn(lambda state, item: state.events.append(("item", item)))
        .flush_fn(lambda state: state.events.append(("flush",)))
        .destroy_fn(lambda state: state.events.append(("destroy",)))
        .preferred_local_parallelism(2)
        .build()
    )
    p = Pipeline.create()
    draw_input(engine, p).drain_to(sink)
    execute(engine, p)
    assert sorted(state.index for state in states) == [0, 1, 2, 3]
    received = [event[1] for state in states for event in state.events if event[0] == "item"]
    assert_same_bag(received, range(ITEM_COUNT))
    for state in states:
        assert state.events.count(("destroy",)) == 1 and state.events[-1] == ("destroy",)
        last_item = max(
            (n for n, event in enumerate(state.events) if event[0] == "item"), default=-1
        )
        assert ("flush",) in state.events[last_item + 1 : -1], state.index
