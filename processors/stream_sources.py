"""Streams from outside the job: Spark's Structured Streaming sources through `read_stream_p`.

A `read_stream_p(streaming_df)` vertex makes its job run as Spark's streaming engine delivers
micro-batches (SparkEngine with a processing guarantee, `core/spark/spark_streams.py`): Spark
tracks the source's offsets in its checkpoint directory, kept inside the job's snapshot store,
and jetspark the processors' state in snapshots, one per Spark batch id. The vertex's processors
emit the rows of the current Spark batch that their task received (`pyspark.sql.Row`, or
`map_fn(row)`), then wait for the next batch: the source never completes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.outbox import Outbox
from jetspark.core.suppliers import ProcessorMetaSupplier, ProcessorSupplier

_NOTHING = object()


class StreamBatchP(AbstractProcessor):
    """Emits the rows of the Spark batch its task was handed (local processor 0 of a member),
    mapped by `map_fn`; `complete()` never returns True."""

    def __init__(self, map_fn: Callable[[Any], Any] | None) -> None:
        super().__init__()
        self._map_fn = map_fn
        self._rows: Iterator[Any] = iter(())
        self._pending: Any = _NOTHING

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        rows = getattr(context.stores, "rdd_input", None)
        if rows is None:
            raise RuntimeError(
                f"vertex '{context.vertex_name}': read_stream_p reads a Spark Structured "
                "Streaming DataFrame, so it runs on SparkEngine only (with a processing "
                "guarantee); on LocalEngine use stream_journal_p or stream_files_p"
            )
        if context.local_processor_index == 0:
            self._rows = iter(rows)

    def complete(self) -> bool:
        map_fn = self._map_fn
        if self._pending is not _NOTHING:
            if not self.try_emit(self._pending):
                return False
            self._pending = _NOTHING
        for row in self._rows:
            item = map_fn(row) if map_fn is not None else row
            if item is None:
                continue
            if not self.try_emit(item):
                self._pending = item
                return False
        return False  # the stream goes on in Spark's next batch


class ReadStreamMetaSupplier(ProcessorMetaSupplier):
    """The supplier of a `read_stream_p` vertex; the DataFrame stays on the driver (it is
    dropped when the supplier is pickled into tasks)."""

    def __init__(self, streaming_frame: Any, map_fn: Callable[[Any], Any] | None) -> None:
        self.streaming_frame = streaming_frame
        self.map_fn = map_fn

    def preferred_local_parallelism(self) -> int:
        """One reader per member: the task's share of the batch cannot be split further."""
        return 1

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], ProcessorSupplier]:
        """The same supplier on every member."""
        map_fn = self.map_fn
        supplier = ProcessorSupplier.of(lambda: StreamBatchP(map_fn))
        return lambda member_index: supplier

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "streaming_frame": None}


def read_stream_p(
    streaming_df: Any, map_fn: Callable[[Any], Any] | None = None
) -> ReadStreamMetaSupplier:
    """A source over a Structured Streaming DataFrame (`spark.readStream...load()`): its rows,
    or `map_fn(row)` (None results are skipped). SparkEngine only, with a processing guarantee.
    """
    if not getattr(streaming_df, "isStreaming", False):
        kind = type(streaming_df).__name__
        raise TypeError(
            "read_stream_p takes a streaming DataFrame (spark.readStream...load()), got "
            + ("a batch DataFrame: use read_rdd_p(df.rdd) for it" if kind == "DataFrame" else kind)
        )
    if map_fn is not None and not callable(map_fn):
        raise TypeError(f"map_fn must be callable, got {type(map_fn).__name__}")
    return ReadStreamMetaSupplier(streaming_df, map_fn)
