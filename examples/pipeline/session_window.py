"""The session window of the Jet training course's aggregation part: bursts of trading per
ticker, each closed once SESSION_TIMEOUT_MILLIS pass without a trade of that ticker.

    journalSource(trade) (and its watermarks, `add_timestamps` goes into the source)
        -> session-window (partitioned by ticker across members) -> listSink(sessions)

`window(session(timeout))` after `grouping_key(ticker)` keeps a session per ticker; a trade
within the timeout of a session's last trade extends it. Each result here is `(ticker, start,
end, trades, shares)` from `map_to_output_fn(start, end, key, result)`: start is the first
trade's time, end the last trade's time plus the timeout. The journal is read to its end and
the job ends by itself. Prints the engine and mode it ran in, how many sessions each ticker had
and the longest sessions.

    python examples/pipeline/session_window.py [--trades 3000] [--engine local|spark]
        [--members N]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import runner
from trading import MAX_DISORDER_MILLIS, clock, trade

from jetspark.core.pipeline import Pipeline, Sinks, Sources, WindowDefinition
from jetspark.processors.aggregate import all_of, counting, summing

SESSION_TIMEOUT_MILLIS = 100
SESSIONS = "sessions"


def build_pipeline(trade_count: int) -> Pipeline:
    """Per ticker, its sessions of trading: (ticker, start, end, trades, shares)."""
    pipeline = Pipeline.create("session-window")
    (
        pipeline.draw_from(Sources.journal(trade, count=trade_count))
        .add_timestamps(lambda t: t.time, MAX_DISORDER_MILLIS)
        .grouping_key(lambda t: t.ticker)
        .window(WindowDefinition.session(SESSION_TIMEOUT_MILLIS))
        .aggregate(
            all_of(counting(), summing(lambda t: t.quantity)),
            lambda start, end, ticker, result: (ticker, start, end, *result),
        )
        .drain_to(Sinks.list(SESSIONS))
    )
    return pipeline


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[tuple[Any, ...]]:
    """Runs the pipeline; prints the sessions per ticker and the longest ones."""
    args = runner.parser(__doc__.splitlines()[0]).parse_args(argv)
    sessions = runner.run_to_list(args, spark, build_pipeline(args.trades), SESSIONS)
    per_ticker = Counter(ticker for ticker, *_ in sessions)
    print(
        f"{len(sessions):,} sessions: "
        + ", ".join(f"{t} {n}" for t, n in sorted(per_ticker.items()))
    )
    print("the longest:")
    longest = sorted(sessions, key=lambda s: (s[1] - s[2], s))
    runner.show(
        [
            f"{ticker:<5} {clock(start)}-{clock(end)} {count:>3} trades {shares:>6,} shares"
            for ticker, start, end, count, shares in longest
        ],
        5,
    )
    return sessions


if __name__ == "__main__":
    main()
