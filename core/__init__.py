"""jetspark.core: the DAG model, the Processor API and the engines that run it.

Names are loaded on first use (PEP 562), so `import jetspark.core` is cheap, never imports
pyspark, and `jetspark.edges` can use `jetspark.core.errors` without an import cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "AbstractProcessor": "abstract_processor",
    "FlatMapper": "abstract_processor",
    "ExecutionMode": "config",
    "JobConfig": "config",
    "ProcessingGuarantee": "config",
    "Context": "context",
    "ProcessorMetaSupplierContext": "context",
    "ProcessorSupplierContext": "context",
    "DAG": "dag",
    "Vertex": "dag",
    "DagValidationError": "errors",
    "JobCancelledError": "errors",
    "JobFailedError": "errors",
    "ProcessorContractError": "errors",
    "SnapshotError": "errors",
    "UnsupportedOperationError": "errors",
    "ArrayDequeInbox": "inbox",
    "Inbox": "inbox",
    "Job": "job",
    "JobStatus": "job",
    "LocalEngine": "local_engine",
    "Outbox": "outbox",
    "OutboxImpl": "outbox",
    "Processor": "processor",
    "DirectorySnapshotStore": "snapshot_store",
    "InMemorySnapshotStore": "snapshot_store",
    "ProcessorSnapshot": "snapshot_store",
    "Snapshot": "snapshot_store",
    "SnapshotStore": "snapshot_store",
    "ProcessorMetaSupplier": "suppliers",
    "ProcessorSupplier": "suppliers",
    "Stores": "stores",
    "Traverser": "traverser",
    "IDLE_MESSAGE": "watermark",
    "Watermark": "watermark",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'jetspark.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"jetspark.core.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from jetspark.core.abstract_processor import AbstractProcessor, FlatMapper
    from jetspark.core.config import ExecutionMode, JobConfig, ProcessingGuarantee
    from jetspark.core.context import (
        Context,
        ProcessorMetaSupplierContext,
        ProcessorSupplierContext,
    )
    from jetspark.core.dag import DAG, Vertex
    from jetspark.core.errors import (
        DagValidationError,
        JobCancelledError,
        JobFailedError,
        ProcessorContractError,
        SnapshotError,
        UnsupportedOperationError,
    )
    from jetspark.core.inbox import ArrayDequeInbox, Inbox
    from jetspark.core.job import Job, JobStatus
    from jetspark.core.local_engine import LocalEngine
    from jetspark.core.outbox import Outbox, OutboxImpl
    from jetspark.core.processor import Processor
    from jetspark.core.snapshot_store import (
        DirectorySnapshotStore,
        InMemorySnapshotStore,
        ProcessorSnapshot,
        Snapshot,
        SnapshotStore,
    )
    from jetspark.core.stores import Stores
    from jetspark.core.suppliers import ProcessorMetaSupplier, ProcessorSupplier
    from jetspark.core.traverser import Traverser
    from jetspark.core.watermark import IDLE_MESSAGE, Watermark
