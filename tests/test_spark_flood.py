"""A continuous job under a flood of strangers (issue #44): while 48 threads hold connections
to the driver's coordinator and to every member's port, each reconnecting as soon as it is
dropped, an exactly-once job starts, takes snapshots, comes back from a Python worker killed
with SIGKILL and counts exactly. The job's listeners are on fixed ports below the ephemeral
range, so that no flooding connection takes one of them as its own port."""

from __future__ import annotations

import random
import signal
import socket
from contextlib import ExitStack
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from spark_conf import configured
from test_continuous_admission import Flood

from jetspark.core import DirectorySnapshotStore, ExecutionMode, JobConfig, ProcessingGuarantee
from jetspark.core.spark.continuous.settings import COORDINATOR_PORT, MEMBER_PORT, PORT_RETRIES

pytestmark = pytest.mark.spark

FLOOD_THREADS = 48
MEMBERS = 2
RETRIES = 3
"""Ports tried past the first, for each listener."""
JOB_SECONDS = 300.0
"""A generous bound on the job (never reached unless something hangs)."""


def _free_ports_below_ephemeral(count: int) -> int:
    """The first of `count` consecutive ports of 127.0.0.1, free now, below the range the
    kernel picks a connection's own port from."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
        lowest_ephemeral = int(ports.read().split()[0])
    while True:
        first = random.randrange(max(1024, lowest_ephemeral - 8000), lowest_ephemeral - count)
        try:
            with ExitStack() as stack:
                for port in range(first, first + count):
                    stack.enter_context(socket.create_server(("127.0.0.1", port)))
            return first
        except OSError:
            continue


def test_a_flooded_exactly_once_job_snapshots_survives_a_killed_worker_and_counts_exactly(
    spark_engine: Any, tmp_path: Any
) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=MEMBERS)
    items = jobs.events(3000)
    engine.get_list("events").extend(items)
    ports = _free_ports_below_ephemeral(2 * (RETRIES + 1))
    coordinator_ports = range(ports, ports + RETRIES + 1)
    member_ports = range(ports + RETRIES + 1, ports + 2 * (RETRIES + 1))
    settings = {
        COORDINATOR_PORT: str(coordinator_ports[0]),
        MEMBER_PORT: str(member_ports[0]),
        PORT_RETRIES: str(RETRIES),
    }
    snapshots = str(tmp_path / "snapshots")
    kill = jobs.SignalOnce(signal.SIGKILL, 400, snapshots, str(tmp_path / "killed"))
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=5,
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    flood = Flood(
        [("127.0.0.1", port) for port in [*coordinator_ports, *member_ports]], FLOOD_THREADS
    )
    try:
        with configured(engine.context, settings):
            job = engine.new_job(
                jobs.windowed_dag(kill), config, snapshot_store=DirectorySnapshotStore(snapshots)
            )
            job.join(JOB_SECONDS)
    finally:
        flood.stop()
    assert (tmp_path / "killed").exists()
    assert job.metrics.restarts == 1
    assert job.metrics.snapshot_count >= 1
    assert engine.get_map("windows") == jobs.expected_windows(items)
    assert flood.connections > FLOOD_THREADS  # the listeners dropped the strangers, who came back
