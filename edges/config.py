"""EdgeConfig: the fine-tuning knobs of an edge (manual §8.1.7)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_QUEUE_SIZE = 1024


@dataclass(frozen=True)
class EdgeConfig:
    """`queue_size` bounds each queue between an upstream and a downstream processor."""

    queue_size: int = DEFAULT_QUEUE_SIZE

    def __post_init__(self) -> None:
        if not isinstance(self.queue_size, int) or self.queue_size < 1:
            raise ValueError(f"EdgeConfig.queue_size must be an int >= 1, got {self.queue_size!r}")
