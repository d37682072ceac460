"""Trade monitoring, the windowed DAG of manual §8.2.2, built from the library's factories.

    trade-source (generate_p) -> insert-watermarks (insert_watermarks_p)
        -> sliding-stage-1 (accumulate_by_frame_p, over a local partitioned edge)
        -> sliding-stage-2 (combine_to_sliding_window_p, over a distributed partitioned edge)
        -> format-output (map_using_context_p) -> sink (write_file_p)

It counts the trades per ticker in one-second windows sliding by 100 ms. Jet's version reads
an IMap event journal that inserts watermarks itself; here a bounded generator produces trades
in slightly disordered event-time order and a separate vertex inserts the watermarks, with the
same policies: a lag of 300 ms, one watermark per frame, an idle timeout.

Run it with `python examples/stock_exchange.py [OUTPUT_DIR] [--engine spark|local] [--members N]`:
each sink processor writes its formatted lines to its own file in OUTPUT_DIR (default: a new
temporary directory).
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

from jetspark.core import DAG, JobConfig
from jetspark.core.cli import EngineSession, add_engine_arguments
from jetspark.edges import between
from jetspark.partitioning import HASH_CODE
from jetspark.processors import (
    ContextFactory,
    accumulate_by_frame_p,
    combine_to_sliding_window_p,
    entry_key,
    generate_p,
    insert_watermarks_p,
    map_using_context_p,
    write_file_p,
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
WINDOW_SIZE_MILLIS = 1_000
SLIDE_BY_MILLIS = 100
LAG_MILLIS = 300
IDLE_TIMEOUT_MILLIS = 3_000


class Trade(NamedTuple):
    """One trade event."""

    timestamp: int
    ticker: str
    quantity: int
    price: int


def trade(n: int) -> Trade:
    """The n-th generated trade: about every 5 ms, up to 250 ms out of order."""
    rng = random.Random(n)
    timestamp = START_MILLIS + n * TRADE_SPACING_MILLIS - rng.randrange(250)
    return Trade(timestamp, rng.choice(TICKERS), rng.randint(1, 100), rng.randint(90, 110))


def trade_timestamp(t: Trade) -> int:
    """The event time of a trade."""
    return t.timestamp


def trade_ticker(t: Trade) -> str:
    """The grouping key of a trade."""
    return t.ticker


def time_formatter(context: object) -> Callable[[int], str]:
    """Creates the per-processor formatter of epoch milliseconds as HH:MM:SS.mmm (UTC)."""

    def format_time(millis: int) -> str:
        return datetime.fromtimestamp(millis / 1000, timezone.utc).strftime("%H:%M:%S.%f")[:-3]

    return format_time


def format_result(format_time: Callable[[int], str], result: KeyedWindowResult) -> str:
    """One output line: window end, ticker, number of trades."""
    return f"{format_time(result.end)} {result.key:>5} {result.value:4d}"


def build_dag(trade_count: int, output_dir: str) -> DAG:
    """The trade monitoring DAG over `trade_count` generated trades, writing to `output_dir`."""
    win_policy = sliding_window_policy(WINDOW_SIZE_MILLIS, SLIDE_BY_MILLIS)
    dag = DAG("stock-exchange")
    trade_source = dag.new_vertex("trade-source", generate_p(trade_count, trade))
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
    sink = dag.new_vertex("sink", write_file_p(output_dir, str, "utf-8", False))
    dag.edge(between(trade_source, insert_watermarks).isolated())
    dag.edge(between(insert_watermarks, sliding_stage_1).partitioned(trade_ticker, HASH_CODE))
    dag.edge(between(sliding_stage_1, sliding_stage_2).distributed().partitioned(entry_key))
    dag.edge(between(sliding_stage_2, format_output).isolated())
    dag.edge(between(format_output, sink).isolated())
    return dag


def expected_lines(trade_count: int) -> list[str]:
    """The output computed in plain Python: every trade counts in the windows that cover it."""
    format_time = time_formatter(None)
    counts: Counter[tuple[int, str]] = Counter()
    for n in range(trade_count):
        t = trade(n)
        first_end = t.timestamp - t.timestamp % SLIDE_BY_MILLIS + SLIDE_BY_MILLIS
        for end in range(first_end, first_end + WINDOW_SIZE_MILLIS, SLIDE_BY_MILLIS):
            counts[end, t.ticker] += 1
    return sorted(
        format_result(format_time, KeyedWindowResult(end - WINDOW_SIZE_MILLIS, end, ticker, n))
        for (end, ticker), n in counts.items()
    )


def main(argv: Sequence[str] | None = None, spark: Any = None) -> None:
    """Runs the job on 6,000 generated trades (30 s of trading) and checks its output."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir", nargs="?", metavar="OUTPUT_DIR")
    add_engine_arguments(parser)
    parser.set_defaults(members=2)
    args = parser.parse_args(argv)
    output_dir = args.output_dir or tempfile.mkdtemp(prefix="stock-exchange-")
    with EngineSession.of(args, spark) as session:
        job = session.engine.new_job(build_dag(6_000, output_dir), JobConfig(name="stock-exchange"))
        job.join()
    lines = sorted(
        line for path in Path(output_dir).iterdir() for line in path.read_text().splitlines()
    )
    assert lines == expected_lines(6_000), "the window counts differ from a plain Python count"
    print("\n".join(lines[:10]))
    print(f"... {len(lines)} window results in {output_dir}: match a plain Python count")


if __name__ == "__main__":
    main()
