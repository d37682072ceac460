"""stream_socket_p and write_socket_p (manual §5.8) against small line servers the tests start
on 127.0.0.1: bounded (a fixed number of lines, one accept per expected client) and stopping by
themselves."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from jetspark.core import DAG, JobConfig, JobFailedError, LocalEngine, ProcessingGuarantee
from jetspark.edges import between
from jetspark.processors import (
    map_p,
    read_list_p,
    stream_socket_p,
    write_list_p,
    write_socket_p,
)

pytestmark = pytest.mark.timeout(120)


class LineServer:
    """Accepts `clients` connections on 127.0.0.1; sends each `lines` (the last one without a
    line break), or, `collect`ing, reads each until it closes. Stops by itself."""

    def __init__(self, clients: int, lines: list[str] | None = None) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(60)
        self.port = self._listener.getsockname()[1]
        self.received: list[str] = []
        self._lines = lines
        self._threads = [threading.Thread(target=self._serve, daemon=True) for _ in range(clients)]
        for thread in self._threads:
            thread.start()

    def _serve(self) -> None:
        connection, _ = self._listener.accept()
        with connection:
            if self._lines is not None:
                text = "\r\n".join(self._lines)  # Windows line breaks, no final one
                connection.sendall(text.encode("utf-8"))
                return
            data = b""
            while chunk := connection.recv(65536):
                data += chunk
            self.received += data.decode("utf-8").splitlines()

    def join(self) -> None:
        for thread in self._threads:
            thread.join(60)
        self._listener.close()


@pytest.fixture
def engine() -> Iterator[LocalEngine]:
    yield LocalEngine(2)


def lines_dag(port: int, parallelism: int) -> DAG:
    dag = DAG()
    source = dag.new_vertex("socket", stream_socket_p("127.0.0.1", port)).local_parallelism(
        parallelism
    )
    sink = dag.new_vertex("sink", write_list_p("lines"))
    dag.edge(between(source, sink))
    return dag


def test_each_processor_reads_every_line_the_server_sends_it(engine: LocalEngine) -> None:
    lines = [f"line {n} é" for n in range(2000)]
    server = LineServer(clients=4, lines=lines)  # 2 members x 2 processors
    engine.new_job(lines_dag(server.port, 2)).join(60)
    server.join()
    assert sorted(engine.get_list("lines")) == sorted(lines * 4)


def test_write_socket_p_writes_a_line_per_item(engine: LocalEngine) -> None:
    engine.get_list("numbers").extend(range(1000))
    server = LineServer(clients=2)  # one writer per member
    dag = DAG()
    source = dag.new_vertex("numbers", read_list_p("numbers"))
    double = dag.new_vertex("double", map_p(lambda n: n * 2))
    sink = dag.new_vertex("socket", write_socket_p("127.0.0.1", server.port))
    sink.local_parallelism(1)
    dag.edge(between(source, double))
    dag.edge(between(double, sink))
    engine.new_job(dag).join(60)
    server.join()
    assert sorted(map(int, server.received)) == sorted(n * 2 for n in range(1000))


def test_an_unreachable_server_fails_the_job_naming_the_vertex(engine: LocalEngine) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(JobFailedError, match=rf"vertex 'socket'.*127\.0\.0\.1:{port}"):
        engine.new_job(lines_dag(port, 1)).join(60)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="port"):
        stream_socket_p("127.0.0.1", 70000)
    with pytest.raises(TypeError, match="host"):
        write_socket_p("", 80)
    with pytest.raises(LookupError):
        stream_socket_p("127.0.0.1", 80, charset="no-such-charset")


def test_a_guarantee_with_a_socket_source_warns_what_it_really_gets(
    engine: LocalEngine, caplog: pytest.LogCaptureFixture
) -> None:
    server = LineServer(clients=2, lines=["a", "b"])
    config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
    with caplog.at_level(logging.WARNING, logger="jetspark"):
        engine.new_job(lines_dag(server.port, 1), config).join(60)
    server.join()
    warnings = [r.getMessage() for r in caplog.records if "cannot replay" in r.getMessage()]
    assert warnings and "vertex 'socket' (stream_socket_p)" in warnings[0]


@pytest.mark.spark
def test_the_socket_source_on_spark(spark_engine: Any) -> None:
    lines = [f"spark line {n}" for n in range(500)]
    server = LineServer(clients=spark_engine.members, lines=lines)
    spark_engine.new_job(lines_dag(server.port, 1)).join(120)
    server.join()
    assert sorted(spark_engine.get_list("lines")) == sorted(lines * spark_engine.members)


@pytest.mark.spark
@pytest.mark.parametrize("members", [2, 3], ids=["MICRO_BATCH asked", "too few slots"])
def test_a_socket_source_is_refused_as_micro_batches(spark_engine: Any, members: int) -> None:
    """Every batch would open the source anew and lose the lines in flight between two
    batches: refused at submit, naming the vertex, before anything connects."""
    from jetspark.core import DagValidationError, ExecutionMode
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=members)
    mode = ExecutionMode.MICRO_BATCH if members == 2 else ExecutionMode.AUTO
    config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, execution_mode=mode)
    with pytest.raises(DagValidationError, match=r"vertex 'socket' \(stream_socket_p\)"):
        engine.new_job(lines_dag(1, 1), config)


def test_the_socket_source_emits_what_arrived_in_the_call_that_received_it() -> None:
    """A call that receives lines emits them too: none waits for a later call (which, on a
    non-cooperative processor's thread, comes after an idle wait)."""
    from jetspark.core import Context
    from jetspark.core.outbox import OutboxImpl
    from jetspark.processors.stream_sources import StreamSocketP

    server = LineServer(1, ["first", "second", ""])
    processor = StreamSocketP("127.0.0.1", server.port, "utf-8")
    outbox = OutboxImpl([16])
    processor.init(outbox, Context(vertex_name="lines", total_parallelism=1, local_parallelism=1))
    try:
        server.join()  # every line was sent and the connection closed
        assert processor.complete() is False
        assert list(outbox.buckets[0]) == ["first", "second"]
        outbox.buckets[0].clear()
        assert processor.complete() is True, "the end of the stream, and no empty last line"
        assert not outbox.buckets[0]
    finally:
        processor.close()
