"""The latency rows: end to end, measured outside the engine.

An event server of bench's own (bench/latency_servers.py, a process on 127.0.0.1) sends events
at the rate it is set to, each the line `n due_us sent_us`; the job reads them, and its sink
sends its output to an arrival server (another process) that notes when each line arrived
(row 17: watches the directory a transactional sink publishes its files in). Latency is
the arrival's wall-clock time less the moment the event was due (the event's own time): for an
event, of the line carrying it; for a window (1 s sliding by 100 ms, counts per ticker, the
event time being the due time in ms), of the line carrying its complete count, from the window's
end.

One run per system and shape: events go at WARM_UP_RATE until the first output arrived
(start-up out), then at each of RATES in turn, each for SETTLE_SECONDS and then `seconds`
measured: a rate's p50 and p99 are over the events (windows) due (ending) in its measured span.

Two shapes:

- events: source -> (distributed, partitioned by the event's number) -> socket sink: every
  event crosses the members' streams or Spark's shuffle;
- windows: the stock-exchange window DAG of the throughput rows (bench/streaming_rows.py), the
  watermark from the events' times.

Three systems, all exactly-once with 1 s snapshots where they have them, on the run's Spark:

- jetspark CONTINUOUS: `stream_socket_p` -> ... -> `write_socket_p`;
- jetspark MICRO_BATCH: the same with bench's replayable `resuming_socket_p` as the source
  (SparkEngine refuses `stream_socket_p` in micro-batches: bench/resuming_source.py);
- Structured Streaming: its socket source -> the same shape (a `repartition` by the event's
  number; `groupBy(window, ticker).count()` in update mode) -> a `foreach` writer sending lines,
  its batches as fast as it goes (`processingTime="0 seconds"`).

Before any figure, the output is checked: every event arrived exactly once, unaltered; every
window exactly once (Structured Streaming: its last update) with the plain count's number. A
run whose output is wrong, or that fell behind for good (Structured Streaming at 100,000
events/s may not deliver everything within DRAIN_SECONDS), gives no figure; its row says which
system and why. The event
server's own lateness (sent less due: the machine's load delays it too; for MICRO_BATCH, the
wait for the next batch to ask) and the load average are reported beside.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.latency_servers import Arrivals, ArrivalServer, EventServer, SentEvents, servers
from bench.plain_counts import WINDOW_MILLIS, window_counts
from bench.report import Goal, Row
from bench.resuming_source import resuming_socket_p
from bench.streaming_rows import (
    SNAPSHOT_MILLIS,
    TICKERS,
    _tuned_session,
    cancelled_on_exit,
    check_windows,
    exactly_once,
    wait_for_query,
    window_dag,
    window_line,
)
from bench.timing import Samples

HOST = "127.0.0.1"
RATES = (1_000, 10_000, 20_000, 100_000)
"""Events per second, one after the other in each run."""
WARM_UP_RATE = 1_000
"""Events per second until the first output arrived."""
P99_GOALS_MS = {20_000: 5.0, 100_000: 50.0}
"""Issue #24's goals for CONTINUOUS, events into a non-transactional sink."""
VISIBLE_GOAL_MS = SNAPSHOT_MILLIS + 50.0
"""Issue #24's goal for results in a transactional sink: visible within a snapshot interval
and 50 ms of their window's end."""
SETTLE_SECONDS = 1.0
"""After a rate is set, before its measured span begins."""
WINDOW_TAIL_SECONDS = 1.5
"""Events go on this long after the last measured span, so that its windows close."""
DRAIN_SECONDS = 600.0
"""The most a system may take to deliver what it was sent once the stream ended."""
CHECK_CHUNK = 4_000_000
"""Events counted at a time for the plain count (a soak sends tens of millions)."""
SSS_FLUSH_ROWS = 256
"""The foreach writer sends its lines every this many rows, and at the end of a partition."""


@dataclass(frozen=True)
class Latency:
    """One system's latencies at one rate in one run, in ms."""

    p50: float
    p99: float
    measured: int
    """Events (windows) the percentiles are over."""
    sender_p99: float
    """The event server's own lateness, sent less due, p99 over the measured span."""
    load: float
    """The 1-minute load average when the run ended."""


@dataclass(frozen=True)
class Span:
    """A measured span, as wall-clock microseconds of due times (window ends)."""

    start_us: int
    end_us: int


@dataclass(frozen=True)
class Timeline:
    """A run's checked output: each event's due time (window's end) and its latency, in µs."""

    times_us: np.ndarray
    latencies_us: np.ndarray
    sent: SentEvents

    def within(self, span: Span, load: float) -> Latency:
        """The latencies of the events (windows) of `span`."""
        inside = (self.times_us >= span.start_us) & (self.times_us <= span.end_us)
        if not inside.any():
            raise AssertionError("no output belongs to a measured span")
        p50, p99 = np.percentile(self.latencies_us[inside], [50, 99]) / 1000
        lateness = self.sent.lateness_p99_ms(span.start_us, span.end_us)
        return Latency(float(p50), float(p99), int(inside.sum()), lateness, load)


# ------------------------------------------------------------------ the two shapes


def event_number(line: str) -> int:
    """The number of an event line `n due_us sent_us`."""
    return int(line[: line.index(" ")])


def timed_event(line: str) -> tuple[int, int]:
    """An event line as the window DAG's event: (due ms, ticker)."""
    n, due_us, _ = line.split(" ")
    return int(due_us) // 1000, int(n) % TICKERS


def events_dag(source: Any, sink: Any) -> Any:
    """source -> (distributed, partitioned by event number) -> sink."""
    from jetspark.core import DAG
    from jetspark.edges import between

    dag = DAG("latency-events")
    events = dag.new_vertex("events", source, local_parallelism=1)
    out = dag.new_vertex("sink", sink, local_parallelism=1)
    dag.edge(between(events, out).distributed().partitioned(event_number))
    return dag


def windows_dag(source: Any, sink: Any) -> Any:
    """The throughput rows' window DAG behind a parse of the event lines."""
    from jetspark.processors import map_p

    return window_dag(source, sink, parse=map_p(timed_event), source_parallelism=1)


def sss_events(lines: Any) -> Any:
    """The event lines, repartitioned by event number (Spark's shuffle)."""
    from pyspark.sql import functions as f

    number = f.split("value", " ").getItem(0).cast("long")
    return lines.repartition(2, number).select("value")


def sss_windows(lines: Any) -> Any:
    """Window counts per ticker of the event lines, update mode: `start ticker count`."""
    from pyspark.sql import functions as f

    fields = f.split("value", " ")
    window = f.window("time", f"{WINDOW_MILLIS} milliseconds", "100 milliseconds")
    return (
        lines.select(
            f.timestamp_micros(fields.getItem(1).cast("long")).alias("time"),
            (fields.getItem(0).cast("long") % TICKERS).alias("ticker"),
        )
        .withWatermark("time", "0 seconds")
        .groupBy(window, "ticker")
        .count()
        .select(f.expr("unix_millis(window.start)"), "ticker", "count")
    )


def event_timeline(system: str, arrivals: Arrivals, sent: SentEvents, updates: bool) -> Timeline:
    """Checks that every event sent arrived once, unaltered; each one's latency from its due
    time (`updates` does not apply: events are never updated)."""
    if arrivals.columns.shape[1:] != (3,):
        raise AssertionError(f"{system}: the sink's lines are not the events sent")
    numbers, due, _ = arrivals.columns.T
    if not np.array_equal(np.sort(numbers), np.arange(sent.count)):
        distinct = len(np.unique(numbers))
        raise AssertionError(
            f"{system}: {sent.count - distinct} of the {sent.count} events sent never arrived "
            f"and {len(numbers) - distinct} arrived more than once"
        )
    if not np.array_equal(due, sent.schedule.due_us(numbers)):
        raise AssertionError(f"{system}: events arrived altered")
    return Timeline(due, arrivals.arrived_us - due, sent)


def sent_windows(sent: SentEvents) -> dict[tuple[int, int], int]:
    """The plain count of the events sent, per (window start, ticker), their time the due ms
    (counted CHECK_CHUNK events at a time)."""
    counts: dict[tuple[int, int], int] = {}
    for first in range(0, sent.count, CHECK_CHUNK):
        numbers = np.arange(first, min(first + CHECK_CHUNK, sent.count), dtype=np.int64)
        part = window_counts(sent.schedule.due_us(numbers) // 1000, numbers % TICKERS)
        for key, count in part.items():
            counts[key] = counts.get(key, 0) + count
    return counts


def window_timeline(system: str, arrivals: Arrivals, sent: SentEvents, updates: bool) -> Timeline:
    """Checks the windows `start ticker count` against the plain count of the events sent
    (with `updates`, each window's last line); each window's latency from its end to the
    arrival of its complete count."""
    expected = sent_windows(sent)
    order = np.argsort(arrivals.arrived_us, kind="stable")
    lines = [tuple(line) for line in arrivals.columns[order].tolist()]
    if updates:
        finals = {(start, ticker): count for start, ticker, count in lines}
        check_windows(system, [(*key, count) for key, count in finals.items()], expected)
    else:
        check_windows(system, lines, expected)
    complete: dict[tuple[int, int], int] = {}
    for (start, ticker, count), arrived in zip(
        lines, arrivals.arrived_us[order].tolist(), strict=True
    ):
        if count == expected[(start, ticker)]:
            complete.setdefault((start, ticker), arrived)
    ends = np.array([(start + WINDOW_MILLIS) * 1000 for start, _ in complete], dtype=np.int64)
    return Timeline(ends, np.array(list(complete.values()), dtype=np.int64) - ends, sent)


# ------------------------------------------------------------------ the runs


@dataclass(frozen=True)
class Shape:
    """One of the two DAG shapes, for every system."""

    name: str
    title: str
    jetspark_dag: Callable[[Any, Any], Any]
    sink_line: Callable[[Any], str]
    sss_query: Callable[[Any], Any]
    tail_seconds: float
    timeline: Callable[[str, Arrivals, SentEvents, bool], Timeline]


EVENTS = Shape(
    "events",
    "events across a distributed partitioned edge",
    events_dag,
    str,
    sss_events,
    0.0,
    event_timeline,
)
WINDOWS = Shape(
    "windows",
    "stock-exchange windows (1 s sliding by 100 ms, from the window's end)",
    windows_dag,
    window_line,
    sss_windows,
    WINDOW_TAIL_SECONDS,
    window_timeline,
)


def _measure(
    sender: EventServer,
    receiver: ArrivalServer,
    rates: tuple[int, ...],
    seconds: float,
    tail_seconds: float,
    alive: Callable[[], None],
) -> tuple[list[Span], SentEvents]:
    """Starts the events, waits for the first output, runs every rate (SETTLE_SECONDS, then
    `seconds` measured), goes on for `tail_seconds`, and ends the stream."""
    sender.pace(WARM_UP_RATE)
    _wait(lambda: receiver.lines() > 0, alive)
    spans = []
    for rate in rates:
        sender.pace(rate)
        start = time.time() + SETTLE_SECONDS
        spans.append(Span(int(start * 1e6), int((start + seconds) * 1e6)))
        time.sleep(SETTLE_SECONDS + seconds)
        alive()
    time.sleep(tail_seconds)
    return spans, sender.stop()


class FellBehind(RuntimeError):
    """Structured Streaming did not deliver what it was sent within DRAIN_SECONDS of the
    stream's end (a row leaves its round out)."""


def _wait(condition: Callable[[], bool], alive: Callable[[], None], timeout: float = 600) -> None:
    """Waits until `condition()`, calling `alive()` (which raises when the system failed)."""
    deadline = time.monotonic() + timeout
    while not condition():
        alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"the latency run made no progress in {timeout:.0f} s")
        time.sleep(0.02)


def jetspark_latencies(
    spark: Any,
    mode: Any,
    shape: Shape,
    rates: tuple[int, ...],
    seconds: float,
    transactional: bool = False,
) -> list[Latency]:
    """One run of jetspark in execution mode `mode`: its latencies at each rate. The sink is
    `write_socket_p` to the arrival server, or with `transactional` `write_file_transactional_p`
    into a directory whose files are timed as they appear (the arrival server watching it)."""
    from jetspark.core import DirectorySnapshotStore, ExecutionMode
    from jetspark.processors import stream_socket_p, write_file_transactional_p, write_socket_p

    resuming = mode is ExecutionMode.MICRO_BATCH
    with tempfile.TemporaryDirectory(prefix="jetspark-bench-latency-") as root:
        out = Path(root, "out")
        with servers(resuming, out if transactional else None) as (sender, receiver):
            source = (resuming_socket_p if resuming else stream_socket_p)(HOST, sender.port)
            sink = (
                write_file_transactional_p(str(out), shape.sink_line)
                if transactional
                else write_socket_p(HOST, receiver.port, shape.sink_line)
            )
            job = spark.engine.new_job(
                shape.jetspark_dag(source, sink),
                exactly_once(mode),
                snapshot_store=DirectorySnapshotStore(root + "/snapshots"),
            )

            def alive() -> None:
                if job.status.is_terminal:
                    job.join(0)  # raises what failed it
                    raise RuntimeError(f"{job.name} ended before its stream did")

            with cancelled_on_exit(job):
                if not resuming:  # every member's source is connected before the first event
                    _wait(lambda: sender.clients() >= spark.engine.members, alive)
                spans, sent = _measure(sender, receiver, rates, seconds, shape.tail_seconds, alive)
                job.join(DRAIN_SECONDS)  # the sources saw the stream end: the job completes
            arrivals = receiver.stop()
    timeline = shape.timeline(f"jetspark {mode.name}", arrivals, sent, False)
    load = os.getloadavg()[0]
    return [timeline.within(span, load) for span in spans]


class LineWriter:
    """Structured Streaming's foreach sink: each row as a line of its fields, to the arrival
    server, every SSS_FLUSH_ROWS rows and at the end of each partition."""

    def __init__(self, port: int) -> None:
        self.port = port

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self._socket = socket.create_connection((HOST, self.port))
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._lines: list[str] = []
        return True

    def process(self, row: Any) -> None:
        self._lines.append(" ".join(map(str, row)))
        if len(self._lines) >= SSS_FLUSH_ROWS:
            self._flush()

    def close(self, error: BaseException | None) -> None:
        self._flush()
        self._socket.close()

    def _flush(self) -> None:
        if self._lines:
            self._socket.sendall(("\n".join(self._lines) + "\n").encode("ascii"))
            self._lines = []


def sss_latencies(
    spark: Any, shape: Shape, rates: tuple[int, ...], seconds: float
) -> list[Latency]:
    """One run of Structured Streaming: its latencies at each rate."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the foreach writer
    session = _tuned_session(spark)
    with (
        servers() as (sender, receiver),
        tempfile.TemporaryDirectory(prefix="jetspark-bench-sss-latency-") as checkpoint,
    ):
        lines = session.readStream.format("socket").option("host", HOST)
        query = (
            shape.sss_query(lines.option("port", sender.port).load())
            .writeStream.foreach(LineWriter(receiver.port))
            .outputMode("update")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds")
            .start()
        )

        def alive() -> None:
            if not query.isActive:
                raise RuntimeError(f"the streaming query stopped: {query.exception()}")

        try:
            wait_for_query(query, lambda: sender.clients() > 0)
            spans, sent = _measure(sender, receiver, rates, seconds, shape.tail_seconds, alive)
            try:
                _wait(lambda: _delivered(query, receiver), alive, DRAIN_SECONDS)
            except TimeoutError:
                raise FellBehind(
                    f"Structured Streaming had not delivered every event {DRAIN_SECONDS:.0f} s "
                    "after the stream ended"
                ) from None
        finally:
            query.stop()
        arrivals = receiver.stop()
    timeline = shape.timeline("Structured Streaming", arrivals, sent, True)
    load = os.getloadavg()[0]
    return [timeline.within(span, load) for span in spans]


def _delivered(query: Any, receiver: ArrivalServer) -> bool:
    """True once the query has no data left and ran no batch for a second (it read what the
    event server sent before the stream ended: its socket source keeps it on the driver)."""
    before = receiver.lines()
    status = query.status
    if status["isDataAvailable"] or status["isTriggerActive"]:
        return False
    time.sleep(1.0)
    return receiver.lines() == before and not query.status["isTriggerActive"]


# ------------------------------------------------------------------ the rows


def latency(spark: Any, seconds: float, rounds: int, rates: tuple[int, ...] = RATES) -> list[Row]:
    """The latency rows: for each shape and rate, CONTINUOUS's p99 against MICRO_BATCH's and
    Structured Streaming's, `rounds` runs of each, `seconds` measured per rate and run. A run
    whose output is wrong or that fell behind gives no figure: its round is left out of the row,
    which names the system and why (`left_out` in the JSON)."""
    from jetspark.core import ExecutionMode

    rates = rates or RATES
    rows = []
    for number, shape in (("15", EVENTS), ("16", WINDOWS)):
        runs: dict[str, list[list[Latency] | str]] = {
            "CONTINUOUS": [],
            "MICRO_BATCH": [],
            "SSS": [],
        }
        for _ in range(rounds):
            for mode in (ExecutionMode.CONTINUOUS, ExecutionMode.MICRO_BATCH):
                runs[mode.name].append(
                    _checked(jetspark_latencies, spark, mode, shape, rates, seconds)
                )
            runs["SSS"].append(_checked(sss_latencies, spark, shape, rates, seconds))
        letters = iter("abcdefgh")
        for index, rate in enumerate(rates):
            goal = P99_GOALS_MS.get(rate) if shape is EVENTS else None
            for baseline in ("MICRO_BATCH", "SSS"):
                pairs = list(zip(runs["CONTINUOUS"], runs[baseline], strict=True))
                number_ = f"{number}{next(letters)}"
                what = f"{shape.title}, socket to socket"
                rows.append(_row(number_, what, rate, index, pairs, baseline, goal))
    visible_rate = rates[min(1, len(rates) - 1)]  # 10,000 events/s in a full run
    return [*rows, _visibility_row(spark, seconds, rounds, visible_rate)]


def _visibility_row(spark: Any, seconds: float, rounds: int, rate: int) -> Row:
    """Row 17: the windows into `write_file_transactional_p`, from their end to their file's
    appearance, CONTINUOUS against MICRO_BATCH, at `rate` events/s."""
    from jetspark.core import ExecutionMode

    runs: dict[str, list[list[Latency] | str]] = {"CONTINUOUS": [], "MICRO_BATCH": []}
    for _ in range(rounds):
        for mode in (ExecutionMode.CONTINUOUS, ExecutionMode.MICRO_BATCH):
            runs[mode.name].append(
                _checked(jetspark_latencies, spark, mode, WINDOWS, (rate,), seconds, True)
            )
    pairs = list(zip(runs["CONTINUOUS"], runs["MICRO_BATCH"], strict=True))
    what = "stock-exchange windows, socket to write_file_transactional_p, from the window's end"
    return _row(
        "17", f"{what} until its file appears", rate, 0, pairs, "MICRO_BATCH", VISIBLE_GOAL_MS
    )


def _checked(run: Callable[..., list[Latency]], *arguments: Any) -> list[Latency] | str:
    """The latencies of `run(*arguments)`, or why its round gives no figure: its output was
    wrong, or it fell behind for good (the rest of the run goes on)."""
    try:
        return run(*arguments)
    except (AssertionError, FellBehind) as failed:
        why = "wrong output" if isinstance(failed, AssertionError) else "fell behind"
        print(f"[bench] {why}, no figure: {failed}", file=sys.stderr, flush=True)
        return f"{why}: {failed}"


def _row(
    number: str,
    what: str,
    rate: int,
    index: int,
    pairs: list[tuple[list[Latency] | str, list[Latency] | str]],
    baseline: str,
    goal: float | None,
) -> Row:
    """The row of one rate: the rounds in which both systems gave a figure."""
    both = [
        (a[index], b[index]) for a, b in pairs if not isinstance(a, str) and not isinstance(b, str)
    ]
    left_out: dict[str, list[str]] = {}
    for pair in pairs:
        for system, run in zip(("CONTINUOUS", baseline), pair, strict=True):
            if isinstance(run, str):
                left_out.setdefault(system, []).append(run)
    name = "Structured Streaming (socket source, foreach sink)" if baseline == "SSS" else baseline
    title = (
        f"p99 latency end to end, {what}, {rate:,} events/s, "
        f"exactly-once 1 s snapshots: jetspark CONTINUOUS vs {name}"
    )
    loads = [run.load for pair in both for run in pair]
    note = f"load {min(loads):.1f}-{max(loads):.1f}" if loads else "no figure"
    if left_out:
        reasons = ", ".join(
            f"{system} ({why.split(':')[0]})" for system, whys in left_out.items() for why in whys
        )
        note += f"; {len(pairs) - len(both)} of {len(pairs)} rounds left out: {reasons}"
    nothing = Samples((float("nan"),))
    return Row.compare(
        number,
        title,
        "ms",
        Samples(tuple(a.p99 for a, _ in both)) if both else nothing,
        Samples(tuple(b.p99 for _, b in both)) if both else nothing,
        goal=Goal("<=", goal, "ms") if goal is not None else None,
        note=note,
        extra={
            "rate": rate,
            "jetspark_p50_ms": [a.p50 for a, _ in both],
            "baseline_p50_ms": [b.p50 for _, b in both],
            "measured": [[a.measured for a, _ in both], [b.measured for _, b in both]],
            "event_server_lateness_p99_ms": [
                [a.sender_p99 for a, _ in both],
                [b.sender_p99 for _, b in both],
            ],
            "load_average": loads,
            **({"left_out": left_out} if left_out else {}),
        },
    )
