"""Pipeline sources and sinks (manual §4.2, chapter 5): `Sources`, `Sinks`, `SourceBuilder` and
`SinkBuilder`, each a named wrapper of a processor from the vertex library."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from jetspark.core.context import Context
from jetspark.processors.event_time import EventTimePolicy
from jetspark.processors.journal import read_journal_p, stream_journal_p
from jetspark.processors.sinks import (
    write_buffered_p,
    write_file_p,
    write_file_transactional_p,
    write_list_p,
    write_logger_p,
    write_map_p,
)
from jetspark.processors.source_builder import BuiltSourceP, SourceBuffer, SourceSpec
from jetspark.processors.sources import read_files_p, read_list_p, read_map_p, read_rdd_p
from jetspark.processors.stream_files import stream_files_p
from jetspark.processors.stream_sources import read_stream_p, stream_socket_p, write_socket_p

S = TypeVar("S")


@dataclass(frozen=True)
class Source:
    """A pipeline source: the processor supplier of its vertex, its name, whether it is bounded
    (`p.draw_from` gives a BatchStage) or not (a StreamStage), and whether its items come as
    timestamped events (a `SourceBuilder.timestamped_stream`)."""

    name: str
    supplier: Any
    bounded: bool
    local_parallelism: int = -1
    timestamped: bool = False
    allowed_lag: int = 0
    with_event_time: Callable[[EventTimePolicy], Any] | None = None
    """For a source that keeps event time itself (per partition, as Kafka's): its supplier
    with an EventTimePolicy; `add_timestamps` right after the source goes into it."""


@dataclass(frozen=True)
class BatchSource(Source):
    """A bounded source (Jet 4's `BatchSource`): `draw_from` gives a BatchStage."""

    bounded: bool = True

    def __post_init__(self) -> None:
        if not self.bounded:
            raise ValueError(f"source '{self.name}': a BatchSource is bounded")


@dataclass(frozen=True)
class StreamSource(Source):
    """An unbounded source (Jet 4's `StreamSource`): `draw_from` gives a StreamStage."""

    bounded: bool = False

    def __post_init__(self) -> None:
        if self.bounded:
            raise ValueError(f"source '{self.name}': a StreamSource is unbounded")


@dataclass(frozen=True)
class Sink:
    """A pipeline sink: the processor supplier of its vertex and its name."""

    name: str
    supplier: Any
    local_parallelism: int = -1


class Sources:
    """The sources a pipeline draws from (Jet's `Sources`, with Python names)."""

    @staticmethod
    def list(name: str) -> BatchSource:
        """The items of the engine's list `name` (`engine.get_list(name)`), bounded."""
        return BatchSource(f"listSource({name})", read_list_p(name))

    @staticmethod
    def map(name: str) -> BatchSource:
        """The `(key, value)` entries of the engine's dict `name`, bounded."""
        return BatchSource(f"mapSource({name})", read_map_p(name))

    @staticmethod
    def journal(journal: str | Callable[[int], Any], count: int | None = None) -> BatchSource:
        """A replayable journal read to its end: a list's name, or an item function of the
        offset with `count` items (`read_journal_p`); bounded. `add_timestamps` right after it
        goes into the source: a watermark per journal partition."""

        def with_event_time(policy: EventTimePolicy) -> Any:
            return read_journal_p(journal, count=count, event_time_policy=policy)

        supplier = read_journal_p(journal, count=count)
        name = f"journalSource({_label(journal)})"
        return BatchSource(name, supplier, with_event_time=with_event_time)

    @staticmethod
    def stream_journal(journal: str | Callable[[int], Any]) -> StreamSource:
        """A replayable journal followed for ever (`stream_journal_p`); unbounded.
        `add_timestamps` right after it goes into the source, which keeps a watermark per
        journal partition and marks quiet ones idle."""

        def with_event_time(policy: EventTimePolicy) -> Any:
            return stream_journal_p(journal, event_time_policy=policy)

        supplier = stream_journal_p(journal)
        name = f"streamJournalSource({_label(journal)})"
        return StreamSource(name, supplier, with_event_time=with_event_time)

    @staticmethod
    def files(
        directory: str, glob: str = "*", charset: str = "utf-8", shared_file_system: bool = False
    ) -> BatchSource:
        """The lines of the files in `directory` matching `glob`, bounded. On a file system
        every member sees (`shared_file_system`), each file is read once, by one member."""
        return BatchSource(
            f"filesSource({directory}/{glob})",
            read_files_p(directory, glob, charset, shared_file_system),
        )

    @staticmethod
    def rdd(rdd: Any, name: str = "rddSource") -> BatchSource:
        """The items of a Spark RDD, each member reading its partitions (SparkEngine only)."""
        return BatchSource(name, read_rdd_p(rdd))

    @staticmethod
    def file_watcher(directory: str, glob: str = "*", charset: str = "utf-8") -> StreamSource:
        """The lines appended to the files of `directory` matching `glob`, and of new ones
        (`stream_files_p`); unbounded."""
        return StreamSource(
            f"fileWatcherSource({directory}/{glob})", stream_files_p(directory, glob, charset)
        )

    @staticmethod
    def socket(host: str, port: int, charset: str = "utf-8") -> StreamSource:
        """The lines a TCP server sends (`stream_socket_p`); unbounded, not replayable."""
        return StreamSource(f"socketSource({host}:{port})", stream_socket_p(host, port, charset))

    @staticmethod
    def spark_stream(frame: Any, map_fn: Callable[[Any], Any] | None = None) -> StreamSource:
        """The rows of a Structured Streaming DataFrame (`read_stream_p`, SparkEngine only)."""
        return StreamSource("sparkStreamSource", read_stream_p(frame, map_fn))


class Sinks:
    """The sinks a pipeline drains to (Jet's `Sinks`, with Python names)."""

    @staticmethod
    def list(name: str) -> Sink:
        """Appends the items to the engine's list `name`."""
        return Sink(f"listSink({name})", write_list_p(name))

    @staticmethod
    def map(name: str) -> Sink:
        """Puts `(key, value)` items into the engine's dict `name`."""
        return Sink(f"mapSink({name})", write_map_p(name))

    @staticmethod
    def files(directory: str, to_string: Callable[[Any], str] = str) -> Sink:
        """Writes `to_string(item)` lines into files of `directory`, one per processor."""
        return Sink(f"filesSink({directory})", write_file_p(directory, to_string))

    @staticmethod
    def files_transactional(directory: str, to_string: Callable[[Any], str] = str) -> Sink:
        """Like `files`, published only as snapshots commit: exactly-once output."""
        return Sink(
            f"filesTransactionalSink({directory})",
            write_file_transactional_p(directory, to_string),
        )

    @staticmethod
    def logger(to_string: Callable[[Any], str] = str) -> Sink:
        """Logs `to_string(item)` at INFO level."""
        return Sink("loggerSink", write_logger_p(to_string), local_parallelism=1)

    @staticmethod
    def socket(host: str, port: int, to_string: Callable[[Any], str] = str) -> Sink:
        """Sends `to_string(item)` lines to a TCP server."""
        return Sink(f"socketSink({host}:{port})", write_socket_p(host, port, to_string))

    @staticmethod
    def builder(create_fn: Callable[[Context], S], name: str = "customSink") -> SinkBuilder[S]:
        """Starts a custom sink (manual §5.11.2): `create_fn(context)` makes its state."""
        return SinkBuilder(name, create_fn)


def _label(journal: Any) -> str:
    return journal if isinstance(journal, str) else getattr(journal, "__name__", "fn")


def _no_flush(state: Any) -> None:
    """The flush of a sink that buffers nothing."""


@dataclass(frozen=True)
class SinkBuilder(Generic[S]):
    """Builds a custom sink from a state object and functions (`Sinks.builder(create_fn)`):
    `on_receive_fn(state, item)` per item, `flush_fn(state)` after each batch,
    `destroy_fn(state)` at the end. Runs non-cooperatively: the functions may block."""

    name: str
    create_fn: Callable[[Context], S]
    receive_fn: Callable[[S, Any], None] | None = None
    flush: Callable[[S], None] = _no_flush
    destroy: Callable[[S], None] | None = None
    local_parallelism: int = 1

    def on_receive_fn(self, fn: Callable[[S, Any], None]) -> SinkBuilder[S]:
        """Sets what is done with each item."""
        return replace(self, receive_fn=_checked(fn, "on_receive_fn"))

    def flush_fn(self, fn: Callable[[S], None]) -> SinkBuilder[S]:
        """Sets what is done after each batch of items (write out what was buffered)."""
        return replace(self, flush=_checked(fn, "flush_fn"))

    def destroy_fn(self, fn: Callable[[S], None]) -> SinkBuilder[S]:
        """Sets what releases the state at the end of the job."""
        return replace(self, destroy=_checked(fn, "destroy_fn"))

    def preferred_local_parallelism(self, n: int) -> SinkBuilder[S]:
        """How many sink processors each member runs (1 by default, as in Jet)."""
        return replace(self, local_parallelism=n)

    def build(self) -> Sink:
        """The sink; `on_receive_fn` must have been given."""
        if self.receive_fn is None:
            raise ValueError(f"sink '{self.name}': call on_receive_fn(fn) before build()")
        supplier = write_buffered_p(self.create_fn, self.receive_fn, self.flush, self.destroy)
        return Sink(self.name, supplier, self.local_parallelism)


@dataclass(frozen=True)
class SourceBuilder(Generic[S]):
    """Builds a custom source (manual §5.11.1): `create_fn(context)` makes the state,
    `fill_buffer_fn(state, buffer)` adds items. Start with `SourceBuilder.batch`, `.stream` or
    `.timestamped_stream`; snapshot functions make it exactly-once."""

    spec: SourceSpec
    local_parallelism: int = 1
    allowed_lag: int = 0

    @staticmethod
    def batch(name: str, create_fn: Callable[[Context], S]) -> SourceBuilder[S]:
        """A bounded source: `buffer.close()` in `fill_buffer_fn` ends it."""
        return SourceBuilder(SourceSpec(name, create_fn, _unset_fill))

    @staticmethod
    def stream(name: str, create_fn: Callable[[Context], S]) -> SourceBuilder[S]:
        """An unbounded source."""
        return SourceBuilder(SourceSpec(name, create_fn, _unset_fill, bounded=False))

    @staticmethod
    def timestamped_stream(name: str, create_fn: Callable[[Context], S]) -> SourceBuilder[S]:
        """An unbounded source whose items come with event timestamps: `buffer.add(item,
        timestamp)`; its stage is ready for `window(...)`."""
        spec = SourceSpec(name, create_fn, _unset_fill, bounded=False, timestamped=True)
        return SourceBuilder(spec)

    def fill_buffer_fn(self, fn: Callable[[S, SourceBuffer], None]) -> SourceBuilder[S]:
        """Sets the function that adds the next items to the buffer (it may add none)."""
        return replace(self, spec=replace(self.spec, fill_buffer_fn=_checked(fn, "fill_buffer_fn")))

    def create_snapshot_fn(self, fn: Callable[[S], Any]) -> SourceBuilder[S]:
        """Sets what a snapshot saves of the state (an offset, say): a picklable value."""
        checked = _checked(fn, "create_snapshot_fn")
        return replace(self, spec=replace(self.spec, create_snapshot_fn=checked))

    def restore_snapshot_fn(self, fn: Callable[[S, list[Any]], None]) -> SourceBuilder[S]:
        """Sets how the state resumes from saved values (a list: all the values this processor
        takes over, several when restored at a lower parallelism)."""
        checked = _checked(fn, "restore_snapshot_fn")
        return replace(self, spec=replace(self.spec, restore_snapshot_fn=checked))

    def destroy_fn(self, fn: Callable[[S], None]) -> SourceBuilder[S]:
        """Sets what releases the state at the end of the job."""
        return replace(self, spec=replace(self.spec, destroy_fn=_checked(fn, "destroy_fn")))

    def distributed(self, preferred_local_parallelism: int) -> SourceBuilder[S]:
        """Runs `preferred_local_parallelism` source processors on every member, each with its
        own state (`context.global_processor_index` of `context.total_parallelism` says which
        slice it reads); by default one processor in the whole job reads."""
        if not isinstance(preferred_local_parallelism, int) or preferred_local_parallelism < 1:
            raise ValueError(
                f"source '{self.spec.name}': distributed() takes an int >= 1, "
                f"got {preferred_local_parallelism!r}"
            )
        spec = replace(self.spec, distributed=True)
        return replace(self, spec=spec, local_parallelism=preferred_local_parallelism)

    def allowed_lateness(self, lag: int) -> SourceBuilder[S]:
        """How far a timestamped item may lag behind the highest timestamp seen (default 0)."""
        if not self.spec.timestamped:
            raise ValueError(
                f"source '{self.spec.name}': allowed_lateness applies to timestamped_stream"
            )
        return replace(self, allowed_lag=lag)

    def build(self) -> Source:
        """The source; `fill_buffer_fn` must have been given."""
        spec = self.spec
        if spec.fill_buffer_fn is _unset_fill:
            raise ValueError(f"source '{spec.name}': call fill_buffer_fn(fn) before build()")
        if (spec.create_snapshot_fn is None) != (spec.restore_snapshot_fn is None):
            raise ValueError(
                f"source '{spec.name}': give both create_snapshot_fn and restore_snapshot_fn, "
                "or neither"
            )
        supplier = _BuiltSourceSupplier(spec)
        if not spec.bounded:
            supplier.unbounded = True  # AUTO runs it as a streaming job
        if spec.create_snapshot_fn is None:
            supplier.replayable = False
            supplier.kind = "a SourceBuilder source without snapshot functions"
        kind = BatchSource if spec.bounded else StreamSource
        return kind(
            spec.name,
            supplier,
            local_parallelism=self.local_parallelism,
            timestamped=spec.timestamped,
            allowed_lag=self.allowed_lag,
        )


class _BuiltSourceSupplier:
    """The zero-argument processor function of a built source (picklable, markable)."""

    unbounded: bool
    replayable: bool
    kind: str
    """The markers `build()` sets when they apply (unset: read with their defaults)."""

    def __init__(self, spec: SourceSpec) -> None:
        self.spec = spec

    def __call__(self) -> BuiltSourceP:
        return BuiltSourceP(self.spec)


def _unset_fill(state: Any, buffer: SourceBuffer) -> None:
    raise ValueError("fill_buffer_fn was not set")


def _checked(fn: Any, what: str) -> Any:
    if not callable(fn):
        raise TypeError(f"{what} takes a function, got {type(fn).__name__}")
    return fn
