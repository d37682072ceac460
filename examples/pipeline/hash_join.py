"""Lab 2 of the Jet training course, as a hash join: enrich trades with the company and the
broker they name.

    journalSource(trade) -------------------------------> 3-way hash-join-joiner:0
    mapSource(companies) -> 3-way hash-join-collector1 --> 3-way hash-join-joiner:1 (first)
    mapSource(brokers)   -> 3-way hash-join-collector2 --> 3-way hash-join-joiner:2 (first)
    3-way hash-join-joiner -> listSink(enriched)

The companies and brokers are batch sources (the engine's maps "companies" and "brokers");
the joiner reads them in full into hash tables before any trade, then looks each trade's
ticker and broker up: (time, ticker, company, broker name, quantity). Prints the engine and
mode it ran in, and how many trades each company and broker got.

    python examples/pipeline/hash_join.py [--trades 3000] [--engine local|spark] [--members N]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import runner
from trading import BROKERS, COMPANIES, trade

from jetspark.core.pipeline import JoinClause, Pipeline, Sinks, Sources

ENRICHED = "enriched"


def build_pipeline(trade_count: int) -> Pipeline:
    """Trades joined with the maps "companies" (on the ticker) and "brokers" (on the id)."""
    pipeline = Pipeline.create("hash-join")
    trades = pipeline.draw_from(Sources.journal(trade, count=trade_count))
    companies = pipeline.draw_from(Sources.map("companies"))
    brokers = pipeline.draw_from(Sources.map("brokers"))
    trades.hash_join2(
        companies,
        JoinClause.join_map_entries(lambda t: t.ticker),
        brokers,
        JoinClause.join_map_entries(lambda t: t.broker),
        lambda t, company, broker: (t.time, t.ticker, company, broker, t.quantity),
    ).drain_to(Sinks.list(ENRICHED))
    return pipeline


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[tuple[Any, ...]]:
    """Fills the lookup maps, runs the join, prints the trades per company and broker."""
    args = runner.parser(__doc__.splitlines()[0]).parse_args(argv)
    tables = {"companies": COMPANIES, "brokers": BROKERS}
    enriched = runner.run_to_list(args, spark, build_pipeline(args.trades), ENRICHED, fills=tables)
    print(f"{len(enriched):,} trades enriched; trades per company and per broker:")
    for column in (2, 3):
        counts = Counter(row[column] for row in enriched)
        runner.show([f"{name:<22} {count:>5,}" for name, count in sorted(counts.items())], 8)
    return enriched


if __name__ == "__main__":
    main()
