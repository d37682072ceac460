"""The records that leave a Spark task: edge traffic for the next stage, and results.

Every record is a pair `(member, body)`, shuffled by `member_of_key`, one shared function
object: PySpark names a partitioner after its function's identity, so every shuffle made with it
is co-partitioned and `union` keeps each input's records together, in input order.

- Edge record body: `(edge id, target local index, upstream global index, sequence, payload)`;
  payload is `encode_batch(chunk)` bytes, a `Watermark`, or None for "upstream done".
- Result record body: `(RESULT, kind, name, payload, stage)`: what sinks wrote to named lists and
  maps, RDD-sink items, metrics and, in micro-batches, snapshot parts, batch facts and sealed
  files, from
  `stage`. Results ride along through one consumer stage of each stage (its heir) to a
  terminal stage, whose output the driver reads.
"""

from __future__ import annotations

from typing import Any

RESULT = -1
"""The edge id of result records."""

LIST, MAP, RDD, METRICS = "list", "map", "rdd", "metrics"
SNAPSHOT, BATCH, PUBLISH = "snapshot", "batch", "publish"
"""Micro-batches: a part file of the batch's snapshot; the batch facts of one task; the files
its transactional sinks sealed, for the driver to publish once it committed the batch."""


def member_of_key(key: Any) -> int:
    """The shuffle partition of a record: its target member (first of a sort key)."""
    return key if type(key) is int else key[0]


def is_result(record: tuple[int, tuple[Any, ...]]) -> bool:
    """True for a result record."""
    return record[1][0] == RESULT


def is_collected_result(record: tuple[int, tuple[Any, ...]]) -> bool:
    """True for results the driver collects (everything but RDD-sink items)."""
    body = record[1]
    return body[0] == RESULT and body[1] != RDD


def result_record(
    member: int, stage: int, kind: str, name: str, payload: Any
) -> tuple[int, tuple[Any, ...]]:
    """A result record produced (or passed on) by `stage` on `member`."""
    return member, (RESULT, kind, name, payload, stage)
