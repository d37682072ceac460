"""Issue 45's job: 80 items of 20 MB from `generate_p` through a local edge into a sink that
checks them and reports the peak resident set of its process (the member's Python worker on
SparkEngine), so a test can bound it by the queues' byte bounds (tests/test_queue_bytes*.py)."""

from __future__ import annotations

import ctypes
import re
import zlib
from functools import cache
from typing import Any

from jetspark.core import DAG, AbstractProcessor, Context, Outbox
from jetspark.edges import between
from jetspark.processors import generate_p, write_list_p

ITEMS = 80
ITEM_BYTES = 20 << 20
IN_PROCESSING = 2 * ITEM_BYTES
"""Items out of the queues' reach: the one the source made and its outbox refused, the one the
sink checks."""
ALLOCATOR_SLACK = 64 << 20
"""Freed items glibc may keep: it returns the top of its heap only past twice its mmap
threshold, which rises with the blocks freed (up to 32 MB)."""


def peak_bound(queue_bytes: int) -> int:
    """The most a member's resident set may grow over this job with queues of `queue_bytes`: on
    the edge's one link, the source's outbox bucket, the queue and the sink's inbox hold their
    byte bound each, or one item when an item is larger; plus the items in processing and what
    the allocator keeps."""
    return 3 * max(queue_bytes, ITEM_BYTES) + IN_PROCESSING + ALLOCATOR_SLACK


def item(index: int) -> bytes:
    """Item `index`: ITEM_BYTES of its number, big-endian, over and over."""
    return index.to_bytes(4, "big") * (ITEM_BYTES // 4)


@cache
def expected_checksum() -> int:
    """The CRC-32 of all items in order, made one at a time."""
    checksum = 0
    for index in range(ITEMS):
        checksum = zlib.crc32(item(index), checksum)
    return checksum


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as status:
        found = re.search(rf"^{key}:\s+(\d+) kB", status.read(), re.MULTILINE)
    assert found is not None, f"no {key} in /proc/self/status"
    return int(found.group(1)) << 10


def restart_peak() -> int:
    """Hands the allocator's free memory back to the system (glibc's malloc_trim), restarts the
    process's peak resident set (VmHWM) from here and returns the resident set now (bytes)."""
    ctypes.CDLL(None).malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    return _status_bytes("VmRSS")


class PeakSink(AbstractProcessor):
    """Chains the CRC-32 of the items in arrival order; at the end emits (items, checksum, the
    resident set when it was initialised, the peak resident set since then), sizes in bytes."""

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self.count = 0
        self.checksum = 0
        self.baseline = restart_peak()

    def try_process0(self, item: Any) -> bool:
        self.count += 1
        self.checksum = zlib.crc32(item, self.checksum)
        return True

    def complete(self) -> bool:
        return self.try_emit((self.count, self.checksum, self.baseline, _status_bytes("VmHWM")))


def big_items_dag(report: str) -> DAG:
    """generate_p(ITEMS, item) -> PeakSink -> write_list_p(report), one processor each."""
    dag = DAG("big-items")
    source = dag.new_vertex("source", generate_p(ITEMS, item)).local_parallelism(1)
    sink = dag.new_vertex("sink", PeakSink).local_parallelism(1)
    out = dag.new_vertex("report", write_list_p(report)).local_parallelism(1)
    dag.edge(between(source, sink))
    dag.edge(between(sink, out))
    return dag


def check_report(report: list[Any], queue_bytes: int) -> None:
    """Every item arrived intact and the peak resident set grew by at most `peak_bound`."""
    ((count, checksum, baseline, peak),) = report
    assert (count, checksum) == (ITEMS, expected_checksum())
    growth = peak - baseline
    assert growth <= peak_bound(queue_bytes), (
        f"the member's peak RSS grew by {growth >> 20} MB (from {baseline >> 20} MB) with 20 MB "
        f"items; the queues' byte bounds allow {peak_bound(queue_bytes) >> 20} MB"
    )
