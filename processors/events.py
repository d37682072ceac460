"""JetEvent: an item carried with its event timestamp, as a timestamped stream passes it on."""

from __future__ import annotations

from typing import Any, NamedTuple


class JetEvent(NamedTuple):
    """An item of a timestamped stream with its event timestamp.

    The pipeline planner wraps items in these after `add_timestamps` (or a timestamped source)
    and unwraps them for every user function, so user code only ever sees `item`.
    """

    timestamp: int
    item: Any


def event_timestamp(event: JetEvent) -> int:
    """The timestamp of a JetEvent: the timestamp function of the windows over wrapped items."""
    return event.timestamp
