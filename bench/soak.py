"""The soak: a CONTINUOUS job running for a long time while the memory and file descriptors of
every process it runs in, and the size of its snapshot directory, are sampled (bench only, not
CI: 30 minutes by default).

    python -m bench.soak                       # 30 minutes at 20,000 events/s on local[2]
    python -m bench.soak --minutes 5 --rate 5000 --every 5

The job is the latency rows' window DAG (bench/latency_rows.py): bench's event server sends
`--rate` events a second into `stream_socket_p`, the stock-exchange windows are counted and
written exactly-once, with 1 s snapshots, by `write_file_transactional_p`. Every `--every`
seconds it samples the resident memory and the open file descriptors of the driver's Python
process, the driver's JVM and the Spark Python workers (the processes the JVM started: the
daemon and the workers it forked, where the members run), and the bytes of the snapshot
directory. At the end the stream ends, the job completes and its windows must be exactly the
plain count of the events sent. A series is flat when, fitted by a straight line over the
samples after the first WARM_UP_FRACTION of the run, it grows by at most FLAT_GROWTH of its
level over the run, or by at most a small floor of its unit (FLOORS: 5 file descriptors,
64 kB).

It prints a table and writes every sample to `--json` (bench/results/soak.json).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.latency_rows import HOST, WINDOWS, sent_windows
from bench.latency_servers import SentEvents, servers
from bench.report import machine_facts, machine_line
from bench.streaming_rows import check_windows, exactly_once, window_line

WARM_UP_FRACTION = 0.2
FLAT_GROWTH = 0.05
"""A series is flat when it grows by at most this share of its level, ..."""
FLOORS = {"_fds": 5.0, "_processes": 0.0, "_kb": 64.0, "_mb": 0.0}
"""... or by at most this much (by the series' unit: its name's ending)."""
_RESULTS = Path(__file__).resolve().parent / "results" / "soak.json"


# ------------------------------------------------------------------ the processes


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process."""
    parents = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", encoding="ascii") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # it ended meanwhile
            parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(pid: int) -> list[int]:
    """Every process below `pid`."""
    parents = _parents()
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, of in parents.items() if of == parent]
        found += children
        frontier += children
    return found


def resident_mb(pid: int) -> float:
    """The process's resident memory (VmRSS), MB; 0 once it ended."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def descriptors(pid: int) -> int:
    """The process's open file descriptors; 0 once it ended."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def directory_bytes(path: Path) -> int:
    """Bytes of the files under `path`."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue  # an older snapshot went as a newer one committed
    return total


@dataclass(frozen=True)
class Processes:
    """The processes a job on a local master runs in."""

    jvm: int

    def workers(self) -> list[int]:
        """The Python processes the JVM started (the daemon and its forked workers)."""
        return [pid for pid in descendants(self.jvm) if _is_python(pid)]

    def sample(self, snapshots: Path) -> dict[str, float]:
        """One sample of every series."""
        workers = self.workers()
        return {
            "driver_python_rss_mb": resident_mb(os.getpid()),
            "driver_jvm_rss_mb": resident_mb(self.jvm),
            "workers_rss_mb": sum(resident_mb(pid) for pid in workers),
            "worker_processes": len(workers),
            "driver_python_fds": descriptors(os.getpid()),
            "driver_jvm_fds": descriptors(self.jvm),
            "workers_fds": sum(descriptors(pid) for pid in workers),
            "snapshot_dir_kb": directory_bytes(snapshots) / 1024,
        }


def _is_python(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"pyspark" in cmdline.read()
    except OSError:
        return False


# ------------------------------------------------------------------ the verdict


@dataclass(frozen=True)
class Trend:
    """One series over the run after the warm-up: its level, and its growth by a line fit."""

    name: str
    first: float
    last: float
    level: float
    growth: float
    """Fitted growth over the samples after the warm-up."""

    @property
    def flat(self) -> bool:
        """Grows by at most FLAT_GROWTH of its level, or by at most its unit's floor."""
        floor = next(f for ending, f in FLOORS.items() if self.name.endswith(ending))
        return self.growth <= max(FLAT_GROWTH * self.level, floor)


def trends(samples: list[dict[str, float]]) -> list[Trend]:
    """Each series' trend over the samples after the first WARM_UP_FRACTION of them."""
    kept = samples[int(len(samples) * WARM_UP_FRACTION) :]
    seconds = np.array([sample["seconds"] for sample in kept])
    result = []
    for name in kept[0]:
        if name == "seconds":
            continue
        values = np.array([sample[name] for sample in kept])
        slope = np.polyfit(seconds, values, 1)[0] if len(kept) > 1 else 0.0
        growth = float(slope * (seconds[-1] - seconds[0]))
        level = float(np.median(values))
        result.append(Trend(name, float(values[0]), float(values[-1]), level, growth))
    return result


def table(found: list[Trend], command: str, facts: dict[str, Any]) -> str:
    """The trends as a markdown table, headed by the machine and the command."""
    lines = [
        f"Machine: {machine_line(facts)}.",
        f"Command: `{command}`; {facts['date']}, commit {facts['commit']}; load average at the "
        f"end {facts['load']:.1f}.",
        "",
        "| series | after warm-up | at the end | fitted growth | flat |",
        "|---|---|---|---|---|",
    ]
    for trend in found:
        lines.append(
            f"| {trend.name} | {trend.first:,.1f} | {trend.last:,.1f} | {trend.growth:+,.1f} | "
            f"{'✓' if trend.flat else '✗'} |"
        )
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ the run


def soak(
    spark: Any, minutes: float, rate: int, every: float, progress: Callable[[str], None]
) -> tuple[list[dict[str, float]], int]:
    """Runs the job for `minutes` at `rate` events/s, sampling every `every` seconds; returns
    the samples and the windows checked at the end."""
    from jetspark.core import DirectorySnapshotStore, ExecutionMode
    from jetspark.processors import stream_socket_p, write_file_transactional_p

    processes = Processes(int(spark.context._jvm.ProcessHandle.current().pid()))
    samples: list[dict[str, float]] = []
    with servers() as (sender, _), tempfile.TemporaryDirectory(prefix="jetspark-soak-") as root:
        snapshots, out = Path(root, "snapshots"), Path(root, "out")
        dag = WINDOWS.jetspark_dag(
            stream_socket_p(HOST, sender.port), write_file_transactional_p(str(out), window_line)
        )
        job = spark.engine.new_job(
            dag,
            exactly_once(ExecutionMode.CONTINUOUS),
            snapshot_store=DirectorySnapshotStore(str(snapshots)),
        )
        while sender.clients() < spark.engine.members:
            if job.status.is_terminal:
                job.join(0)
            time.sleep(0.05)
        sender.pace(rate)
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < minutes * 60:
            if job.status.is_terminal:
                job.join(0)
                raise RuntimeError(f"{job.name} ended before the soak did")
            samples.append({"seconds": elapsed, **processes.sample(snapshots)})
            progress(f"{elapsed / 60:5.1f} min: " + json.dumps(samples[-1]))
            time.sleep(max(0.0, started + len(samples) * every - time.monotonic()))
        sent = sender.stop()
        job.join(600)  # the source saw the stream end: the job completes
        checked = _check_output(out, sent)
    return samples, checked


def _check_output(directory: Path, sent: SentEvents) -> int:
    """The windows the job published are the plain count of the events sent; returns how
    many there are."""
    windows = [
        tuple(map(int, line.split()))
        for path in sorted(directory.glob("part-*"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    check_windows("jetspark CONTINUOUS soak", windows, sent_windows(sent))
    return len(windows)


def main(argv: Sequence[str] | None = None) -> None:
    """Runs the soak (module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=(__doc__ or "").split("\n", 1)[0]
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="%(default)s")
    parser.add_argument("--rate", type=int, default=20_000, help="events/s (%(default)s)")
    parser.add_argument("--every", type=float, default=10.0, help="seconds (%(default)s)")
    parser.add_argument("--master", default="local[2]", help="%(default)s")
    parser.add_argument("--json", type=Path, default=_RESULTS, help="%(default)s")
    args = parser.parse_args(argv)
    from bench.spark_rows import start_spark

    def progress(message: str) -> None:
        print(f"[soak] {message}", file=sys.stderr, flush=True)

    spark = start_spark(args.master)
    try:
        samples, windows = soak(spark, args.minutes, args.rate, args.every, progress)
        java = spark.java_version()
    finally:
        spark.context.stop()
    facts = {**machine_facts(java), "load": os.getloadavg()[0]}
    command = " ".join(["python -m bench.soak", *(sys.argv[1:] if argv is None else argv)])
    found = trends(samples)
    print(table(found, command, facts))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "machine": facts,
        "command": command,
        "windows_checked": windows,
        "trends": [{**vars(t), "flat": t.flat} for t in found],
        "samples": samples,
    }
    args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    progress(f"wrote {args.json}")


if __name__ == "__main__":
    main()
