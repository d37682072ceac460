"""Spark's web UI for a streaming job started from an example: on by default, listening on
127.0.0.1 only (SPARK_LOCAL_IP unset), its address printed, its jobs named after the DAG; Ctrl-C
ends the run as usual."""

from __future__ import annotations

import ipaddress
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "stock_exchange.py"
HANG_GUARD = 300.0
"""Seconds to wait for the UI or a job to show up: a guard against a hang, not a speed check."""
_LISTEN = "0A"
ARGUMENTS = ("--engine", "spark", "--members", "1", "--duration", "3600")


def listening_addresses(port: int) -> set[str]:
    """The addresses TCP sockets on this machine listen on at `port` (/proc/net/tcp and tcp6)."""
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            address, _, hex_port = fields[1].partition(":")
            if fields[3] != _LISTEN or int(hex_port, 16) != port:
                continue
            words = (bytes.fromhex(address[i : i + 8]) for i in range(0, len(address), 8))
            ip = ipaddress.ip_address(b"".join(word[::-1] for word in words))
            mapped = getattr(ip, "ipv4_mapped", None)
            found.add(str(mapped or ip))
    return found


def _lines(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))


def _job_descriptions(api: str) -> list[str]:
    """The descriptions (else names) of the jobs the UI at `api` lists; none while it does not
    answer in time (its REST API starts on the first request)."""
    try:
        with urllib.request.urlopen(api, timeout=30) as reply:
            (application,) = json.load(reply)
        with urllib.request.urlopen(f"{api}/{application['id']}/jobs", timeout=30) as reply:
            jobs: list[dict[str, Any]] = json.load(reply)
    except OSError:
        return []
    return [job.get("description") or job["name"] for job in jobs]


def test_a_streaming_example_serves_the_spark_ui_on_loopback(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), str(tmp_path / "out"), *ARGUMENTS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    errors: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None and process.stderr is not None
    threading.Thread(target=_lines, args=(process.stderr, errors), daemon=True).start()
    threading.Thread(target=_lines, args=(process.stdout, queue.Queue()), daemon=True).start()
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not (line := errors.get(timeout=HANG_GUARD)).startswith("Spark UI: "):
            assert time.monotonic() < deadline and process.poll() is None, line
        address = urlsplit(line.removeprefix("Spark UI: "))
        assert address.hostname == "127.0.0.1"
        assert address.port is not None
        assert listening_addresses(address.port) == {"127.0.0.1"}
        api = f"http://127.0.0.1:{address.port}/api/v1/applications"
        while not any("stock-exchange" in d for d in _job_descriptions(api)):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.5)
        process.send_signal(signal.SIGINT)  # Ctrl-C
        assert process.wait(timeout=HANG_GUARD) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
