"""The sending end of a link between continuous members counts bytes as well as entries
(core/spark/continuous/flow.py).

A link's window used to be two queue sizes of entries whatever the items' size: with items of
1 MB, a sender had up to two queue sizes of megabytes in flight per link. Now it stops at a
window of encoded bytes or of entries, whichever comes first; an item larger than the window
still goes, alone. (The stream between two members: test_continuous_stream_frames.py.)
"""

from __future__ import annotations

from jetspark.core.spark.continuous.flow import SendWindow

QUEUE_SIZE = 64
MB = 1 << 20


def test_the_window_fills_by_bytes_before_it_fills_by_entries() -> None:
    window = SendWindow(entries=2 * QUEUE_SIZE, limit_bytes=4 * MB)
    assert window.room() == 2 * QUEUE_SIZE  # no item measured yet: they count as 1 KB
    window.pushed(1)
    window.framed(1, MB, items=True)
    assert window.room() == 3  # 4 MB less the 1 MB in flight
    window.pushed(3)
    window.framed(3, 3 * MB, items=True)
    assert window.room() == 0  # 4 entries in flight of a window of 128
    window.acknowledged(2)  # the receiver moved two into its queue
    assert window.room() == 2
    window.acknowledged(2)
    assert window.room() == 4


def test_small_items_fill_the_window_by_entries() -> None:
    window = SendWindow(entries=2 * QUEUE_SIZE, limit_bytes=4 * MB)
    window.pushed(1)
    window.framed(1, 100, items=True)
    assert window.room() == 2 * QUEUE_SIZE - 1


def test_a_frame_acknowledged_in_part_frees_its_bytes_in_proportion() -> None:
    window = SendWindow(entries=2 * QUEUE_SIZE, limit_bytes=4 * MB)
    window.pushed(4)
    window.framed(4, 4 * MB, items=True)
    window.acknowledged(1)
    assert window.in_flight_bytes == 3 * MB
    assert window.room() == 1


def test_an_item_larger_than_the_window_goes_alone() -> None:
    window = SendWindow(entries=2 * QUEUE_SIZE, limit_bytes=4 * MB)
    window.pushed(1)
    window.framed(1, 10 * MB, items=True)
    assert window.room() == 0
    window.acknowledged(1)
    assert window.room() == 1
