"""Port of Jet 0.7.1 `com.hazelcast.jet.pipeline.SourceBuilderTest`, and the SourceBuilder's
snapshot functions: a stream source saving its offset continues exactly once after a cancel
and a restore, or a `job.restart()`. Runs on LocalEngine with two members; the file sources
on SparkEngine too.

Deliberate differences: Jet 0.7.1 lets a stream source close its buffer, and its stream tests
close it at the end of the socket's lines and join the job. jetspark refuses `buffer.close()`
in an unbounded source, so the ported stream sources add nothing more at the end of the lines
and the jobs are cancelled once the sink holds the expected items. Without the final
watermark of a closed source, the window holding the last timestamp stays open: the
timestamped tests expect the windows before it (as Jet's `_andLateness` test does).
"""

from __future__ import annotations

import socket
import socketserver
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_tolerance_jobs import committed_lines

from jetspark.core import (
    DirectorySnapshotStore,
    InMemorySnapshotStore,
    JobCancelledError,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.job import Job
from jetspark.core.pipeline import (
    Pipeline,
    Sinks,
    SourceBuilder,
    TimestampedItem,
    WindowDefinition,
)
from jetspark.processors.aggregate import counting

from .support import ITEM_COUNT, WAIT_SECONDS, assert_same_bag, cancel, execute, run_until, serving

pytestmark = pytest.mark.timeout(180)

LINE_PREFIX = "line"
PREFERRED_LOCAL_PARALLELISM = 2
MEMBER_COUNT = 2
READERS = PREFERRED_LOCAL_PARALLELISM * MEMBER_COUNT
"""Processors of a distributed source: each reads every line in Jet's tests."""

LINES = [f"{LINE_PREFIX}{i}" for i in range(ITEM_COUNT)]


def timestamp_of(line: str) -> int:
    return int(line[len(LINE_PREFIX) :])


def read_line(reader: Any, buffer: Any, at_end: Callable[[Any], None]) -> None:
    """Adds the reader's next line to the buffer, or calls `at_end(buffer)` at its end."""
    line = reader.readline()
    if line:
        buffer.add(line.rstrip("\n"))
    else:
        at_end(buffer)


def close_buffer(buffer: Any) -> None:
    buffer.close()


def nothing_more(buffer: Any) -> None:
    """A stream source at the end of its input: it adds nothing (and is asked again)."""


def file_source(name: str, path: Path, distributed: bool = False) -> Any:
    """A batch source of the lines of `path`, one per call; closed at the end of the file."""

    def open_file(context: Any) -> Any:
        return open(path, encoding="utf-8")  # destroy_fn closes it

    builder = (
        SourceBuilder.batch(name, open_file)
        .fill_buffer_fn(lambda reader, buffer: read_line(reader, buffer, close_buffer))
        .destroy_fn(lambda reader: reader.close())
    )
    return (
        builder.distributed(PREFERRED_LOCAL_PARALLELISM).build() if distributed else builder.build()
    )


def test_batch_file_source(any_engine: Any, tmp_path: Path) -> None:
    """`SourceBuilderTest.batch_fileSource`: one processor reads the file, in order."""
    path = tmp_path / "stuff.txt"
    path.write_text("".join(f"{line}\n" for line in LINES))
    p = Pipeline.create()
    p.draw_from(file_source("file-source", path)).drain_to(Sinks.list("sink"))
    execute(any_engine, p)
    assert any_engine.get_list("sink") == LINES


def test_batch_file_source_distributed(any_engine: Any, tmp_path: Path) -> None:
    """`SourceBuilderTest.batch_fileSource_distributed`: every processor reads the file."""
    path = tmp_path / "stuff.txt"
    path.write_text("".join(f"{line}\n" for line in LINES))
    p = Pipeline.create()
    source = file_source("distributed-file-source", path, distributed=True)
    p.draw_from(source).drain_to(Sinks.list("sink"))
    execute(any_engine, p)
    assert_same_bag(any_engine.get_list("sink"), LINES * READERS)


def test_batch_distributed_slices(engine: Any) -> None:
    """Each processor of a distributed source reads its slice, told by its context's
    global_processor_index of total_parallelism; create_fn runs once per index."""
    indexes: list[tuple[int, int]] = []

    def create(context: Any) -> Iterator[int]:
        indexes.append((context.global_processor_index, context.total_parallelism))
        return iter(range(context.global_processor_index, ITEM_COUNT, context.total_parallelism))

    def fill(numbers: Iterator[int], buffer: Any) -> None:
        for n in numbers:
            buffer.add(n)
            if n % 10 == 0:
                return  # a few items per call
        buffer.close()

    source = SourceBuilder.batch("slices", create).fill_buffer_fn(fill).distributed(2).build()
    p = Pipeline.create()
    p.draw_from(source).drain_to(Sinks.list("sink"))
    execute(engine, p)
    assert sorted(indexes) == [(i, READERS) for i in range(READERS)]
    assert_same_bag(engine.get_list("sink"), range(ITEM_COUNT))


class LineServer(socketserver.ThreadingTCPServer):
    """A TCP server on 127.0.0.1 sending LINES to every client, then closing the connection
    (Jet's `startServer`)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _SendLines)

    @property
    def port(self) -> int:
        return self.server_address[1]


class _SendLines(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.wfile.write("".join(f"{line}\n" for line in LINES).encode())


@pytest.fixture
def line_server() -> Iterator[LineServer]:
    server = LineServer()
    with serving(server):
        yield server


def socket_reader(port: int) -> Callable[[Any], Any]:
    """create_fn: a line reader of a new connection to the server."""
    return lambda context: socket.create_connection(("127.0.0.1", port)).makefile(
        "r", encoding="utf-8"
    )


def test_stream_socket_source(engine: Any, line_server: LineServer) -> None:
    """`SourceBuilderTest.stream_socketSource`."""
    source = (
        SourceBuilder.stream("socket-source", socket_reader(line_server.port))
        .fill_buffer_fn(lambda reader, buffer: read_line(reader, buffer, nothing_more))
        .destroy_fn(lambda reader: reader.close())
        .build()
    )
    p = Pipeline.create()
    p.draw_from(source).drain_to(Sinks.list("sink"))
    assert run_until(engine, p, "sink", ITEM_COUNT) == LINES


def test_stream_socket_source_distributed(engine: Any, line_server: LineServer) -> None:
    """`SourceBuilderTest.stream_socketSource_distributed`: every processor reads the lines."""
    source = (
        SourceBuilder.stream("distributed-socket-source", socket_reader(line_server.port))
        .fill_buffer_fn(lambda reader, buffer: read_line(reader, buffer, nothing_more))
        .destroy_fn(lambda reader: reader.close())
        .distributed(PREFERRED_LOCAL_PARALLELISM)
        .build()
    )
    p = Pipeline.create()
    p.draw_from(source).drain_to(Sinks.list("sink"))
    assert_same_bag(run_until(engine, p, "sink", READERS * ITEM_COUNT), LINES * READERS)


def add_timestamped(reader: Any, buffer: Any) -> None:
    """Adds the next line with its number as the timestamp; nothing at the end."""
    line = reader.readline()
    if line:
        line = line.rstrip("\n")
        buffer.add(line, timestamp_of(line))


def timestamped_source(port: int, lateness: int = 0, distributed: bool = False) -> Any:
    builder = (
        SourceBuilder.timestamped_stream("socket-source-with-timestamps", socket_reader(port))
        .fill_buffer_fn(add_timestamped)
        .destroy_fn(lambda reader: reader.close())
    )
    if lateness:
        builder = builder.allowed_lateness(lateness)
    if distributed:
        builder = builder.distributed(PREFERRED_LOCAL_PARALLELISM)
    return builder.build()


def count_per_timestamp(engine: Any, source: Any, windows: int) -> list[Any]:
    """Counts the items per tumbling(1) window until `windows` windows were emitted."""
    p = Pipeline.create()
    p.draw_from(source).window(WindowDefinition.tumbling(1)).aggregate(counting()).drain_to(
        Sinks.list("sink")
    )
    return run_until(engine, p, "sink", windows)


def test_stream_socket_source_with_timestamps(engine: Any, line_server: LineServer) -> None:
    """`SourceBuilderTest.stream_socketSource_withTimestamps`: one item per timestamp; every
    window before the last timestamp's closes."""
    output = count_per_timestamp(engine, timestamped_source(line_server.port), ITEM_COUNT - 1)
    assert output == [TimestampedItem(i, 1) for i in range(1, ITEM_COUNT)]


def test_stream_socket_source_with_timestamps_and_lateness(
    engine: Any, line_server: LineServer
) -> None:
    """`SourceBuilderTest.stream_socketSource_withTimestamps_andLateness`: the watermark lags
    `lateness` behind the last timestamp, and so do the windows closed."""
    lateness = 10
    source = timestamped_source(line_server.port, lateness=lateness)
    output = count_per_timestamp(engine, source, ITEM_COUNT - lateness - 1)
    assert output == [TimestampedItem(i, 1) for i in range(1, ITEM_COUNT - lateness)]


def test_stream_distributed_socket_source_with_timestamps(
    engine: Any, line_server: LineServer
) -> None:
    """`SourceBuilderTest.stream_distributed_socketSource_withTimestamps`: every processor
    reads every line, so each window counts one item per processor."""
    source = timestamped_source(line_server.port, distributed=True)
    output = count_per_timestamp(engine, source, ITEM_COUNT - 1)
    assert output == [TimestampedItem(i, READERS) for i in range(1, ITEM_COUNT)]


# Exactly-once: a stream source with snapshot functions, cancelled and continued.

NUMBERS = 600
EXACTLY_ONCE = JobConfig(
    processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=10
)


class Counter:
    """A stream source of 0..NUMBERS-1, 25 numbers per call; distributed, each processor
    emits the numbers n with n % total_parallelism == index. It emits none at or above `limit`
    (raised by the test) and snapshots the next number it would emit. `restored` records
    (processor index, saved values) of every restore."""

    def __init__(self, limit: int, distributed: bool) -> None:
        self.limit = limit
        self.distributed = distributed
        self.restored: list[tuple[int, list[int]]] = []

    def create(self, context: Any) -> dict[str, int]:
        index = context.global_processor_index
        if not self.distributed:
            return {"index": index, "step": 1, "next": 0}
        return {"index": index, "step": context.total_parallelism, "next": index}

    def fill(self, state: dict[str, int], buffer: Any) -> None:
        for _ in range(25):
            if state["next"] >= min(self.limit, NUMBERS):
                return
            buffer.add(state["next"])
            state["next"] += state["step"]

    def restore(self, state: dict[str, int], saved: list[int]) -> None:
        self.restored.append((state["index"], list(saved)))
        (state["next"],) = saved

    def pipeline(self, out: str) -> Pipeline:
        builder = (
            SourceBuilder.stream("counter", self.create)
            .fill_buffer_fn(self.fill)
            .create_snapshot_fn(lambda state: state["next"])
            .restore_snapshot_fn(self.restore)
        )
        if self.distributed:
            builder = builder.distributed(PREFERRED_LOCAL_PARALLELISM)
        p = Pipeline.create()
        p.draw_from(builder.build()).map(str).drain_to(Sinks.files_transactional(out))
        return p


def wait_for_snapshot(job: Job) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while job.metrics.snapshot_count < 1:
        assert time.monotonic() < deadline, f"no snapshot committed in {WAIT_SECONDS} s"
        time.sleep(0.01)


def wait_for_lines(out: str, count: int, job: Job) -> list[str]:
    """Waits until the committed files hold `count` lines; they are returned."""
    deadline = time.monotonic() + WAIT_SECONDS
    while len(lines := committed_lines(out)) < count:
        assert not job.status.is_terminal, f"the job ended with {len(lines)} of {count} lines"
        assert time.monotonic() < deadline, f"{len(lines)} of {count} lines in {WAIT_SECONDS} s"
        time.sleep(0.01)
    return lines


def test_snapshot_functions_continue_exactly_once_from_a_directory_store(
    engine: Any, tmp_path: Path
) -> None:
    """Cancelled after its first snapshot and continued from the store's latest snapshot, the
    source emits what follows its saved offset: every number is committed once."""
    counter, out = Counter(NUMBERS // 2, distributed=False), str(tmp_path / "out")
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    first = engine.new_job(counter.pipeline(out), EXACTLY_ONCE, snapshot_store=store)
    wait_for_snapshot(first)
    first.cancel()
    with pytest.raises(JobCancelledError):
        first.join(60)
    assert len(committed_lines(out)) <= NUMBERS // 2
    counter.limit = NUMBERS
    second = engine.new_job(
        counter.pipeline(out),
        EXACTLY_ONCE,
        snapshot_store=store,
        restore_from=store.latest(),
    )
    lines = wait_for_lines(out, NUMBERS, second)
    cancel(second)
    assert lines == sorted(str(n) for n in range(NUMBERS))
    assert committed_lines(out) == lines
    assert [index for index, _ in counter.restored] == [0]  # one reader, one saved offset
    assert len(counter.restored[0][1]) == 1


def test_snapshot_functions_of_a_distributed_source_survive_a_restart(
    engine: Any, tmp_path: Path
) -> None:
    """`job.restart()` of a distributed source (an in-memory store): each processor gets back
    its own saved offset, and every number is committed once."""
    counter, out = Counter(NUMBERS // 2, distributed=True), str(tmp_path / "out")
    job = engine.new_job(
        counter.pipeline(out), EXACTLY_ONCE, snapshot_store=InMemorySnapshotStore()
    )
    wait_for_snapshot(job)
    counter.limit = NUMBERS
    resumed = job.restart()
    lines = wait_for_lines(out, NUMBERS, resumed)
    cancel(resumed)
    assert lines == sorted(str(n) for n in range(NUMBERS))
    assert sorted(index for index, _ in counter.restored) == list(range(READERS))
    for index, saved in counter.restored:
        assert len(saved) == 1 and saved[0] % READERS == index
