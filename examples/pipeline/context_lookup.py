"""Lab 2 of the Jet training course, as a direct lookup: enrich a stream of trades with the
company name from a context object each processor makes once.

    streamJournalSource(trades) -> map-using-context -> listSink(named-trades)

The trades stream from the engine's list "trades" (a journal followed for ever, like the
course's map journal); `ContextFactory.with_create_fn` makes each processor's context, here a
lookup table (a client of a remote store in real life), and `map_using_context` calls
`fn(context, trade)` per trade. The job is a streaming one: it is cancelled once every trade's
result arrived. Prints the engine and mode it ran in and the first results.

    python examples/pipeline/context_lookup.py [--trades 3000] [--engine local|spark]
        [--members N]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import runner
from trading import COMPANIES, Trade, clock

from jetspark.core.context import Context
from jetspark.core.pipeline import ContextFactory, Pipeline, Sinks, Sources

NAMED_TRADES = "named-trades"


def connect(context: Context) -> dict[str, str]:
    """The lookup context of one processor: the company names by ticker."""
    return dict(COMPANIES)


def with_company(companies: dict[str, str], trade: Trade) -> tuple[int, str, int, int]:
    """A trade with its ticker replaced by the company name: (time, company, quantity, price)."""
    return trade.time, companies[trade.ticker], trade.quantity, trade.price


def build_pipeline() -> Pipeline:
    """Trades from the engine's list "trades", each with its company's name."""
    pipeline = Pipeline.create("context-lookup")
    (
        pipeline.draw_from(Sources.stream_journal(runner.TRADES))
        .map_using_context(ContextFactory.with_create_fn(connect), with_company)
        .drain_to(Sinks.list(NAMED_TRADES))
    )
    return pipeline


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[tuple[Any, ...]]:
    """Appends the trades to the engine's list "trades", streams them through the lookup."""
    args = runner.parser(__doc__.splitlines()[0]).parse_args(argv)
    named = runner.stream_trades(args, spark, build_pipeline(), NAMED_TRADES)
    print(f"{len(named):,} trades named, the first by time:")
    runner.show(
        [f"{clock(time)} {name:<22} {q:>4} x {p / 100:.2f}" for time, name, q, p in sorted(named)],
        5,
    )
    return named


if __name__ == "__main__":
    main()
