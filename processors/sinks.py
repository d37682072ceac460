"""Sinks: the engine's named lists and maps, files, the log, and buffered custom sinks.

The list, map, logger and buffered sinks keep no state between `process()` calls, so they have
nothing to snapshot. After a restart from a snapshot the items the job emitted after it reach
them again, under exactly-once as under at-least-once (manual §3.5.1: the sink must be
idempotent or transactional): the list gets duplicates; the map, an idempotent sink, is
overwritten with the same values. `write_file_transactional_p` is the transactional sink.
"""

from __future__ import annotations

import codecs
import fnmatch
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from typing import IO, Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.config import ProcessingGuarantee
from jetspark.core.context import Context
from jetspark.core.files import create_exclusive, fsync_directory
from jetspark.core.inbox import Inbox
from jetspark.core.outbox import Outbox
from jetspark.core.suppliers import (
    ProcessorFn,
    ProcessorMetaSupplier,
    ProcessorSupplier,
    writes_directory,
)
from jetspark.core.watermark import Watermark
from jetspark.processors.functions import drain, engine_stores, entry_key, entry_value
from jetspark.processors.snapshots import ProcessorState

_FILE = ProcessorState("file_sink")
_TRANSACTIONS = ProcessorState("transactional_file_sink")


class WriteListP(AbstractProcessor):
    """Appends every item to the engine's named list."""

    def __init__(self, name: str) -> None:
        self._name = name

    def process(self, ordinal: int, inbox: Inbox) -> None:
        engine_stores(self.context).get_list(self._name).extend(drain(inbox))


class WriteMapP(AbstractProcessor):
    """Puts every `(key, value)` item (or window result, by its key) into the named map.

    Idempotent: an item written again after a restart puts the same value under the same key,
    so a job whose results are keyed (one value per key, as aggregations emit) ends with
    exactly the map of a run without failure.
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def process(self, ordinal: int, inbox: Inbox) -> None:
        target = engine_stores(self.context).get_map(self._name)
        for item in drain(inbox):
            if isinstance(item, (tuple, list)) and len(item) != 2 and not hasattr(item, "key"):
                raise TypeError(
                    f"the map sink '{self._name}' puts (key, value) pairs; got a "
                    f"{type(item).__name__} of {len(item)}: {item!r:.200}"
                )
            target[entry_key(item)] = entry_value(item)


def write_list_p(name: str) -> ProcessorFn:
    """Appends the items to the engine's named list."""
    return lambda: WriteListP(name)


def write_map_p(name: str) -> ProcessorFn:
    """Puts the `(key, value)` items into the engine's named map."""
    return lambda: WriteMapP(name)


class WriteFileP(AbstractProcessor):
    """Writes `to_string(item)` lines to its own file, `<directory>/<global processor index>`.

    The lines go to a hidden temporary file in the same directory, renamed to the final name
    when the processor completes, so readers never see a half-written file and a failed or
    retried task leaves none (with `append`, the final file's old content is copied first).
    Non-cooperative (blocking I/O).

    Snapshot: the temporary file is flushed to disk and its name and length saved (under a
    broadcast key tagged with the processor index); the same processor restored at the same
    parallelism truncates that file to the saved length and continues it. A temporary file named
    in a snapshot is kept when the job fails, for the restart to continue. At-least-once: lines
    written after the snapshot are cut off on restore, and replayed items written again.
    Restored at another parallelism, no processor continues an old temporary file, so the lines
    written before the snapshot are lost: `write_file_transactional_p` has no such limit.
    """

    def __init__(
        self, directory: str, to_string: Callable[[Any], str], charset: str, append: bool
    ) -> None:
        self._directory = directory
        self._to_string = to_string
        self._append = append
        self._final_path = ""
        self._temp_path = ""
        self._file: IO[bytes] | None = None
        self._encoder = codecs.getincrementalencoder(charset)()
        self._snapshotted = False
        self._completed = False

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        os.makedirs(self._directory, exist_ok=True)
        self._final_path = os.path.join(self._directory, str(context.global_processor_index))

    def _open(self) -> IO[bytes]:
        if self._file is None:
            name = os.path.basename(self._final_path)
            self._temp_path, self._file = create_exclusive(self._directory, f".{name}")
            if self._append and os.path.exists(self._final_path):
                with open(self._final_path, "rb") as existing:
                    shutil.copyfileobj(existing, self._file)
            self._continue_encoding(self._file)
        return self._file

    def _continue_encoding(self, file: IO[bytes]) -> None:
        """After existing content, an encoder with a byte-order mark must not write it again."""
        if file.tell() > 0:
            self._encoder.setstate(0)

    def process(self, ordinal: int, inbox: Inbox) -> None:
        file = self._open()
        to_string = self._to_string
        file.write(self._encoder.encode("".join(to_string(item) + "\n" for item in drain(inbox))))

    def complete(self) -> bool:
        self._open().close()
        self._file = None
        os.replace(self._temp_path, self._final_path)
        self._completed = True
        return True

    def save_to_snapshot(self) -> bool:
        if self._completed:
            return True
        file = self._open()
        file.flush()
        os.fsync(file.fileno())
        self._snapshotted = True
        state = (self._temp_path, file.tell())
        return self.try_emit_to_snapshot(*_FILE.entry(self.context, state))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        saved = _FILE.saved(key, value)
        if not ProcessorState.is_own(self.context, saved):
            return
        temp_path, length = saved.value
        if not os.path.exists(temp_path):
            raise FileNotFoundError(
                f"vertex '{self.context.vertex_name}': the temporary file {temp_path!r} named "
                "in the snapshot is gone, so the lines written before the snapshot are lost"
            )
        self._temp_path = temp_path
        self._file = open(temp_path, "r+b")  # noqa: SIM115 (closed in complete/close)
        self._file.truncate(length)
        self._file.seek(length)
        self._continue_encoding(self._file)
        self._snapshotted = True

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            if not self._snapshotted and os.path.exists(self._temp_path):
                os.remove(self._temp_path)


def write_file_p(
    directory: str,
    to_string: Callable[[Any], str] = str,
    charset: str = "utf-8",
    append: bool = False,
) -> ProcessorFn:
    """Writes `to_string(item)` lines to one file per processor in `directory`, atomically."""
    return lambda: WriteFileP(directory, to_string, charset, append)


class WriteFileTransactionalP(AbstractProcessor):
    """Writes `to_string(item)` lines in epochs, each published only when a snapshot holding it
    is committed, so `directory` holds exactly the output of the committed part of the job.

    Processor i writes epoch e to the hidden file `.part-<i:05d>-<e:08d>.<random>.tmp`, created
    exclusively (a file or link planted there is never written through). Each
    `save_to_snapshot()` seals the current epoch (flush, fsync, close) and saves the next epoch
    number and the sealed files not yet published (under a broadcast key tagged with the
    processor index); `snapshot_committed()` renames them to `part-<i:05d>-<e:08d>`. Reading the
    `part-*` files in name order gives each processor's lines in order. The last epoch is
    sealed in `complete()` and published with the final state, when the job completes (without
    a processing guarantee, at once). Non-cooperative (blocking I/O).

    Restore: the files the snapshot names are published (the snapshot is complete, so they
    belong to the output, even if the process died before renaming them), the temporary files
    its processor wrote after the snapshot are deleted, and every processor continues above the
    highest saved epoch (so no file name is reused, at any parallelism); at another
    parallelism, processor j takes over the state of the old processors i with i mod the new
    total parallelism == j. Exactly-once: the lines of the items processed after the snapshot
    are never published, and are written again after the restart. At-least-once: a sink with
    several inputs may have written items that followed the barrier on one input into the
    epoch sealed by the snapshot; those are written again after a restart (duplicates).

    On SparkEngine each save hands the files it sealed to the stores' `note_sealed`: the driver
    commits no snapshot whose sealed files it cannot see (a directory that is not shared storage
    fails the job naming the vertex and the host). In a micro-batch only the driver knows when
    a batch is committed, and two attempts of one task may run at once: the driver then renames
    the files right after its commit and before anything else runs, and the driver, not a
    restore, deletes the stale temporary files.
    """

    def __init__(self, directory: str, to_string: Callable[[Any], str], charset: str) -> None:
        self._directory = directory
        self._to_string = to_string
        self._encoder = codecs.getincrementalencoder(charset)()
        self._epoch = 0
        self._file: IO[bytes] | None = None
        self._temp_path = ""
        self._sealed: list[tuple[str, str]] = []
        """(temporary, final) names of the sealed epochs awaiting their commit."""
        self._taken_over: set[int] = set()
        """Indexes of the old processors whose state a restore gave to this one."""

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        os.makedirs(self._directory, exist_ok=True)

    def _name(self, epoch: int) -> str:
        return f"part-{self.context.global_processor_index:05d}-{epoch:08d}"

    def process(self, ordinal: int, inbox: Inbox) -> None:
        if self._file is None:
            self._temp_path, self._file = create_exclusive(
                self._directory, f".{self._name(self._epoch)}"
            )
        to_string = self._to_string
        lines = "".join(to_string(item) + "\n" for item in drain(inbox))
        self._file.write(self._encoder.encode(lines))

    def _seal(self) -> None:
        """Closes the current epoch's file durably and queues it for the next commit."""
        file = self._file
        if file is None:
            return
        file.flush()
        os.fsync(file.fileno())
        file.close()
        self._file = None
        final = os.path.join(self._directory, self._name(self._epoch))
        self._sealed.append((self._temp_path, final))
        self._epoch += 1
        self._encoder.reset()

    def complete(self) -> bool:
        self._seal()
        if self.context.processing_guarantee is ProcessingGuarantee.NONE:
            self._publish(self._sealed)
        return True

    def save_to_snapshot(self) -> bool:
        self._seal()
        state = (self._epoch, tuple(self._sealed))
        if not self.try_emit_to_snapshot(*_TRANSACTIONS.entry(self.context, state)):
            return False
        context = self.context
        note_sealed = getattr(context.stores, "note_sealed", None)  # a Spark task's stores
        if note_sealed is not None:
            index, sealed = context.global_processor_index, tuple(self._sealed)
            note_sealed(context.vertex_name, index, self._directory, sealed, _TEMPORARIES)
            if _driver_publishes(context):
                self._sealed.clear()
        return True

    def snapshot_committed(self) -> None:
        self._publish(self._sealed)

    def _publish(self, files: list[tuple[str, str]]) -> None:
        """Renames sealed files to their final names; a file already renamed (by another
        attempt of the job too, even at the same moment) is left alone."""
        for temp, final in files:
            try:
                os.replace(temp, final)
            except FileNotFoundError:
                if os.path.exists(final):
                    continue
                raise FileNotFoundError(
                    f"vertex '{self.context.vertex_name}': {temp!r}, part of a committed "
                    "snapshot, is gone, so its lines are lost"
                ) from None
        if files:
            fsync_directory(self._directory)
        files.clear()

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        saved = _TRANSACTIONS.saved(key, value)
        epoch, sealed = saved.value
        # Above every saved epoch, not only the taken-over ones: after a scale-down and up
        # again, a processor index the snapshot lacks has published files of an earlier run.
        self._epoch = max(self._epoch, epoch)
        if not ProcessorState.owns(self.context, saved):
            return
        self._publish([(temp, final) for temp, final in sealed])
        self._taken_over.add(saved.processor_index)

    def finish_snapshot_restore(self) -> bool:
        if _driver_publishes(self.context):
            return True  # the driver deletes stale files once nothing else can write them
        stale = [f".part-{index:05d}-*.tmp" for index in self._taken_over]
        for name in os.listdir(self._directory):
            if any(fnmatch.fnmatch(name, pattern) for pattern in stale):
                os.remove(os.path.join(self._directory, name))
        return True

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            if self.context.processing_guarantee is ProcessingGuarantee.NONE:
                os.remove(self._temp_path)


_TEMPORARIES = ".part-*.tmp"
"""Every temporary file of a transactional file sink."""


def _driver_publishes(context: Context) -> bool:
    """True in a micro-batch task on SparkEngine, whose driver publishes what the sink sealed
    once the batch is committed."""
    return getattr(context.stores, "driver_publishes", False)


def write_file_transactional_p(
    directory: str, to_string: Callable[[Any], str] = str, charset: str = "utf-8"
) -> ProcessorFn:
    """Writes `to_string(item)` lines to `part-*` files in `directory`, publishing each
    snapshot's files when the snapshot is committed (an exactly-once file sink)."""
    return writes_directory(
        lambda: WriteFileTransactionalP(directory, to_string, charset), directory
    )


class WriteLoggerP(AbstractProcessor):
    """Logs `to_string(item)` at INFO on the vertex's logger, and each watermark at DEBUG."""

    def __init__(self, to_string: Callable[[Any], str]) -> None:
        self._to_string = to_string

    def process(self, ordinal: int, inbox: Inbox) -> None:
        logger, to_string = self.logger, self._to_string
        enabled = logger.isEnabledFor(logging.INFO)
        for item in drain(inbox):
            if enabled:
                logger.info("%s", to_string(item))

    def try_process_watermark(self, watermark: Watermark) -> bool:
        self.logger.debug("%s", watermark)
        return True


def write_logger_p(to_string: Callable[[Any], str] = str) -> ProcessorFn:
    """A sink that logs each item at INFO level (for development and diagnostics)."""
    return lambda: WriteLoggerP(to_string)


class WriteBufferedP(AbstractProcessor):
    """Adds the items of each inbox to a buffer, then flushes it; destroys the buffer on close.

    The buffer is flushed at the end of every `process()` call, so nothing is pending between
    calls and there is no state to snapshot. Non-cooperative (flushing usually blocks).
    """

    def __init__(
        self,
        create_fn: Callable[[Context], Any],
        add_fn: Callable[[Any, Any], None],
        flush_fn: Callable[[Any], None],
        destroy_fn: Callable[[Any], None] | None,
    ) -> None:
        self._create_fn = create_fn
        self._add_fn = add_fn
        self._flush_fn = flush_fn
        self._destroy_fn = destroy_fn
        self._buffer: Any = None
        self._created = False

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._buffer = self._create_fn(context)
        self._created = True

    def process(self, ordinal: int, inbox: Inbox) -> None:
        add, buffer = self._add_fn, self._buffer
        for item in drain(inbox):
            add(buffer, item)
        self._flush_fn(buffer)

    def close(self) -> None:
        if self._created and self._destroy_fn is not None:
            self._destroy_fn(self._buffer)
        self._created = False


def write_buffered_p(
    create_fn: Callable[[Context], Any],
    add_fn: Callable[[Any, Any], None],
    flush_fn: Callable[[Any], None],
    destroy_fn: Callable[[Any], None] | None = None,
) -> ProcessorFn:
    """A custom sink from primitives: `create_fn(processor_context)` makes a buffer,
    `add_fn(buffer, item)` adds an item, `flush_fn(buffer)` writes the buffered items out after
    each batch, `destroy_fn(buffer)` releases it at the end of the job.
    """
    return lambda: WriteBufferedP(create_fn, add_fn, flush_fn, destroy_fn)


class WriteRddP(AbstractProcessor):
    """Keeps every item for `job.rdd(name)` (on LocalEngine: the named list)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def process(self, ordinal: int, inbox: Inbox) -> None:
        engine_stores(self.context).get_rdd_sink(self._name).extend(drain(inbox))


class WriteRddMetaSupplier(ProcessorMetaSupplier):
    """The supplier of `write_rdd_p`; `rdd_sink_name` tells SparkEngine to keep its output."""

    def __init__(self, name: str) -> None:
        self.rdd_sink_name = name

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], ProcessorSupplier]:
        """The same supplier on every member."""
        supplier = ProcessorSupplier.of(lambda: WriteRddP(self.rdd_sink_name))
        return lambda member_index: supplier


def write_rdd_p(name: str) -> WriteRddMetaSupplier:
    """A sink whose items `SparkJob.rdd(name)` returns as an RDD, without collecting them."""
    return WriteRddMetaSupplier(name)
