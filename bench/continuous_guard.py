"""The continuous member's own figures behind rows 13a/13e (stock-exchange windows, CONTINUOUS
exactly-once, events/s) and 15e/15g (p99 latency across a distributed partitioned edge at
20,000 and 100,000 events/s, CONTINUOUS exactly-once), on the working tree and on a git ref,
alternating which goes first from round to round, in `--compare`'s table (each round's ratio
new / old, their median with the smallest and largest, a row over 10% worse flagged). `--compare`
runs those rows' whole groups with their baselines
(about an hour for 5 rounds); this runs the CONTINUOUS side only, which is what changes when
the member's runtime or connections do (issue #32's guard: within 5% of before, or better).

    python -m bench.continuous_guard REF [--rounds 5] [--seconds 20] [--latency-seconds 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.compare import (
    Comparison,
    alternate_sides,
    checked_out,
    package_path,
    side_environment,
    table,
)
from bench.timing import Samples

LATENCY_RATES = (20_000, 100_000)
"""Rows 15e's and 15g's rates."""
FIGURES = (("13a/13e", "events/s"), ("15e", "ms p99"), ("15g", "ms p99"))
"""Each figure's rows and unit (a unit in "/s" is better higher, as `Comparison` reads it)."""


MEASURE = """
import json, sys
from jetspark.core import ExecutionMode
from bench import latency_rows, spark_rows, streaming_rows

seconds, latency_seconds, rates = float(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])
spark = spark_rows.start_spark("local[2]")
rate = streaming_rows.spark_engine_rate(spark, ExecutionMode.CONTINUOUS, seconds)
latencies = latency_rows.jetspark_latencies(
    spark, ExecutionMode.CONTINUOUS, latency_rows.EVENTS, rates, latency_seconds
)
print(json.dumps([rate, *(latency.p99 for latency in latencies)]))
"""
"""One side's run: [events/s, p99 ms per latency rate], outputs checked by the rows' own
functions, with the side's own jetspark and bench."""


def _run_side(tree: Path, python_path: Path, seconds: float, latency_seconds: float) -> list[float]:
    """MEASURE in a Python of its own, in `tree` with its jetspark first on PYTHONPATH."""
    arguments = [str(seconds), str(latency_seconds), json.dumps(LATENCY_RATES)]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *arguments],
        cwd=tree,
        env=side_environment(python_path),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the run in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ref", help="the git ref to compare the working tree with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=20.0, help="row 13a's measured span")
    parser.add_argument("--latency-seconds", type=float, default=5.0, help="per latency rate")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="jetspark-guard-") as scratch:
        directory = Path(scratch)
        with checked_out(here, args.ref, directory) as old_tree:
            trees = {"new": here, "old": old_tree}
            paths = {side: package_path(tree, directory / side) for side, tree in trees.items()}

            def run(side: str, round_index: int) -> list[float]:
                figures = _run_side(trees[side], paths[side], args.seconds, args.latency_seconds)
                shown = ", ".join(f"{value:,.2f}" for value in figures)
                print(f"round {round_index + 1} {side}: {shown}", flush=True)
                return figures

            runs = alternate_sides(("new", "old"), args.rounds, run)
    rows = [
        Comparison(
            number,
            unit,
            Samples(tuple(figures[index] for figures in runs["new"])),
            Samples(tuple(figures[index] for figures in runs["old"])),
        )
        for index, (number, unit) in enumerate(FIGURES)
    ]
    print()
    print(table(rows, [], args.ref, args.rounds))


if __name__ == "__main__":
    main()
