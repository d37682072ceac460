"""Ending a job: run every close step, even after failures, and report what failed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from jetspark.core.errors import JobFailedError

CloseStep = tuple[str, "int | None", str, Callable[[], None]]
"""(vertex name, processor index or None, callback name, the call)."""


def close_all(steps: Iterable[CloseStep], error: BaseException | None) -> None:
    """Runs every step; a failure fails a job that had none (raised), else it is only logged."""
    first: JobFailedError | None = None
    for vertex, index, callback, call in steps:
        try:
            call()
        except Exception as cause:
            failure = JobFailedError.caused_by(
                cause, vertex_name=vertex, processor_index=index, callback=callback
            )
            failure.__cause__ = cause
            if error is None and first is None:
                first = failure
            else:
                logging.getLogger(f"jetspark.{vertex}").error("%s", failure, exc_info=cause)
    if first is not None:
        raise first
