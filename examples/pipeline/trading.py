"""The trades the pipeline examples process, after the Jet training course's trade generator.

`trade(n)` is the n-th trade, a pure function of n (a generator seeded by SEED and n), so a
journal of it replays the same stream every time, and tests compute the expected results from
the same trades. Trade n happens TRADE_INTERVAL_MILLIS * n after START_MILLIS, plus up to
MAX_DISORDER_MILLIS, so the stream comes slightly out of event-time order. COMPANIES and BROKERS
are the tables the enrichment examples look the trades up in.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone
from typing import NamedTuple

SEED = 2018
START_MILLIS = 1_530_000_000_000
"""Epoch milliseconds of the first trade (2018-06-26 08:00:00 UTC)."""
TRADE_INTERVAL_MILLIS = 5
MAX_DISORDER_MILLIS = 40
"""A trade is at most this much older than a trade read before it: an allowed lag of this
much drops no trade as late."""

COMPANIES = {
    "AAPL": "Apple Inc.",
    "AMZN": "Amazon.com Inc.",
    "GOOG": "Alphabet Inc.",
    "HZ": "Hazelcast Inc.",
    "MSFT": "Microsoft Corporation",
    "NFLX": "Netflix Inc.",
    "ORCL": "Oracle Corporation",
    "TSLA": "Tesla Inc.",
}
"""Ticker -> company name."""
TICKERS = tuple(COMPANIES)
BROKERS = {1: "Ace Brokerage", 2: "Bull & Bear", 3: "Capital Trust", 4: "Delta Markets"}
"""Broker id -> broker name."""


class Trade(NamedTuple):
    """One trade: when (epoch millis), which stock, through which broker, how many shares at
    what price (in cents)."""

    time: int
    ticker: str
    broker: int
    quantity: int
    price: int


def trade(n: int) -> Trade:
    """The n-th trade of the stream (the same on every call)."""
    rng = random.Random(SEED * 1_000_003 + n)
    return Trade(
        time=START_MILLIS + n * TRADE_INTERVAL_MILLIS + rng.randrange(MAX_DISORDER_MILLIS),
        ticker=TICKERS[rng.randrange(len(TICKERS))],
        broker=rng.randint(1, len(BROKERS)),
        quantity=rng.randint(1, 100) * 10,
        price=rng.randint(5_000, 15_000),
    )


def trades(count: int) -> list[Trade]:
    """The first `count` trades, in stream order."""
    return [trade(n) for n in range(count)]


def clock(millis: int) -> str:
    """Epoch milliseconds as the time of day (UTC) to the millisecond: "08:00:01.250"."""
    return datetime.fromtimestamp(millis / 1000, timezone.utc).strftime("%H:%M:%S.%f")[:-3]
