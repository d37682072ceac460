"""LineFrames reads a JVM text RDD's frames as PySpark's UTF8Deserializer does, and leaves the
stream exactly where PySpark's reader would: the worker reads its own protocol after the data.
The frames are written here as the JVM writes them, read through buffers of many sizes so that
frames and lengths straddle every buffer boundary."""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark import RDD
from pyspark.serializers import SpecialLengths, UTF8Deserializer

from jetspark.core.spark.stages.line_frames import LineFrames, read_in_bulk

AFTER_THE_DATA = struct.pack(">i", SpecialLengths.END_OF_STREAM) + b"worker protocol"


def frames(lines: list[str | None]) -> bytes:
    """The data section of `lines`, then what the worker reads after it."""
    out = io.BytesIO()
    for line in lines:
        if line is None:
            out.write(struct.pack(">i", SpecialLengths.NULL))
        else:
            data = line.encode("utf-8")
            out.write(struct.pack(">i", len(data)) + data)
    out.write(struct.pack(">i", SpecialLengths.END_OF_DATA_SECTION))
    return out.getvalue() + AFTER_THE_DATA


def read(deserializer: UTF8Deserializer, data: bytes, buffer_size: int) -> tuple[list, bytes]:
    """The items read, and the bytes the stream still holds afterwards."""
    stream = io.BufferedReader(io.BytesIO(data), buffer_size)
    items = list(deserializer.load_stream(stream))
    return items, stream.read()


LINES = ["the first line", "", "café ✓ 𝄞", None, "x" * 300, "last"]


@pytest.mark.parametrize("buffer_size", [1, 3, 4, 5, 7, 16, 64, 301, 4096])
def test_reads_what_pyspark_reads_and_leaves_the_rest_of_the_stream(buffer_size: int) -> None:
    data = frames(LINES)
    assert read(LineFrames(), data, buffer_size) == (LINES, AFTER_THE_DATA)
    assert read(UTF8Deserializer(), data, buffer_size) == (LINES, AFTER_THE_DATA)


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.one_of(st.none(), st.text(max_size=40)), max_size=60),
    buffer_size=st.integers(min_value=1, max_value=200),
)
def test_any_lines_through_any_buffer(lines: list[str | None], buffer_size: int) -> None:
    assert read(LineFrames(), frames(lines), buffer_size) == (lines, AFTER_THE_DATA)


def test_a_stream_that_ends_without_the_marker_ends_the_lines() -> None:
    data = frames(["a", "b"])[: -len(AFTER_THE_DATA) - 4]
    assert read(LineFrames(), data, 8)[0] == ["a", "b"]


def test_a_stream_without_peek_is_read_as_pyspark_reads_it() -> None:
    assert list(LineFrames().load_stream(io.BytesIO(frames(LINES)))) == LINES


@pytest.mark.spark
def test_text_rdds_read_in_bulk_and_other_rdds_as_they_are(spark_engine: Any) -> None:
    context = spark_engine.context
    text = context.parallelize(["a", "b"]).map(str)  # a Python RDD: pickled batches
    assert read_in_bulk(text) is text
    strings = context._jvm.java.util.ArrayList()
    for line in LINES[:3]:
        strings.add(line)
    jvm_text = context._jsc.parallelize(strings, 2)
    lines = read_in_bulk(RDD(jvm_text, context, UTF8Deserializer()))
    assert isinstance(lines._jrdd_deserializer, LineFrames)
    assert lines.collect() == LINES[:3]
    assert lines.map(len).collect() == [len(line) for line in LINES[:3]]  # in the task
