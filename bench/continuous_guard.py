"""The continuous member's own figures behind rows 13a/13e (stock-exchange windows, CONTINUOUS
exactly-once, events/s) and 15e/15g (p99 latency across a distributed partitioned edge at
20,000 and 100,000 events/s, CONTINUOUS exactly-once), on the working tree and on a git ref,
alternating which goes first from round to round; each round's ratio new / old, their median
with the smallest and largest. `--compare` runs those rows' whole groups with their baselines
(about an hour for 5 rounds); this runs the CONTINUOUS side only, which is what changes when
the member's runtime or connections do (issue #32's guard: within 5% of before, or better).

    python -m bench.continuous_guard REF [--rounds 5] [--seconds 20] [--latency-seconds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.compare import checked_out, package_path

LATENCY_RATES = (20_000, 100_000)
"""Rows 15e's and 15g's rates."""
FIGURES = (("13a/13e", "events/s", True), ("15e", "ms p99", False), ("15g", "ms p99", False))
"""Each figure: its rows, unit, and whether higher is better."""


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
    inherited = os.environ.get("PYTHONPATH")
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(python_path), inherited])),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            MEASURE,
            str(seconds),
            str(latency_seconds),
            json.dumps(LATENCY_RATES),
        ],
        cwd=tree,
        env=environment,
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
    figures: dict[str, list[list[float]]] = {"new": [], "old": []}
    with tempfile.TemporaryDirectory(prefix="jetspark-guard-") as scratch:
        directory = Path(scratch)
        with checked_out(here, args.ref, directory / "old") as old_tree:
            trees = {
                "new": (here, package_path(here, directory / "new-path")),
                "old": (old_tree, package_path(old_tree, directory / "old-path")),
            }
            for round_ in range(args.rounds):
                for side in ("new", "old") if round_ % 2 == 0 else ("old", "new"):
                    tree, python_path = trees[side]
                    figures[side].append(
                        _run_side(tree, python_path, args.seconds, args.latency_seconds)
                    )
                    shown = ", ".join(f"{value:,.2f}" for value in figures[side][-1])
                    print(f"round {round_ + 1} {side}: {shown}", flush=True)
    print(f"\n| rows | new | {args.ref} | new / old, median (min-max) | better |")
    print("|---|---|---|---|---|")
    for index, (rows, unit, higher) in enumerate(FIGURES):
        new = [run[index] for run in figures["new"]]
        old = [run[index] for run in figures["old"]]
        ratios = [n / o for n, o in zip(new, old, strict=True)]
        print(
            f"| {rows} | {statistics.median(new):,.2f} {unit} | {statistics.median(old):,.2f} "
            f"{unit} | {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
            f"{'higher' if higher else 'lower'} |"
        )


if __name__ == "__main__":
    main()
