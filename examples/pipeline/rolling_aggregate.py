"""Lab 3 of the Jet training course, as a rolling aggregate: per ticker, the running count,
total quantity and highest price of the trades so far.

    streamJournalSource(trades) -> rolling-aggregate (partitioned by ticker) -> listSink(rolling)

`grouping_key(ticker).rolling_aggregate(op)` emits, for every trade, `(ticker, result)`: the
aggregate of that ticker's trades so far, here `all_of(counting(), summing(quantity),
max_by(price))`. The trades stream from the engine's list "trades"; the job is cancelled once
every trade's result arrived. Prints the engine and mode it ran in and each ticker's last
result (the one counting all its trades).

    python examples/pipeline/rolling_aggregate.py [--trades 3000] [--engine local|spark]
        [--members N]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import runner

from jetspark.core.pipeline import Pipeline, Sinks, Sources
from jetspark.processors.aggregate import all_of, counting, max_by, summing

ROLLING = "rolling"


def build_pipeline() -> Pipeline:
    """Per trade of the engine's list "trades", its ticker's (count, total quantity, trade of
    the highest price) so far."""
    pipeline = Pipeline.create("rolling-aggregate")
    (
        pipeline.draw_from(Sources.stream_journal(runner.TRADES))
        .grouping_key(lambda t: t.ticker)
        .rolling_aggregate(
            all_of(counting(), summing(lambda t: t.quantity), max_by(lambda t: t.price))
        )
        .drain_to(Sinks.list(ROLLING))
    )
    return pipeline


def finals(results: list[tuple[str, tuple[int, int, Any]]]) -> dict[str, tuple[int, int, Any]]:
    """Each ticker's last result: the one with the highest count."""
    last: dict[str, tuple[int, int, Any]] = {}
    for ticker, result in results:
        if ticker not in last or result[0] > last[ticker][0]:
            last[ticker] = result
    return last


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[tuple[str, Any]]:
    """Appends the trades to the engine's list "trades" and streams them through the rolling
    aggregate; prints each ticker's final running values."""
    args = runner.parser(__doc__.splitlines()[0]).parse_args(argv)
    rolling = runner.stream_trades(args, spark, build_pipeline(), ROLLING)
    print(f"{len(rolling):,} running results; the last of each ticker:")
    runner.show(
        [
            f"{ticker:<5} {count:>5,} trades {total:>9,} shares, highest price "
            f"{top.price / 100:.2f}"
            for ticker, (count, total, top) in sorted(finals(rolling).items())
        ]
    )
    return rolling


if __name__ == "__main__":
    main()
