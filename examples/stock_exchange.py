"""Trade monitoring, the windowed DAG of manual §8.2.2, built from the library's factories.

    trade-source -> insert-watermarks (insert_watermarks_p)
        -> sliding-stage-1 (accumulate_by_frame_p, over a local partitioned edge)
        -> sliding-stage-2 (combine_to_sliding_window_p, over a distributed partitioned edge)
        -> format-output (map_using_context_p) -> sink

It counts the trades per ticker in one-second windows sliding by 100 ms; each output line is
a window's end (UTC), a ticker and its trade count. Jet's version reads an IMap event journal
that inserts watermarks itself; here `trade(n)`, a pure function of the offset n, gives the
trades in slightly disordered event-time order, and a separate vertex inserts the watermarks
with the same policies: a lag of 300 ms, one watermark per frame, an idle timeout. Event time
is simulated: trade n happens about n * 5 ms after START_MILLIS, so the clock of the stream
advances with every trade read (on the local engine a few hundred times faster than real
time) and the windows keep closing however long the job runs.

Bounded, on either engine (local by default, Spark under spark-submit, as for every example):
`python examples/stock_exchange.py [OUTPUT_DIR] [--engine spark|local] [--members N]` runs the
job on 6,000 trades (30 s of trading; source `generate_p`, sink `write_file_p`): each sink
processor writes its lines to its own file in OUTPUT_DIR (default: a new temporary directory),
and the output is checked against a plain Python count.

Unbounded, on either engine (local by default, Spark under spark-submit):
`python examples/stock_exchange.py [OUTPUT_DIR] --duration SECONDS [--snapshots DIR]
[--snapshot-interval MILLIS] [--clock wall|trading] [--members N] [--engine spark [--master
URL]]` reads the endless journal
(`stream_journal_p`) exactly-once, taking a snapshot every MILLIS (default 1,000), for SECONDS
counted from its first trades read (Spark's start-up is not counted), or until Ctrl-C, then
cancels the job; on Spark it serves Spark's web UI on 127.0.0.1 and prints its address
(`--no-spark-ui`: not). `--clock trading` counts both in trading time instead
of wall-clock time (5 ms per trade read): a run then reads the same trades and takes its
snapshots at about the same trades on a busy machine as on an idle one. The sink
`write_file_transactional_p` publishes the `part-*` files of a snapshot when it is committed,
so OUTPUT_DIR holds whole windows only, each once. It prints a progress line a second (of its
clock), then a summary, and checks the windows committed against a plain
Python count. With `--snapshots DIR` the snapshots go to a DirectorySnapshotStore: the same
command again (same OUTPUT_DIR and DIR, any --members) continues from the last snapshot.
`--view [PORT]` (either run) serves the live job view of docs/view.md and prints its address.
`--source files DIR` reads the trades from a real stream instead of the journal: a generator
thread appends them as lines (`trade(n)` for n = 0, 1, ...) to DIR/trades.log, TRADES_PER_SECOND
of them a second, and `stream_files_p` reads what is appended (one file keeps the stream in
order); a later run's generator goes on after the last whole line in the file.
Under spark-submit (`spark-submit --master URL examples/stock_exchange.py ...`) it runs on the
context spark-submit sets up. On Spark the job runs continuously when every member has a task
slot, else as exactly-once micro-batches, one per snapshot interval (docs/fault_tolerance.md);
the line "stock-exchange: ran on ..., mode ..." says which. Its snapshots always go to a
directory (a temporary one without `--snapshots`), which on a cluster (`--master spark://...`)
must be shared by every executor.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

from jetspark.core import (
    DAG,
    DirectorySnapshotStore,
    InMemorySnapshotStore,
    Job,
    JobCancelledError,
    JobConfig,
    ProcessingGuarantee,
    Snapshot,
    SnapshotStore,
)
from jetspark.core.cli import EngineSession, add_engine_arguments, chosen_engine
from jetspark.core.suppliers import ProcessorFn
from jetspark.core.view import JobView
from jetspark.edges import between
from jetspark.partitioning import HASH_CODE
from jetspark.processors import (
    ContextFactory,
    accumulate_by_frame_p,
    combine_to_sliding_window_p,
    entry_key,
    generate_p,
    insert_watermarks_p,
    map_p,
    map_using_context_p,
    stream_files_p,
    stream_journal_p,
    write_file_p,
    write_file_transactional_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.windowing import (
    KeyedWindowResult,
    TimestampKind,
    emit_by_frame,
    limiting_lag,
    sliding_window_policy,
)

TICKERS = ("AAPL", "GOOG", "HZC", "JET", "SPRK")
START_MILLIS = 1_500_000_000_000
"""Epoch milliseconds of the first trade."""
TRADE_SPACING_MILLIS = 5
MAX_DISORDER_MILLIS = 250
"""A trade's timestamp is up to this much earlier than its place in the stream says."""
WINDOW_SIZE_MILLIS = 1_000
SLIDE_BY_MILLIS = 100
LAG_MILLIS = 300
IDLE_TIMEOUT_MILLIS = 3_000
BOUNDED_TRADES = 6_000
"""Trades of the bounded run: 30 s of trading."""
SNAPSHOT_INTERVAL_MILLIS = 1_000
"""The unbounded run's default snapshot interval."""
PROGRESS_SECONDS = 1.0
POLL_SECONDS = 0.02
"""How often (wall-clock seconds) the unbounded run loop looks at its clock."""
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f"
TRADES_FILE = "trades.log"
"""The file `--source files DIR` appends the trades to, in DIR."""
TRADES_PER_SECOND = 10_000
"""How many trades a second the generator of `--source files` appends."""


class Trade(NamedTuple):
    """One trade event."""

    timestamp: int
    ticker: str
    quantity: int
    price: int


def trade(n: int) -> Trade:
    """The n-th trade: about every 5 ms of event time, up to 250 ms out of order (pure: the
    same trade for the same n, so a journal of trades replays exactly after a restore)."""
    bits = _mixed(n)
    bits, disorder = divmod(bits, MAX_DISORDER_MILLIS)
    bits, ticker = divmod(bits, len(TICKERS))
    bits, quantity = divmod(bits, 100)
    price = bits % 21
    timestamp = START_MILLIS + n * TRADE_SPACING_MILLIS - disorder
    return Trade(timestamp, TICKERS[ticker], 1 + quantity, 90 + price)


_MASK64 = (1 << 64) - 1


def _mixed(n: int) -> int:
    """64 well-mixed bits of n (SplitMix64's finalizer): a seeded `random.Random` per trade
    cost about 85% of the example's time; this is a few hundred nanoseconds."""
    z = (n * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def trade_line(t: Trade) -> str:
    """A trade as a line of the trades file: timestamp, ticker, quantity, price."""
    return f"{t.timestamp} {t.ticker} {t.quantity} {t.price}"


def parse_trade(line: str) -> Trade:
    """The inverse of `trade_line`."""
    timestamp, ticker, quantity, price = line.split()
    return Trade(int(timestamp), ticker, int(quantity), int(price))


def trade_timestamp(t: Trade) -> int:
    """The event time of a trade."""
    return t.timestamp


def trade_ticker(t: Trade) -> str:
    """The grouping key of a trade."""
    return t.ticker


def time_formatter(context: object) -> Callable[[int], str]:
    """Creates the per-processor formatter of epoch milliseconds as a UTC date and time."""

    def format_time(millis: int) -> str:
        return datetime.fromtimestamp(millis / 1000, timezone.utc).strftime(TIME_FORMAT)[:-3]

    return format_time


def format_result(format_time: Callable[[int], str], result: KeyedWindowResult) -> str:
    """One output line: window end (date and time), ticker, number of trades."""
    return f"{format_time(result.end)} {result.key:>5} {result.value:4d}"


class WindowCount(NamedTuple):
    """An output line read back: the window's end (epoch ms), the ticker, its trade count."""

    end: int
    ticker: str
    trades: int


def parse_line(line: str) -> WindowCount:
    """The inverse of `format_result`."""
    day, clock, ticker, count = line.split()
    hours, minutes, seconds = clock.split(":")
    whole, fraction = seconds.split(".")
    millis = ((int(hours) * 60 + int(minutes)) * 60 + int(whole)) * 1000 + int(fraction)
    return WindowCount(_midnight_millis(day) + millis, ticker, int(count))


@functools.lru_cache
def _midnight_millis(day: str) -> int:
    midnight = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=timezone.utc)
    return int(midnight.timestamp()) * 1000


def trade_monitoring_dag(
    source: Any, sink: ProcessorFn, parse: Callable[[Any], Trade] | None = None
) -> DAG:
    """The trade monitoring DAG between a source of trades and a sink of formatted lines; with
    `parse`, the source's items go through a "parse-trades" vertex that makes trades of them."""
    win_policy = sliding_window_policy(WINDOW_SIZE_MILLIS, SLIDE_BY_MILLIS)
    dag = DAG("stock-exchange")
    trade_source = dag.new_vertex("trade-source", source)
    parse_trades = None if parse is None else dag.new_vertex("parse-trades", map_p(parse))
    insert_watermarks = dag.new_vertex(
        "insert-watermarks",
        insert_watermarks_p(
            trade_timestamp,
            limiting_lag(LAG_MILLIS),
            emit_by_frame(win_policy),
            IDLE_TIMEOUT_MILLIS,
        ),
    )
    sliding_stage_1 = dag.new_vertex(
        "sliding-stage-1",
        accumulate_by_frame_p(
            trade_ticker, trade_timestamp, TimestampKind.EVENT, win_policy, counting()
        ),
    )
    sliding_stage_2 = dag.new_vertex(
        "sliding-stage-2", combine_to_sliding_window_p(win_policy, counting())
    )
    format_output = dag.new_vertex(
        "format-output", map_using_context_p(ContextFactory(time_formatter), format_result)
    )
    sink_vertex = dag.new_vertex("sink", sink)
    if parse_trades is None:
        dag.edge(between(trade_source, insert_watermarks).isolated())
    else:
        # one file has one reader: its lines go round-robin to every parse-trades and
        # insert-watermarks processor (each sees them in file order), or the others would
        # idle the watermark; lines (str) cross members, not Trade, a class of this script
        dag.edge(between(trade_source, parse_trades).distributed())
        dag.edge(between(parse_trades, insert_watermarks).isolated())
    dag.edge(between(insert_watermarks, sliding_stage_1).partitioned(trade_ticker, HASH_CODE))
    dag.edge(between(sliding_stage_1, sliding_stage_2).distributed().partitioned(entry_key))
    dag.edge(between(sliding_stage_2, format_output).isolated())
    dag.edge(between(format_output, sink_vertex).isolated())
    return dag


def build_dag(trade_count: int, output_dir: str) -> DAG:
    """The bounded DAG: `trade_count` generated trades, one file per sink processor."""
    return trade_monitoring_dag(
        generate_p(trade_count, trade), write_file_p(output_dir, str, "utf-8", False)
    )


def build_streaming_dag(
    output_dir: str, trade_fn: Callable[[int], Trade] = trade, trades_dir: str | None = None
) -> DAG:
    """The unbounded DAG into the transactional file sink, from the endless journal of
    `trade_fn(n)` (default `trade`), or with `trades_dir` from the lines appended to its
    trades file."""
    sink = write_file_transactional_p(output_dir)
    if trades_dir is None:
        return trade_monitoring_dag(stream_journal_p(trade_fn), sink)
    # one directory on this machine (or shared storage on a cluster): spread, not copied, over
    # the members
    source = stream_files_p(trades_dir, TRADES_FILE, shared_file_system=True)
    return trade_monitoring_dag(source, sink, parse_trade)


class TradeFileWriter:
    """Appends `trade(n)` as lines to `directory`/trades.log from a thread of its own,
    `per_second` trades a second, while used as a context manager; it goes on after the last
    whole line an earlier writer left (a line cut short by a killed process is dropped first:
    no reader has gone past a line that has no line break yet)."""

    def __init__(self, directory: str, per_second: int = TRADES_PER_SECOND) -> None:
        self.path = Path(directory) / TRADES_FILE
        self.per_second = per_second
        self.written = 0
        """The trades in the file: the next one to write is trade(written)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._append, name="trade-writer", daemon=True)

    def __enter__(self) -> TradeFileWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.written = _whole_lines(self.path)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _append(self) -> None:
        started, first = time.monotonic(), self.written
        with open(self.path, "a", encoding="utf-8") as file:
            while not self._stop.wait(POLL_SECONDS):
                due = first + int((time.monotonic() - started) * self.per_second)
                lines = [trade_line(trade(n)) + "\n" for n in range(self.written, due)]
                file.write("".join(lines))
                file.flush()
                self.written = due


def _whole_lines(path: Path) -> int:
    """The whole lines of `path` (0 if it does not exist), after cutting off a partial one."""
    if not path.exists():
        return 0
    lines = whole = 0
    with open(path, "r+b") as file:
        while chunk := file.read(1 << 20):  # a file of hours of trades is never read whole
            start = file.tell() - len(chunk)
            if (last := chunk.rfind(b"\n")) >= 0:
                lines += chunk.count(b"\n")
                whole = start + last + 1
        file.truncate(whole)
    return lines


class TradingClock:
    """The trading time of one run in seconds, TRADE_SPACING_MILLIS per journal offset read: a
    clock that advances with the job's progress, not with the machine's speed.

    `trade(n)` is the journal's item function: it notes the highest offset asked for (a trade
    the full outbox refused is asked for again, and counts once). Calling the clock reads the
    time: the offsets from the first one this run read to the highest.
    """

    def __init__(self) -> None:
        self._first: int | None = None
        self._top = -1

    def trade(self, n: int) -> Trade:
        """The n-th trade, noted."""
        if self._first is None:
            self._first = n
        if n > self._top:
            self._top = n
        return trade(n)

    def __call__(self) -> float:
        first = self._first
        return 0.0 if first is None else (self._top - first) * TRADE_SPACING_MILLIS / 1000


def window_ends(t: Trade) -> range:
    """The ends of the windows that cover a trade."""
    first_end = t.timestamp - t.timestamp % SLIDE_BY_MILLIS + SLIDE_BY_MILLIS
    return range(first_end, first_end + WINDOW_SIZE_MILLIS, SLIDE_BY_MILLIS)


def expected_counts(max_end: int, min_end: int = START_MILLIS) -> Counter[tuple[int, str]]:
    """Plain Python: the trade count per (window end, ticker) of every window ending from
    `min_end` to `max_end`, from every trade that can fall into such a window."""
    first = (min_end - WINDOW_SIZE_MILLIS - START_MILLIS) // TRADE_SPACING_MILLIS
    last = (max_end - START_MILLIS + MAX_DISORDER_MILLIS) // TRADE_SPACING_MILLIS
    counts: Counter[tuple[int, str]] = Counter()
    for n in range(max(first, 0), last + 1):
        t = trade(n)
        for end in window_ends(t):
            if min_end <= end <= max_end:
                counts[end, t.ticker] += 1
    return counts


def expected_lines(trade_count: int) -> list[str]:
    """The output computed in plain Python: every trade counts in the windows that cover it."""
    format_time = time_formatter(None)
    counts: Counter[tuple[int, str]] = Counter()
    for n in range(trade_count):
        t = trade(n)
        for end in window_ends(t):
            counts[end, t.ticker] += 1
    return sorted(
        format_result(format_time, KeyedWindowResult(end - WINDOW_SIZE_MILLIS, end, ticker, n))
        for (end, ticker), n in counts.items()
    )


def committed_files(output_dir: str | Path) -> list[Path]:
    """The transactional sink's published files (`part-<processor>-<epoch>`), in name order."""
    directory = Path(output_dir)
    return sorted(directory.glob("part-*")) if directory.is_dir() else []


def check_windows(
    windows: Sequence[WindowCount], complete_until: int | None, checked_from: int | None = None
) -> list[str]:
    """What is wrong with committed windows (empty: nothing): a window committed twice, a count
    that differs from the plain Python count, or a window ending by `complete_until` missing.
    Windows ending before `checked_from` (checked by an earlier run) are checked for duplicates
    only, as counting them again in Python would take ever longer."""
    seen = Counter((w.end, w.ticker) for w in windows)
    problems = [f"window {key} committed {n} times" for key, n in seen.items() if n > 1]
    checked = [w for w in windows if checked_from is None or w.end >= checked_from]
    if not checked:
        return problems
    first = min(w.end for w in checked) if checked_from is None else checked_from
    expected = expected_counts(max(w.end for w in checked), first)
    for w in checked:
        if expected[w.end, w.ticker] != w.trades:
            problems.append(f"window {w}: plain Python counts {expected[w.end, w.ticker]}")
    if complete_until is not None:
        problems += [
            f"window {key} missing"
            for key in expected.keys() - seen.keys()
            if key[0] <= complete_until
        ]
    return problems


class CommittedOutput:
    """The committed output, read as the sink publishes it (a published file never changes)."""

    def __init__(self, output_dir: str) -> None:
        self.output_dir = output_dir
        self.windows: list[WindowCount] = []
        self.last_end: dict[int, int] = {}
        """Sink processor index (in the file name) -> the last window end in its files."""
        self._read: set[Path] = set()

    def refresh(self) -> CommittedOutput:
        """Reads the files published since the last call."""
        for path in committed_files(self.output_dir):
            if path not in self._read:
                self._read.add(path)
                windows = [parse_line(line) for line in path.read_text().splitlines()]
                if windows:
                    index = int(path.name.split("-")[1])
                    last = max(w.end for w in windows)
                    self.last_end[index] = max(last, self.last_end.get(index, last))
                    self.windows += windows
        return self

    def complete_until(self, sink_count: int | None = None) -> int | None:
        """The end up to which every window must be here.

        Each sink processor publishes a snapshot's files when it learns of the commit, so a
        run that stops just after a commit may leave some of them to the run that continues
        it: only the windows up to the last end that every processor's files reach are sure to
        be here. `sink_count`: the sink processors of a run that committed a snapshot; the
        files of processors beyond them, from a run at a higher parallelism, were all published
        when it restored, so they do not lower the bound.
        """
        ends = self.last_end.items()
        return min((end for i, end in ends if sink_count is None or i < sink_count), default=None)

    def problems(self, checked_from: int | None = None, sink_count: int | None = None) -> list[str]:
        """`check_windows` of everything committed."""
        return check_windows(self.windows, self.complete_until(sink_count), checked_from)

    def describe(self) -> str:
        """'N windows committed (up to <end>)'."""
        last = max(self.last_end.values(), default=None)
        upto = "" if last is None else f" (up to {time_formatter(None)(last)})"
        return f"{len(self.windows):,} windows committed{upto}"


class CountingStore:
    """A SnapshotStore that counts the snapshots saved into it (each save is a commit), so
    progress is known without reading the store while the job writes it."""

    def __init__(self, store: SnapshotStore) -> None:
        self.store = store
        self.saved = 0
        latest = store.latest()
        self.last_id = 0 if latest is None else latest.snapshot_id

    def follow(self, job: Job) -> None:
        """Nothing to follow: the job's saves come here."""

    def latest(self) -> Snapshot | None:
        return self.store.latest()

    def next_id(self) -> int:
        return self.store.next_id()

    def save(self, snapshot: Snapshot) -> None:
        self.store.save(snapshot)
        self.saved += 1
        self.last_id = snapshot.snapshot_id


class SparkSnapshots:
    """The snapshot counts of a job on SparkEngine, whose tasks commit their snapshots into
    `store` themselves (micro-batches or continuous execution): read from the job's metrics."""

    def __init__(self, store: DirectorySnapshotStore) -> None:
        self.store = store
        latest = store.latest()
        self._before = 0 if latest is None else latest.snapshot_id
        self._job: Job | None = None

    def latest(self) -> Snapshot | None:
        return self.store.latest()

    def follow(self, job: Job) -> None:
        """Counts the snapshots `job` commits from now on."""
        self._job = job

    @property
    def saved(self) -> int:
        return 0 if self._job is None else self._job.metrics.snapshot_count

    @property
    def last_id(self) -> int:
        reports = [] if self._job is None else self._job.metrics.snapshots
        return reports[-1].snapshot_id if reports else self._before


def _positive(text: str) -> float:
    """An argparse type: a number above 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir", nargs="?", metavar="OUTPUT_DIR")
    add_engine_arguments(
        parser,
        default_engine="local",
        members=2,
        ui_default="on for --duration runs on Spark",
    )
    parser.add_argument(
        "--duration",
        type=_positive,
        metavar="SECONDS",
        help="run the unbounded job for SECONDS, counted from its first trades read (the "
        "engine's start-up is not counted), then cancel it (default: a bounded run)",
    )
    parser.add_argument(
        "--snapshots",
        metavar="DIR",
        help="with --duration: keep the snapshots in DIR; a run with the same DIR and "
        "OUTPUT_DIR continues from the last one",
    )
    parser.add_argument(
        "--snapshot-interval",
        type=int,
        metavar="MILLIS",
        help="with --duration: milliseconds between snapshots "
        f"(default {SNAPSHOT_INTERVAL_MILLIS})",
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "trading"),
        default="wall",
        help="with --duration: what SECONDS and MILLIS count, wall-clock time (the default) or "
        f"trading time ({TRADE_SPACING_MILLIS} ms per trade read: the same trades and snapshots "
        "on any machine)",
    )
    parser.add_argument(
        "--source",
        nargs="+",
        default=["journal"],
        metavar=("journal|files", "DIR"),
        help="with --duration: read the trades from the endless journal (the default), or "
        f"from DIR/{TRADES_FILE}, to which a generator appends {TRADES_PER_SECOND:,} a second",
    )
    parser.add_argument(
        "--view",
        nargs="?",
        const=0,
        type=int,
        metavar="PORT",
        help="serve the live job view (docs/view.md) on PORT (default: any free port) and print "
        "its address",
    )
    return parser


def main(argv: Sequence[str] | None = None, spark: Any = None) -> None:
    """Runs the bounded job and checks its output, or with `--duration` the unbounded one."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.source == ["journal"]:
        args.trades_dir = None
    elif len(args.source) == 2 and args.source[0] == "files":
        args.trades_dir = args.source[1]
    else:
        parser.error(f"--source is 'journal' or 'files DIR', got {' '.join(args.source)!r}")
    if args.duration is None:
        if (
            args.snapshots
            or args.snapshot_interval is not None
            or args.clock != "wall"
            or args.trades_dir
        ):
            parser.error(
                "--snapshots, --snapshot-interval, --clock and --source apply to --duration "
                "runs only"
            )
        run_bounded(args, spark)
        return
    if args.snapshot_interval is None:
        args.snapshot_interval = SNAPSHOT_INTERVAL_MILLIS
    if args.snapshot_interval < 1:
        parser.error(f"--snapshot-interval must be at least 1, got {args.snapshot_interval}")
    if args.snapshots and not args.output_dir:
        parser.error("--snapshots needs OUTPUT_DIR: a run that continues must write there too")
    args.engine = chosen_engine(args, spark)
    run_unbounded(parser, args)


def run_bounded(args: argparse.Namespace, spark: Any) -> None:
    """Runs the job on 6,000 generated trades (30 s of trading) and checks its output."""
    output_dir = args.output_dir or tempfile.mkdtemp(prefix="stock-exchange-")
    with EngineSession.of(args, spark) as session, job_view(args.view) as view:
        session.engine.job_view = view
        dag = build_dag(BOUNDED_TRADES, output_dir)
        job = session.engine.new_job(dag, JobConfig(name="stock-exchange"))
        session.wait(job)
        print(f"stock-exchange: {session.ran(job)}")
    lines = sorted(
        line for path in Path(output_dir).iterdir() for line in path.read_text().splitlines()
    )
    assert lines == expected_lines(BOUNDED_TRADES), "the window counts differ from Python's"
    print("\n".join(lines[:10]))
    print(f"... {len(lines)} window results in {output_dir}: match a plain Python count")


def run_unbounded(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Runs the streaming job for `args.duration` seconds, continuing from the last snapshot in
    `args.snapshots` if there is one; prints progress and a summary, checks the output."""
    output_dir = args.output_dir or tempfile.mkdtemp(prefix="stock-exchange-")
    on_spark = args.engine == "spark"
    if on_spark:  # tasks write the parts: always a directory (docs/fault_tolerance.md)
        directory = args.snapshots or tempfile.mkdtemp(prefix="stock-exchange-snapshots-")
        store: Any = SparkSnapshots(DirectorySnapshotStore(directory))
    else:
        store = CountingStore(
            DirectorySnapshotStore(args.snapshots) if args.snapshots else InMemorySnapshotStore()
        )
    restore_from = store.latest()
    if restore_from is None and committed_files(output_dir):
        parser.error(
            f"{output_dir} holds the output of an earlier run: continue that run with its "
            "--snapshots DIR, or write to an empty directory"
        )
    config = JobConfig(
        name="stock-exchange",
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=args.snapshot_interval,
    )
    output = CommittedOutput(output_dir).refresh()
    before, checked_until = len(output.windows), output.complete_until()
    files = args.trades_dir is not None
    trading = TradingClock() if args.clock == "trading" and not (on_spark or files) else None
    jobs: list[Job] = []
    clock: Callable[[], float] = trading or time.monotonic
    if args.clock == "trading" and (on_spark or files):  # counted by the job's metrics

        def clock() -> float:
            return _trades_read(jobs[0]) * TRADE_SPACING_MILLIS / 1000 if jobs else 0.0

    writer = TradeFileWriter(args.trades_dir) if files else contextlib.nullcontext()
    with EngineSession.of(args, ui=on_spark) as session, writer, job_view(args.view) as view:
        session.engine.job_view = view
        if not on_spark:
            session.engine.snapshot_clock = clock
        print(
            "streaming trades"
            + (f" appended to {writer.path}" if isinstance(writer, TradeFileWriter) else "")
            + f" on {session.description} for {args.duration:g} s"
            + (" of trading" if args.clock == "trading" else "")
            + f", exactly-once, a snapshot every {args.snapshot_interval:,} ms, into {output_dir}"
            + (f"; continuing from snapshot {store.last_id}" if restore_from else ""),
            flush=True,
        )
        job = session.engine.new_job(
            build_streaming_dag(output_dir, trading.trade if trading else trade, args.trades_dir),
            config,
            snapshot_store=store.store if on_spark else store,
            restore_from=restore_from,
        )
        jobs.append(job)
        store.follow(job)

        def progress(elapsed: float) -> None:
            print(
                f"{elapsed:6.1f} s: {_trades_read(job):,} trades read, "
                f"{output.refresh().describe()}, {_plural(store.saved, 'snapshot')}",
                flush=True,
            )

        elapsed = run_for(job, args.duration, progress, clock, lambda: _trades_read(job) > 0)
    if not args.snapshots:
        _remove_unpublished(output_dir)
    print(f"stock-exchange: {session.ran(job)}, stopped after {elapsed:.1f} s", flush=True)
    print("checking the new windows in plain Python ...", flush=True)
    checked_from = None if checked_until is None else checked_until + 1
    sink_count = len(job.metrics.of_vertex("sink")) if store.saved else None
    problems = output.refresh().problems(checked_from, sink_count)
    print(f"  {_trades_read(job):,} trades read in this run")
    print(f"  {output.describe()}, {len(output.windows) - before:,} of them in this run")
    print(f"  {_plural(store.saved, 'snapshot')} taken (last: {store.last_id or 'none'})")
    print(f"  output: {output_dir}")
    if args.snapshots:
        print(f"  snapshots: {args.snapshots} (run again with the same OUTPUT_DIR and DIR)")
    if problems:
        raise SystemExit(
            "the committed windows differ from a plain Python count:\n  "
            + "\n  ".join(problems[:20])
        )
    complete = output.complete_until(sink_count)
    upto = "" if complete is None else f" up to {time_formatter(None)(complete)}"
    print(f"  the windows match a plain Python count: none twice, none missing{upto}")


@contextlib.contextmanager
def job_view(port: int | None) -> Iterator[JobView | None]:
    """The live job view on `port` (0: any free one), its address printed; None: no view."""
    if port is None:
        yield None
        return
    with JobView.serve(port=port) as view:
        print(f"live job view: {view.url} (Prometheus: {view.url}metrics)", flush=True)
        yield view


def run_for(
    job: Job,
    duration: float,
    progress: Callable[[float], None],
    clock: Callable[[], float] = time.monotonic,
    reading: Callable[[], bool] = lambda: True,
) -> float:
    """Lets the unbounded `job` run for `duration` seconds of `clock` (or until Ctrl-C), counted
    from the first time `reading()` holds (the job has read something: the engine's start-up,
    which on a cluster can take longer than the run, is not counted), calling
    `progress(elapsed seconds)` every PROGRESS_SECONDS of it, then cancels the job and waits for
    it to end; returns the seconds counted. Raises the job's failure."""
    started: float | None = None
    next_progress = 0.0
    try:
        while True:
            now = clock()
            if started is None and reading():
                started, next_progress = now, now + PROGRESS_SECONDS
            if started is not None:
                if now - started >= duration:
                    break
                if now >= next_progress:
                    progress(now - started)
                    next_progress = max(next_progress, now) + PROGRESS_SECONDS
            try:
                job.join(timeout=POLL_SECONDS)
            except TimeoutError:
                continue
            raise RuntimeError(f"{job.name}, an unbounded job, completed")
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    elapsed = 0.0 if started is None else clock() - started
    job.cancel()
    with contextlib.suppress(JobCancelledError):
        job.join()
    return elapsed


def _trades_read(job: Job) -> int:
    return sum(sum(p.emitted_count.values()) for p in job.metrics.of_vertex("trade-source"))


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'s' * (count != 1)}"


def _remove_unpublished(output_dir: str) -> None:
    """Without a snapshot directory nothing can continue the job: its unpublished epochs go."""
    for path in Path(output_dir).glob(".part-*.tmp"):
        path.unlink()


if __name__ == "__main__":
    main()
