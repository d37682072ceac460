"""Lab 4 of the Jet training course: the number of trades per ticker in the last 3 seconds,
updated every second (a sliding window with grouping).

    journalSource(trade) (and its watermarks) -> sliding-window-step1 (counts per frame,
        local) -> sliding-window-step2 (frames combined into windows, partitioned by
        ticker across members) -> listSink(trade-counts)

`add_timestamps(time, lag)` gives every trade its event time and lets trades come up to
MAX_DISORDER_MILLIS late (none is dropped); the journal source emits the watermarks itself.
`window(sliding(3000, 1000))` then counts per ticker.
Each result is a `TimestampedEntry(timestamp=window end, key=ticker, value=count)`. The source
is a journal read to its end: `add_timestamps` on a batch stage makes a stream stage that ends
with it, emitting its last windows then, so the job ends by itself. Prints the engine and mode
it ran in, and a line per window end with each ticker's count.

    python examples/pipeline/sliding_window.py [--trades 3000] [--engine local|spark]
        [--members N]
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import runner
from trading import MAX_DISORDER_MILLIS, TICKERS, clock, trade

from jetspark.core.pipeline import Pipeline, Sinks, Sources, TimestampedEntry, WindowDefinition
from jetspark.processors.aggregate import counting

WINDOW_MILLIS = 3_000
SLIDE_MILLIS = 1_000
TRADE_COUNTS = "trade-counts"


def build_pipeline(trade_count: int) -> Pipeline:
    """Trade counts per ticker in windows of WINDOW_MILLIS sliding by SLIDE_MILLIS."""
    pipeline = Pipeline.create("sliding-window")
    (
        pipeline.draw_from(Sources.journal(trade, count=trade_count))
        .add_timestamps(lambda t: t.time, MAX_DISORDER_MILLIS)
        .grouping_key(lambda t: t.ticker)
        .window(WindowDefinition.sliding(WINDOW_MILLIS, SLIDE_MILLIS))
        .aggregate(counting())
        .drain_to(Sinks.list(TRADE_COUNTS))
    )
    return pipeline


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[TimestampedEntry]:
    """Runs the pipeline and prints the counts, a window per line."""
    args = runner.parser(__doc__.splitlines()[0]).parse_args(argv)
    counts = runner.run_to_list(args, spark, build_pipeline(args.trades), TRADE_COUNTS)
    by_end: dict[int, dict[str, int]] = defaultdict(dict)
    for result in counts:
        by_end[result.timestamp][result.key] = result.value
    print(f"{len(counts):,} window results; trades per ticker in the 3 s before:")
    print(f"  {'window end':<12} " + " ".join(f"{ticker:>5}" for ticker in TICKERS))
    for end, row in sorted(by_end.items()):
        print(f"  {clock(end):<12} " + " ".join(f"{row.get(t, 0):>5}" for t in TICKERS))
    return counts


if __name__ == "__main__":
    main()
