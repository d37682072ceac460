"""Lab 3 of the Jet training course (mapStateful): per ticker, an alert whenever a trade's price
is more than DROP_CENTS below the price of the ticker's previous trade.

    journalSource(trade) -> map-stateful-keyed (partitioned by ticker) -> listSink(price-drops)

`grouping_key(ticker).map_stateful(create_fn, map_fn)` keeps a state per ticker, a
`LastPrice` holding the price of the ticker's trade read last, and `map_fn(state, ticker,
trade)` returns the alert `(time, ticker, previous price, price)` or None (no alert). The
"previous" trade is the one read before: trades of a ticker may be read slightly out of stream
order, as the journal's partitions are read in parallel. The source is a journal read to its
end, so the job ends by itself. Prints the engine and mode it ran in and the alerts by time.

    python examples/pipeline/price_drops.py [--trades 3000] [--engine local|spark]
        [--members N]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import runner
from trading import Trade, clock, trade

from jetspark.core.pipeline import Pipeline, Sinks, Sources

DROP_CENTS = 7_000
"""An alert is raised by a price more than $70 below the previous one."""
PRICE_DROPS = "price-drops"

Alert = tuple[int, str, int, int]
"""(time, ticker, previous price, price), prices in cents."""


class LastPrice:
    """The state of one ticker: the price of its trade read last (None before the first)."""

    def __init__(self) -> None:
        self.price: int | None = None


def price_drop(state: LastPrice, ticker: str, trade: Trade) -> Alert | None:
    """The alert for `trade` if its price is more than DROP_CENTS below `state.price`, else
    None; `state` then holds the trade's price."""
    previous, state.price = state.price, trade.price
    if previous is None or previous - trade.price <= DROP_CENTS:
        return None
    return trade.time, ticker, previous, trade.price


def build_pipeline(trade_count: int) -> Pipeline:
    """The price-drop alerts of the first `trade_count` trades."""
    pipeline = Pipeline.create("price-drops")
    (
        pipeline.draw_from(Sources.journal(trade, count=trade_count))
        .grouping_key(lambda t: t.ticker)
        .map_stateful(LastPrice, price_drop)
        .drain_to(Sinks.list(PRICE_DROPS))
    )
    return pipeline


def shown(alert: Alert) -> str:
    """An alert as a line: the time, the ticker, the previous price and the price in dollars."""
    time, ticker, previous, price = alert
    return f"{clock(time)} {ticker:<5} {previous / 100:>7.2f} -> {price / 100:>7.2f}"


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[Alert]:
    """Runs the pipeline and prints the alerts by time."""
    args = runner.parser(__doc__.splitlines()[0]).parse_args(argv)
    alerts = runner.run_to_list(args, spark, build_pipeline(args.trades), PRICE_DROPS)
    print(
        f"{len(alerts):,} price drops of more than ${DROP_CENTS // 100} in {args.trades:,} trades:"
    )
    runner.show([shown(alert) for alert in sorted(alerts)])
    return alerts


if __name__ == "__main__":
    main()
