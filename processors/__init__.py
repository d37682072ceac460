"""jetspark.processors: the built-in vertex library (Jet's Processors, SourceProcessors,
SinkProcessors and DiagnosticProcessors, manual §7.3-7.4, §8.2, §8.4-8.8).

Every factory returns something `dag.new_vertex(name, ...)` accepts. Aggregate operations live
in `jetspark.processors.aggregate`, window and watermark policies in
`jetspark.processors.windowing`, sources, sinks and peeking wrappers in `.sources`, `.sinks`
and `.diagnostics`, the replayable journal sources in `.journal`, model inference in
`.inference` (all re-exported here).
"""

from __future__ import annotations

from jetspark.processors.aggregation import (
    accumulate_by_key_p,
    accumulate_p,
    aggregate_by_key_p,
    aggregate_p,
    combine_by_key_p,
    combine_p,
)
from jetspark.processors.diagnostics import peek_input_p, peek_output_p, peek_snapshot_p
from jetspark.processors.functions import entry, entry_key, entry_value, whole_item
from jetspark.processors.inference import map_batched_using_context_p, map_using_model_p
from jetspark.processors.insert_watermarks import insert_watermarks_p
from jetspark.processors.journal import read_journal_p, stream_journal_p
from jetspark.processors.service import (
    ServiceFactories,
    ServiceFactory,
    filter_using_service_p,
    flat_map_using_service_async_p,
    flat_map_using_service_p,
    map_using_service_async_batched_p,
    map_using_service_async_p,
    map_using_service_p,
)
from jetspark.processors.session_window import aggregate_to_session_window_p
from jetspark.processors.sinks import (
    write_buffered_p,
    write_file_p,
    write_file_transactional_p,
    write_list_p,
    write_logger_p,
    write_map_p,
    write_rdd_p,
)
from jetspark.processors.sliding_window import (
    accumulate_by_frame_p,
    aggregate_to_sliding_window_p,
    combine_to_sliding_window_p,
)
from jetspark.processors.sources import (
    generate_p,
    read_files_p,
    read_list_p,
    read_map_p,
    read_rdd_p,
)
from jetspark.processors.stateful import filter_stateful_p, flat_map_stateful_p, map_stateful_p
from jetspark.processors.stream_files import stream_files_p
from jetspark.processors.stream_sources import read_stream_p, stream_socket_p, write_socket_p
from jetspark.processors.transforms import (
    ContextFactory,
    filter_p,
    flat_map_p,
    flat_map_using_context_p,
    map_p,
    map_using_context_p,
    noop_p,
)
from jetspark.processors.wrappers import non_cooperative_p

__all__ = [
    "ContextFactory",
    "ServiceFactories",
    "ServiceFactory",
    "accumulate_by_frame_p",
    "accumulate_by_key_p",
    "accumulate_p",
    "aggregate_by_key_p",
    "aggregate_p",
    "aggregate_to_session_window_p",
    "aggregate_to_sliding_window_p",
    "combine_by_key_p",
    "combine_p",
    "combine_to_sliding_window_p",
    "entry",
    "entry_key",
    "entry_value",
    "filter_p",
    "filter_stateful_p",
    "filter_using_service_p",
    "flat_map_p",
    "flat_map_stateful_p",
    "flat_map_using_context_p",
    "flat_map_using_service_async_p",
    "flat_map_using_service_p",
    "generate_p",
    "insert_watermarks_p",
    "map_batched_using_context_p",
    "map_p",
    "map_stateful_p",
    "map_using_context_p",
    "map_using_model_p",
    "map_using_service_async_batched_p",
    "map_using_service_async_p",
    "map_using_service_p",
    "non_cooperative_p",
    "noop_p",
    "peek_input_p",
    "peek_output_p",
    "peek_snapshot_p",
    "read_files_p",
    "read_journal_p",
    "read_list_p",
    "read_map_p",
    "read_rdd_p",
    "read_stream_p",
    "stream_files_p",
    "stream_journal_p",
    "stream_socket_p",
    "whole_item",
    "write_buffered_p",
    "write_file_p",
    "write_file_transactional_p",
    "write_list_p",
    "write_logger_p",
    "write_map_p",
    "write_rdd_p",
    "write_socket_p",
]
