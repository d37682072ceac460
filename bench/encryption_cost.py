"""The cost of TLS on a continuous job's connections (issue #33): jetspark's own figures of rows
13a (stock-exchange windows, CONTINUOUS exactly-once, events/s) and 15e (p99 latency across a
distributed partitioned edge at 20,000 events/s, CONTINUOUS exactly-once) on one Spark
context, with and without `spark.network.crypto.enabled=true` + `spark.authenticate=true`,
alternating which goes first from round to round; each round's ratio encrypted / plain, their
median with the smallest and largest. Both sides authenticate every frame; the difference is
TLS alone.

    python -m bench.encryption_cost [--rounds 3] [--seconds 20] [--latency-seconds 5]
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

from bench import latency_rows, spark_rows, streaming_rows
from bench.timing import Samples

ENCRYPTED = {
    "spark.network.crypto.enabled": "true",
    "spark.authenticate": "true",
    "spark.authenticate.secret": "bench",
}
LATENCY_RATE = 20_000
"""Row 15e's rate."""


@contextlib.contextmanager
def _settings(context: Any, settings: dict[str, str]) -> Iterator[None]:
    """`context`'s configuration with `settings` for the block (jetspark reads it at submit)."""
    conf = context._jsc.sc().conf()
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key in settings:
            conf.remove(key)


def _figures(spark: Any, seconds: float, latency_seconds: float) -> tuple[float, float]:
    """(row 13a's events/s, row 15e's p99 ms) of one run each, outputs checked."""
    from jetspark.core import ExecutionMode

    rate = streaming_rows.spark_engine_rate(spark, ExecutionMode.CONTINUOUS, seconds)
    (latency,) = latency_rows.jetspark_latencies(
        spark, ExecutionMode.CONTINUOUS, latency_rows.EVENTS, (LATENCY_RATE,), latency_seconds
    )
    return rate, latency.p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0, help="row 13a's measured span")
    parser.add_argument("--latency-seconds", type=float, default=5.0, help="row 15e's")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = spark_rows.start_spark(args.master)
    figures: dict[str, list[tuple[float, float]]] = {"plain": [], "TLS": []}
    for round_ in range(args.rounds):
        order = ["plain", "TLS"] if round_ % 2 == 0 else ["TLS", "plain"]
        for side in order:
            with _settings(spark.context, ENCRYPTED if side == "TLS" else {}):
                figures[side].append(_figures(spark, args.seconds, args.latency_seconds))
            rate, p99 = figures[side][-1]
            print(f"round {round_ + 1} {side}: 13a {rate:,.0f} events/s, 15e p99 {p99:.2f} ms")
    print("\n| row | plain | TLS | TLS / plain, median (min-max) |")
    print("|---|---|---|---|")
    for index, (row, unit) in enumerate((("13a", "events/s"), ("15e", "ms p99"))):
        plain = Samples(tuple(figure[index] for figure in figures["plain"]))
        tls = Samples(tuple(figure[index] for figure in figures["TLS"]))
        ratio = tls.over(plain)
        print(
            f"| {row} | {plain.median:,.2f} {unit} | {tls.median:,.2f} {unit} | "
            f"{ratio.median:.2f} ({ratio.low:.2f}-{ratio.high:.2f}) |"
        )


if __name__ == "__main__":
    main()
