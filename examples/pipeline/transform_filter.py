"""Lab 1 of the Jet training course: transform and filter a stream of trades.

    journalSource(trade) -> fused(filter, map) -> listSink(big-trades)

Keeps the trades worth at least `--min-value` dollars and maps each to (ticker, quantity,
price in dollars, value in dollars); filter and map fuse into one vertex. The source is a
journal of `trading.trade(n)` for n below `--trades`, read to its end, so the job ends by
itself. Prints the engine and mode it ran in, how many trades passed, and the biggest ones.

    python examples/pipeline/transform_filter.py [--trades 3000] [--min-value 100000]
        [--engine local|spark] [--members N]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import runner
from trading import Trade, trade

from jetspark.core.pipeline import Pipeline, Sinks, Sources

BIG_TRADES = "big-trades"


def value_cents(trade: Trade) -> int:
    """What a trade is worth, in cents."""
    return trade.quantity * trade.price


def build_pipeline(trade_count: int, min_value: int) -> Pipeline:
    """The pipeline: the trades worth at least `min_value` dollars, as (ticker, quantity,
    price, value) with dollar amounts."""
    pipeline = Pipeline.create("transform-and-filter")
    (
        pipeline.draw_from(Sources.journal(trade, count=trade_count))
        .filter(lambda t: value_cents(t) >= min_value * 100)
        .map(lambda t: (t.ticker, t.quantity, t.price / 100, value_cents(t) / 100))
        .drain_to(Sinks.list(BIG_TRADES))
    )
    return pipeline


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[tuple[Any, ...]]:
    """Runs the pipeline, prints what passed the filter and returns it."""
    options = runner.parser(__doc__.splitlines()[0])
    options.add_argument("--min-value", type=int, default=100_000, metavar="DOLLARS")
    args = options.parse_args(argv)
    pipeline = build_pipeline(args.trades, args.min_value)
    big = runner.run_to_list(args, spark, pipeline, BIG_TRADES)
    print(f"{len(big):,} of {args.trades:,} trades are worth ${args.min_value:,} or more:")
    biggest = sorted(big, key=lambda row: (-row[3], row))
    runner.show([f"{t:<5} {q:>4} x {p:>7.2f} = {v:>10,.2f}" for t, q, p, v in biggest], 5)
    return big


if __name__ == "__main__":
    main()
