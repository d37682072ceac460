"""Lab 4 of the Jet training course with Jet 4's early results: the number of trades per
ticker in tumbling windows of a second, shown every EARLY_RESULTS_MILLIS while a window is
still open, then once more, final, when the watermark closes it.

    streamJournalSource(trades) (watermarks per journal partition) -> tumbling-window
        (early results, partitioned by ticker) -> listSink(early-counts)

`add_timestamps(time, lag)` gives every trade its event time (no trade is late); it goes into
the journal source, which keeps a watermark per journal partition;
`window(tumbling(WINDOW_MILLIS).set_early_results_period(EARLY_RESULTS_MILLIS))` counts per
ticker. Each result is a `TimestampedEntry(timestamp=window end, key=ticker, value=count)`,
`is_early` for a partial count. The trades stream from the engine's list "trades", followed
for ever: the window holding the latest trade never closes, so only early results show its
count. The job is cancelled once the results account for every trade (each window's final
count, else its latest early one). Prints the engine and mode it ran in, then a line per
window end with each ticker's count, early counts marked with a star.

    python examples/pipeline/early_results.py [--trades 3000] [--engine local|spark]
        [--members N]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import runner
from trading import MAX_DISORDER_MILLIS, TICKERS, clock, trades

from jetspark.core.pipeline import Pipeline, Sinks, Sources, TimestampedEntry, WindowDefinition
from jetspark.processors.aggregate import counting

WINDOW_MILLIS = 1_000
EARLY_RESULTS_MILLIS = 100
"""How often (ms of the processor's clock) an open window's partial count is emitted."""
EARLY_COUNTS = "early-counts"


def build_pipeline() -> Pipeline:
    """Trade counts per ticker in tumbling windows of WINDOW_MILLIS, with early results."""
    pipeline = Pipeline.create("early-results")
    window = WindowDefinition.tumbling(WINDOW_MILLIS).set_early_results_period(EARLY_RESULTS_MILLIS)
    (
        pipeline.draw_from(Sources.stream_journal(runner.TRADES))
        .add_timestamps(lambda t: t.time, MAX_DISORDER_MILLIS)
        .grouping_key(lambda t: t.ticker)
        .window(window)
        .aggregate(counting())
        .drain_to(Sinks.list(EARLY_COUNTS))
    )
    return pipeline


def latest_counts(results: Sequence[TimestampedEntry]) -> dict[tuple[int, str], TimestampedEntry]:
    """(window end, ticker) -> its final result if there is one, else its highest early count
    (a window's counts only grow)."""
    latest: dict[tuple[int, str], TimestampedEntry] = {}
    for result in results:
        known = latest.get((result.timestamp, result.key))
        if known is None or (
            known.is_early and (not result.is_early or result.value > known.value)
        ):
            latest[(result.timestamp, result.key)] = result
    return latest


def cell(result: TimestampedEntry | None) -> str:
    """A count in a 6-character column, starred if early; blank for no result."""
    if result is None:
        return " " * 6
    return f"{result.value:>5}{'*' if result.is_early else ' '}"


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[TimestampedEntry]:
    """Appends the trades to the engine's list "trades", streams them through the windows
    until every trade is counted, and prints the latest count of every window."""
    args = runner.parser(__doc__.splitlines()[0]).parse_args(argv)
    with runner.open_session(args, spark) as session:
        session.engine.get_list(runner.TRADES).extend(trades(args.trades))
        sink = session.engine.get_list(EARLY_COUNTS)

        def all_counted() -> bool:
            return sum(r.value for r in latest_counts(list(sink)).values()) >= args.trades

        runner.run(session, build_pipeline(), all_counted)
        results = list(sink)
    latest = latest_counts(results)
    early = sum(r.is_early for r in results)
    print(f"{len(results):,} window results, {early:,} of them early; the latest per window:")
    print(f"  {'window end':<12} " + " ".join(f"{ticker:>6}" for ticker in TICKERS))
    for end in sorted({end for end, _ in latest}):
        row = " ".join(cell(latest.get((end, ticker))) for ticker in TICKERS)
        print(f"  {clock(end):<12} {row}")
    return results


if __name__ == "__main__":
    main()
