"""Lab 2 of the Jet training course with Jet 4's services: enrich a stream of trades with the
company name from a service each member makes once (what `mapUsingIMap` becomes).

    streamJournalSource(trades) -> map-using-service (--remote: map-using-service-async) ->
        listSink(named-trades)

The trades stream from the engine's list "trades"; `ServiceFactories.shared_service` makes one
lookup table per member (a client of a remote store in real life), shared by its processors,
and `map_using_service` calls `fn(service, trade)` per trade. With `--remote` the lookup is a
coroutine awaiting the "remote" answer (`asyncio.sleep(0)` stands for it):
`map_using_service_async` keeps up to MAX_CONCURRENT_OPS lookups in flight per processor, the
results in input order. Either way the results are those of context_lookup.py. The job is a
streaming one: it is cancelled once every trade's result arrived. Prints the engine and mode it
ran in and the first results.

    python examples/pipeline/service_lookup.py [--remote] [--trades 3000]
        [--engine local|spark] [--members N]
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import runner
from trading import COMPANIES, Trade, clock

from jetspark.core.context import ProcessorSupplierContext
from jetspark.core.pipeline import Pipeline, Sinks, Sources
from jetspark.processors import ServiceFactories

NAMED_TRADES = "named-trades"
MAX_CONCURRENT_OPS = 16


def company_names(context: ProcessorSupplierContext) -> dict[str, str]:
    """The lookup service of one member: the company names by ticker (read-only, so safe to
    share between the member's processors)."""
    return dict(COMPANIES)


def named(companies: dict[str, str], trade: Trade) -> tuple[int, str, int, int]:
    """A trade with its ticker replaced by the company name: (time, company, quantity, price)."""
    return trade.time, companies[trade.ticker], trade.quantity, trade.price


async def named_remotely(companies: dict[str, str], trade: Trade) -> tuple[int, str, int, int]:
    """`named(companies, trade)` once the remote store answered (here at once)."""
    await asyncio.sleep(0)
    return named(companies, trade)


def build_pipeline(remote: bool = False) -> Pipeline:
    """Trades from the engine's list "trades", each with its company's name, looked up
    synchronously or (`remote`) asynchronously."""
    pipeline = Pipeline.create("service-lookup")
    trades = pipeline.draw_from(Sources.stream_journal(runner.TRADES))
    service = ServiceFactories.shared_service(company_names)
    if remote:
        trades = trades.map_using_service_async(service, named_remotely, MAX_CONCURRENT_OPS)
    else:
        trades = trades.map_using_service(service, named)
    trades.drain_to(Sinks.list(NAMED_TRADES))
    return pipeline


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[tuple[Any, ...]]:
    """Appends the trades to the engine's list "trades", streams them through the lookup."""
    options = runner.parser(__doc__.splitlines()[0])
    options.add_argument("--remote", action="store_true", help="look the names up asynchronously")
    args = options.parse_args(argv)
    results = runner.stream_trades(args, spark, build_pipeline(args.remote), NAMED_TRADES)
    print(f"{len(results):,} trades named, the first by time:")
    runner.show(
        [
            f"{clock(time)} {name:<22} {q:>4} x {p / 100:.2f}"
            for time, name, q, p in sorted(results)
        ],
        5,
    )
    return results


if __name__ == "__main__":
    main()
