"""The Kafka benchmark row's own logic (bench/kafka_rows.py), without a broker: the trade and
result records, each trade's latency from its produce and its window's visible moments, the
check of the results against the plain count, and the choice of the fastest peer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench import kafka_rows
from bench.plain_counts import window_counts

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_a_trade_and_a_result_record_read_back_as_written() -> None:
    assert kafka_rows.trade_value(9, 1_500_000_000_123) == b"T2,109,1500000000123"
    assert kafka_rows.parse_trade(b"T2,109,1500000000123") == (1_500_000_000_123, 2)
    assert kafka_rows.parse_result("T6,1500000000000,42") == (1_500_000_000_000, 6, 42)


def test_a_trades_first_window_to_close_ends_at_the_next_slide() -> None:
    starts = kafka_rows.first_window(np.array([1_000, 1_099, 1_100, 1_250]))
    assert starts.tolist() == [100, 100, 200, 300]  # ends 1100, 1100, 1200, 1300


def test_latency_is_the_windows_visible_moment_less_the_trades_produce_moment() -> None:
    produced_us = np.array([1_000_000, 1_050_000, 1_120_000])
    stamps_ms = produced_us // 1000
    tickers = np.array([0, 0, 1])
    visible = {(100, 0): 1_400_000, (200, 1): 1_900_000, (0, 0): 5}
    latencies = kafka_rows.trade_latencies_us(produced_us, stamps_ms, tickers, visible)
    assert latencies.tolist() == [400_000, 350_000, 780_000]
    assert kafka_rows.p99_ms(latencies) == pytest.approx(float(np.percentile([400, 350, 780], 99)))


def test_a_trade_whose_window_never_came_fails_the_latency() -> None:
    with pytest.raises(AssertionError, match="never came"):
        kafka_rows.trade_latencies_us(
            np.array([1_000_000]), np.array([1_000]), np.array([3]), {(100, 0): 1}
        )


def _expected() -> dict[tuple[int, int], int]:
    stamps = kafka_rows.START_MILLIS + np.arange(1_000) // 5
    return window_counts(stamps, np.arange(1_000) % kafka_rows.TICKERS)


def test_exactly_the_plain_counts_windows_pass_the_check() -> None:
    expected = _expected()
    results = [(start, ticker, n) for (start, ticker), n in expected.items()]
    kafka_rows.check_results("system", results, expected)


@pytest.mark.parametrize("fault", ["twice", "wrong", "missing"])
def test_a_window_twice_wrong_or_missing_fails_the_check(fault: str) -> None:
    expected = _expected()
    results = [(start, ticker, n) for (start, ticker), n in expected.items()]
    if fault == "twice":
        results.append(results[3])
    elif fault == "wrong":
        start, ticker, n = results[3]
        results[3] = (start, ticker, n + 1)
    else:
        del results[3]
    with pytest.raises(AssertionError, match="system: the windows differ"):
        kafka_rows.check_results("system", results, expected)


def test_a_paced_runs_open_windows_may_be_missing_but_not_wrong() -> None:
    expected = _expected()
    keys = sorted(expected)
    required = set(keys[: len(keys) // 2])
    results = [(start, ticker, expected[start, ticker]) for start, ticker in sorted(required)]
    kafka_rows.check_covered("system", results, expected, required)
    start, ticker = keys[-1]
    with pytest.raises(AssertionError, match="plain count"):
        kafka_rows.check_covered("system", [*results, (start, ticker, 10**6)], expected, required)
    with pytest.raises(AssertionError, match="missing"):
        kafka_rows.check_covered("system", results[1:], expected, required)


def test_the_closing_trade_closes_every_window_and_is_in_none() -> None:
    last = kafka_rows.START_MILLIS + 999
    closer = kafka_rows.closing_time(last)
    window_of_last = int(kafka_rows.first_window(np.array([last]))[0]) + 900  # its last window
    assert closer - kafka_rows.LAG_MILLIS >= window_of_last + 1_000  # the watermark passes it
    first_with_closer = closer - 1_000 + 1
    assert first_with_closer > last  # no window holds both


def test_the_fastest_peer_is_the_lowest_p99_of_those_that_kept_up() -> None:
    peers = {"sss": [900.0, 800.0], "rtm": [50.0, math.nan], "other": [700.0, 600.0]}
    assert kafka_rows.fastest_peer(peers) == ("other", [700.0, 600.0])
    name, values = kafka_rows.fastest_peer({"sss": [math.nan], "rtm": [math.nan]})
    assert name == "sss" and math.isnan(values[0])
