"""RoutingPolicy: how an edge picks the target processor(s) of each item (manual §8.1.5)."""

from __future__ import annotations

import enum


class RoutingPolicy(enum.Enum):
    """The five routing policies of Jet."""

    UNICAST = "unicast"
    """Exactly one target per item, sprayed round-robin over the candidates."""
    ISOLATED = "isolated"
    """Each downstream processor is fed by a fixed set of upstream processors (local edges only)."""
    BROADCAST = "broadcast"
    """Every candidate receives every item."""
    PARTITIONED = "partitioned"
    """The processor owning the item's key partition receives it."""
    ALL_TO_ONE = "all_to_one"
    """One processor, chosen once per job, receives all items."""
