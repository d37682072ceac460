"""Peeking wrappers: they log input, output or snapshot entries and change nothing else."""

from __future__ import annotations

import logging

import pytest
from test_processors_helpers import verify

from jetspark.core.test_support import ONE_ITEM, TestSupport
from jetspark.core.watermark import Watermark
from jetspark.processors import (
    aggregate_by_key_p,
    flat_map_p,
    map_p,
    peek_input_p,
    peek_output_p,
    peek_snapshot_p,
    whole_item,
)
from jetspark.processors.aggregate import counting


@pytest.fixture
def log(caplog):
    caplog.set_level(logging.INFO, logger="jetspark")
    return caplog


def messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def test_peek_input_logs_each_item_taken_and_watermarks(log):
    supplier = peek_input_p(map_p(lambda x: x * 2), to_string=lambda x: f"#{x}")
    verify(supplier).modes(ONE_ITEM).input([1, Watermark(5), 2]).expect_output([2, Watermark(5), 4])
    assert messages(log) == [
        "Input from ordinal 0: #1",
        "Input: Watermark(timestamp=5)",
        "Input from ordinal 0: #2",
    ]


def test_peek_output_logs_each_emitted_item_once(log):
    supplier = peek_output_p(flat_map_p(lambda x: [x, -x]), should_log=lambda x: x > 0)
    verify(supplier).modes(ONE_ITEM).input([1, 2]).expect_output([1, -1, 2, -2])
    assert messages(log) == ["Output: 1", "Output: 2"]


def test_peek_snapshot_logs_saved_state(log):
    supplier = peek_snapshot_p(aggregate_by_key_p(whole_item, counting()))
    verify(supplier).output_checker(TestSupport.SAME_ITEMS_ANY_ORDER).input(
        ["a", "a"]
    ).expect_output([("a", 2)])
    assert "Output to snapshot: ('a', 1)" in messages(log)
    assert "Output to snapshot: ('a', 2)" in messages(log)


def test_peek_wrappers_pass_all_modes_with_snapshots():
    inner = aggregate_by_key_p(whole_item, counting())
    for wrap in (peek_input_p, peek_output_p, peek_snapshot_p):
        verify(wrap(inner)).output_checker(TestSupport.SAME_ITEMS_ANY_ORDER).input(
            list("abcab")
        ).expect_output([("a", 2), ("b", 2), ("c", 1)])
