"""The exceptions jetspark raises, in one place so every subpackage can name them."""

from __future__ import annotations


class DagValidationError(ValueError):
    """The DAG is malformed; the message names the vertex or edge at fault."""


class ProcessorContractError(RuntimeError):
    """A processor broke the Processor API contract (outbox misuse, watermark order, ...)."""


class UnsupportedOperationError(RuntimeError):
    """A callback was invoked that the processor does not implement."""
