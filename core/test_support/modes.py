"""The modes a processor is verified in: how full the inbox gets and how often state is restored."""

from __future__ import annotations

import sys
from dataclasses import dataclass

ALL_ITEMS = sys.maxsize
"""An inbox size meaning "every consecutive input item of the ordinal at once"."""


@dataclass(frozen=True)
class TestMode:
    """One run of the verification: inbox size, and whether/how often snapshots are restored.

    `restore_every` is 0 for no snapshots, 1 to restore every snapshot into a new instance, 2 to
    restore every other one (the others are saved and discarded, as in a job that never fails).
    """

    __test__ = False

    inbox_size: int = 1
    restore_every: int = 0

    def __post_init__(self) -> None:
        if self.inbox_size < 1:
            raise ValueError(f"inbox_size must be >= 1, got {self.inbox_size}")
        if self.restore_every < 0:
            raise ValueError(f"restore_every must be >= 0, got {self.restore_every}")

    @property
    def snapshots(self) -> bool:
        """True when the run saves snapshots."""
        return self.restore_every > 0

    def __str__(self) -> str:
        if self.inbox_size == 1:
            inbox = "inbox of one item"
        elif self.inbox_size == ALL_ITEMS:
            inbox = "inbox of all items"
        else:
            inbox = f"inbox of up to {self.inbox_size} items"
        if self.restore_every == 0:
            return f"{inbox}, snapshots off"
        if self.restore_every == 1:
            return f"{inbox}, restoring every snapshot"
        if self.restore_every == 2:
            return f"{inbox}, restoring every other snapshot"
        return f"{inbox}, restoring every {self.restore_every}th snapshot"


ONE_ITEM = TestMode(1, 0)
ALL_AT_ONCE = TestMode(ALL_ITEMS, 0)
ONE_ITEM_RESTORE_EVERY = TestMode(1, 1)
ALL_AT_ONCE_RESTORE_EVERY = TestMode(ALL_ITEMS, 1)
ONE_ITEM_RESTORE_EVERY_OTHER = TestMode(1, 2)
ALL_AT_ONCE_RESTORE_EVERY_OTHER = TestMode(ALL_ITEMS, 2)

DEFAULT_MODES = (
    ONE_ITEM,
    ALL_AT_ONCE,
    ONE_ITEM_RESTORE_EVERY,
    ALL_AT_ONCE_RESTORE_EVERY,
    ONE_ITEM_RESTORE_EVERY_OTHER,
    ALL_AT_ONCE_RESTORE_EVERY_OTHER,
)
"""Every mode the issue lists, snapshot-free ones first so a state bug is reported as one."""
