"""The exceptions jetspark raises, in one place so every subpackage can name them."""

from __future__ import annotations


class DagValidationError(ValueError):
    """The DAG is malformed; the message names the vertex or edge at fault."""


class ProcessorContractError(RuntimeError):
    """A processor broke the Processor API contract (outbox misuse, watermark order, ...)."""


class CallbackResultError(ProcessorContractError):
    """A callback that must return True or False returned something else; `callback` names it.

    None, the forgotten `return True`, is refused rather than taken as "call me again", which
    would call the callback forever with the same input.
    """

    def __init__(self, message: str, callback: str) -> None:
        super().__init__(message)
        self.callback = callback

    @classmethod
    def of(cls, callback: str, result: object) -> CallbackResultError:
        """The error for `callback()` having returned `result`, which is not a bool."""
        hint = " (a forgotten `return True`?)" if result is None else ""
        return cls(f"{callback}() must return True or False, got {result!r:.80}{hint}", callback)

    def __reduce__(self) -> tuple[object, ...]:
        """Pickles with its callback, so the error survives a trip between processes."""
        return (type(self), (str(self), self.callback))


class UnsupportedOperationError(RuntimeError):
    """A callback was invoked that the processor does not implement."""


class JobFailedError(RuntimeError):
    """A job failed; names the vertex, the global processor index and the callback at fault.

    Raised `from` the original exception, so its traceback stays in `__cause__`; `cause_type` is
    that exception's class name, known on the driver too when the exception was raised in a
    Spark task. Attributes that do not apply (a meta-supplier has no processor index) are None.
    """

    def __init__(
        self,
        message: str,
        *,
        vertex_name: str | None = None,
        processor_index: int | None = None,
        callback: str | None = None,
        cause_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.vertex_name = vertex_name
        self.processor_index = processor_index
        self.callback = callback
        self.cause_type = cause_type

    @classmethod
    def caused_by(
        cls,
        cause: BaseException,
        *,
        vertex_name: str | None,
        processor_index: int | None = None,
        callback: str,
    ) -> JobFailedError:
        """The error reporting `cause`, raised in `callback` of the given vertex and processor."""
        where = f"vertex '{vertex_name}'" if vertex_name is not None else "the job"
        if processor_index is not None:
            where += f", processor #{processor_index}"
        return cls(
            f"{where} failed in {callback}: {type(cause).__name__}: {cause}",
            vertex_name=vertex_name,
            processor_index=processor_index,
            callback=callback,
            cause_type=type(cause).__name__,
        )

    def __reduce__(self) -> tuple[object, ...]:
        """Pickles with its attributes, so the error survives a trip between processes."""
        return (
            _rebuild_job_failed_error,
            (
                type(self),
                str(self),
                self.vertex_name,
                self.processor_index,
                self.callback,
                self.cause_type,
            ),
        )


def _rebuild_job_failed_error(
    cls: type[JobFailedError],
    message: str,
    vertex_name: str | None,
    processor_index: int | None,
    callback: str | None,
    cause_type: str | None,
) -> JobFailedError:
    return cls(
        message,
        vertex_name=vertex_name,
        processor_index=processor_index,
        callback=callback,
        cause_type=cause_type,
    )


class SnapshotError(RuntimeError):
    """A snapshot cannot be stored or restored (another DAG's snapshot, unreadable data...)."""


class AssertionCompletedError(Exception):
    """Raised by a processor to end its job successfully: the job COMPLETES, `join()` returns
    (Jet's AssertionCompletedException, which `Assertions.assert_collected_eventually` raises
    once its assertion holds, to end a stream job)."""


class JobCancelledError(RuntimeError):
    """The job was cancelled with `Job.cancel()`; `join()` raises it."""
