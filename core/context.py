"""The contexts handed to meta-suppliers, suppliers and processors (manual §8.7.1)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from jetspark.core.config import ProcessingGuarantee


def vertex_logger(vertex_name: str) -> logging.Logger:
    """The logger of a vertex: `jetspark.<vertex name>`."""
    return logging.getLogger(f"jetspark.{vertex_name}")


@dataclass(kw_only=True)
class ProcessorMetaSupplierContext:
    """What a ProcessorMetaSupplier learns in `init()`: the vertex's place in the whole job."""

    vertex_name: str
    total_parallelism: int
    local_parallelism: int
    member_count: int = 1
    processing_guarantee: ProcessingGuarantee = ProcessingGuarantee.NONE
    partition_count: int = 271
    stores: Any = None
    """The engine's named lists and maps (`get_list(name)`, `get_map(name)`), for sources/sinks."""
    logger: logging.Logger = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.logger is None:
            self.logger = vertex_logger(self.vertex_name)


@dataclass(kw_only=True)
class ProcessorSupplierContext(ProcessorMetaSupplierContext):
    """What a ProcessorSupplier learns in `init()`: additionally, which member it runs on."""

    member_index: int = 0


@dataclass(kw_only=True)
class Context(ProcessorSupplierContext):
    """What a Processor learns in `init()`: additionally, its own index locally and globally."""

    local_processor_index: int = 0
    global_processor_index: int = 0
