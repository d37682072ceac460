"""examples/kafka_stock_exchange.py against the run's broker: the windows it reads back from
its output topic (read_committed) are exactly the sliding-window counts of the trades it
produced, each once, on LocalEngine and on SparkEngine. Nothing here depends on time: the run
ends when the expected windows are read."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from test_processors_examples import load

pytestmark = [pytest.mark.kafka]

example = load("kafka_stock_exchange")

TRADES = 2_000


def counted_by_frame(trades: list[dict[str, Any]]) -> list[tuple[int, str, int]]:
    """(window end, ticker, trades) of every one-second window sliding by 100 ms that holds a
    trade: counted per 100 ms frame first, then ten frames summed per window (not the
    example's own way)."""
    frames: Counter[tuple[int, str]] = Counter()
    for t in trades:
        frames[t["time"] // 100 * 100 + 100, t["ticker"]] += 1
    windows = {}
    for frame_end, ticker in frames:
        for end in range(frame_end, frame_end + 1000, 100):
            count = sum(frames[end - 100 * k, ticker] for k in range(10))
            windows[end, ticker] = count
    return sorted((end, ticker, count) for (end, ticker), count in windows.items())


def check(windows: list[Any], out: str, mode: str) -> None:
    expected = counted_by_frame(example.trades(TRADES))
    assert [tuple(w) for w in windows] == expected
    assert max(Counter((w.end, w.ticker) for w in windows).values()) == 1
    assert sum(w.trades for w in windows) == TRADES * 10  # each trade is in ten windows
    assert f"{TRADES:,} trades and a heartbeat per partition in trades-" in out
    assert f"mode {mode}, exactly-once, cancelled once its windows were in" in out
    assert f"... {len(expected):,} windows read with read_committed from trade-windows-" in out
    assert "they match a plain Python count" in out


def test_the_stock_exchange_between_topics_writes_every_window_once(kafka_broker, capsys):
    windows = example.main(
        ["--bootstrap-servers", kafka_broker.bootstrap_servers, "--trades", str(TRADES)]
    )
    check(windows, capsys.readouterr().out, "local")


@pytest.mark.spark
def test_the_same_on_spark_continuously(kafka_broker, spark_engine, capsys):
    argv = ["--bootstrap-servers", kafka_broker.bootstrap_servers, "--trades", str(TRADES)]
    windows = example.main([*argv, "--spark"], spark=spark_engine.context)
    check(windows, capsys.readouterr().out, "continuous")
