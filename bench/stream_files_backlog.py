"""stream_files_p over a backlog: does reading N lines cost N, in time and in memory?

`python -m bench.stream_files_backlog` writes two backlogs of generated lines (400,000 and
2,000,000 by default, about 23 bytes each: the large one is 46 MB) and, for each engine, reads
each backlog with `stream_files_p` in a child process of its own, sizes alternating round by
round:

- LocalEngine(1), no guarantee: wall time from submitting the job until every line is emitted,
  and the child's peak RSS;
- SparkEngine on local[2], one member, exactly-once micro-batches of `--batch-items` lines each
  (40,000: 50 batches for the large backlog; a new processor per batch restores the offset the
  last one saved): wall time from submitting until every line is emitted (the context's
  start-up excluded), and the highest peak RSS of the Spark Python workers (Linux: VmHWM in
  /proc, read before the context stops).

A line count checks every run's output (an `aggregate_p(counting())` downstream, emitted when
the directory is deleted and the source completes): a run that lost or repeated a line fails.
The baseline of each row is the small backlog measured in the same round, scaled by the size
ratio, so a ratio near 1 means a cost linear in the backlog (`--lines SMALL,LARGE`,
`--rounds R`, `--engines local,spark`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.timing import Samples

BATCH_ITEMS = 40_000
"""Lines per micro-batch on Spark, by default."""


def write_backlog(path: Path, count: int) -> None:
    """`count` lines of about 23 bytes, `line <n> of the backlog`, in 1 MB writes."""
    with open(path, "w", encoding="utf-8") as file:
        for first in range(0, count, 40_000):
            last = min(first + 40_000, count)
            file.write("".join(f"line {n:>8} of backlog\n" for n in range(first, last)))


def read_backlog(
    engine_kind: str, directory: Path, count: int, batch_items: int
) -> dict[str, float]:
    """Runs the job in this process (a child): seconds until `count` lines are emitted, the
    line count the job ends with, the peak RSS of this process (LocalEngine) or of the Spark
    Python workers."""
    from jetspark.core import DAG, JobConfig, LocalEngine, ProcessingGuarantee
    from jetspark.edges import between
    from jetspark.processors import aggregate_p, stream_files_p, write_list_p
    from jetspark.processors.aggregate import counting

    dag = DAG("backlog")
    files = dag.new_vertex("files", stream_files_p(str(directory), "*.log"), local_parallelism=1)
    count_lines = dag.new_vertex("count", aggregate_p(counting()), local_parallelism=1)
    sink = dag.new_vertex("sink", write_list_p("counted"), local_parallelism=1)
    dag.edge(between(files, count_lines).distributed().all_to_one())
    dag.edge(between(count_lines, sink))
    if engine_kind == "local":
        engine = LocalEngine(1)
        config = JobConfig()
        submit = {}
    else:
        from jetspark.core import DirectorySnapshotStore, ExecutionMode
        from jetspark.core.spark import SparkEngine
        from jetspark.core.spark.session import create_context

        engine = SparkEngine(create_context("local[2]"), members=1, batch_items=batch_items)
        config = JobConfig(
            processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
            snapshot_interval_millis=1_000,
            execution_mode=ExecutionMode.MICRO_BATCH,
        )
        submit = {"snapshot_store": DirectorySnapshotStore(directory.parent / "snapshots")}
    started = time.perf_counter()
    job = engine.new_job(dag, config, **submit)
    while sum(sum(p.emitted_count.values()) for p in job.metrics.of_vertex("files")) < count:
        if job.status.is_terminal:
            job.join()
        time.sleep(0.005)
    took = time.perf_counter() - started
    shutil.rmtree(directory)
    job.join(600)
    if engine_kind == "local":
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    else:
        peak = max(map(_peak_rss_mb, _descendants(os.getpid())), default=0.0)
    return {"seconds": took, "lines": engine.get_list("counted")[-1], "peak_rss_mb": peak}


def _descendants(pid: int) -> list[int]:
    """The Python processes below `pid` (the JVM's worker daemon and its workers), from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat_line = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat_line.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return [p for p in found if "python" in Path(f"/proc/{p}/comm").read_text(errors="replace")]


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), in MB; 0 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    line = next((ln for ln in status.splitlines() if ln.startswith("VmHWM:")), "VmHWM: 0 kB")
    return int(line.split()[1]) / 1024


def run_child(
    engine_kind: str, backlog: Path, count: int, work: Path, batch_items: int
) -> dict[str, float]:
    """One measurement, in a fresh interpreter, on a copy of the backlog (the job deletes it)."""
    directory = work / "logs"
    shutil.rmtree(work, ignore_errors=True)
    directory.mkdir(parents=True)
    shutil.copy(backlog, directory / "a.log")
    child = subprocess.run(
        [sys.executable, "-m", "bench.stream_files_backlog", "--child", engine_kind,
         str(directory), str(count), "--batch-items", str(batch_items)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if child.returncode != 0:
        raise RuntimeError(f"the {engine_kind} run failed:\n{child.stderr[-3000:]}")
    result = json.loads(child.stdout.strip().splitlines()[-1])
    if result["lines"] != count:
        raise AssertionError(f"{engine_kind}: {result['lines']} lines counted, not {count}")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", default="400000,2000000", help="SMALL,LARGE backlogs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engines", default="local,spark")
    parser.add_argument("--batch-items", type=int, default=BATCH_ITEMS)
    parser.add_argument(
        "--child", nargs=3, metavar=("ENGINE", "DIR", "LINES"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        engine_kind, directory, count = args.child
        result = read_backlog(engine_kind, Path(directory), int(count), args.batch_items)
        print(json.dumps(result))
        return
    small, large = (int(n) for n in args.lines.split(","))
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        backlogs = {size: root / f"{size}.log" for size in (small, large)}
        for size, path in backlogs.items():
            write_backlog(path, size)
        for engine_kind in args.engines.split(","):
            measured: dict[int, list[dict[str, float]]] = {small: [], large: []}
            for round_index in range(args.rounds):
                order = (small, large) if round_index % 2 == 0 else (large, small)
                for size in order:
                    measured[size].append(
                        run_child(
                            engine_kind, backlogs[size], size, root / "work", args.batch_items
                        )
                    )
            report(engine_kind, small, large, measured, backlogs[large].stat().st_size)


def report(
    engine_kind: str,
    small: int,
    large: int,
    measured: dict[int, list[dict[str, float]]],
    large_bytes: int,
) -> None:
    """Prints what one engine measured: times (large vs small, scaled) and peak RSS."""
    scale = large / small
    times = {size: Samples(tuple(r["seconds"] for r in runs)) for size, runs in measured.items()}
    ratio = times[large].over(times[small].map(lambda s: s * scale))
    print(
        f"{engine_kind}: {large:,} lines ({large_bytes / 1e6:.0f} MB) in "
        f"{times[large].median:.2f} s, {small:,} in {times[small].median:.2f} s; time / (time "
        f"of {small:,} x {scale:g}): {ratio.median:.2f} ({ratio.low:.2f}-{ratio.high:.2f})"
    )
    peaks = {
        size: Samples(tuple(r["peak_rss_mb"] for r in runs)) for size, runs in measured.items()
    }
    who = "the process" if engine_kind == "local" else "a Python worker"
    print(
        f"{engine_kind}: peak RSS of {who}: {peaks[large].median:.0f} MB for {large:,} lines, "
        f"{peaks[small].median:.0f} MB for {small:,} (ratio "
        f"{peaks[large].median / peaks[small].median:.2f})"
    )


if __name__ == "__main__":
    main()
