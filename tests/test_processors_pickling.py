"""Every factory's supplier survives cloudpickle, as Spark ships suppliers to its executors."""

from __future__ import annotations

import pytest
from pyspark import cloudpickle

from jetspark.core.processor import Processor
from jetspark.core.suppliers import as_meta_supplier, as_processor_supplier
from jetspark.processors import (
    ContextFactory,
    accumulate_by_frame_p,
    accumulate_by_key_p,
    accumulate_p,
    aggregate_by_key_p,
    aggregate_p,
    aggregate_to_session_window_p,
    aggregate_to_sliding_window_p,
    combine_by_key_p,
    combine_p,
    combine_to_sliding_window_p,
    filter_p,
    flat_map_p,
    flat_map_using_context_p,
    generate_p,
    insert_watermarks_p,
    map_p,
    map_using_context_p,
    non_cooperative_p,
    noop_p,
    peek_input_p,
    peek_output_p,
    peek_snapshot_p,
    read_files_p,
    read_list_p,
    read_map_p,
    whole_item,
    write_buffered_p,
    write_file_p,
    write_list_p,
    write_logger_p,
    write_map_p,
)
from jetspark.processors.aggregate import all_of, averaging, counting, linear_trend, to_list
from jetspark.processors.windowing import (
    TimestampKind,
    emit_by_frame,
    limiting_lag_and_lull,
    sliding_window_policy,
)

POLICY = sliding_window_policy(20, 10)
CONTEXT = ContextFactory(lambda context: {}, lambda ctx: None).non_cooperative()

FACTORIES = {
    "map_p": map_p(lambda x: x),
    "filter_p": filter_p(bool),
    "flat_map_p": flat_map_p(lambda x: [x]),
    "map_using_context_p": map_using_context_p(CONTEXT, lambda c, x: x),
    "flat_map_using_context_p": flat_map_using_context_p(CONTEXT, lambda c, x: [x]),
    "aggregate_p": aggregate_p(all_of(counting(), averaging())),
    "accumulate_p": accumulate_p(to_list()),
    "combine_p": combine_p(to_list()),
    "aggregate_by_key_p": aggregate_by_key_p([whole_item], counting()),
    "accumulate_by_key_p": accumulate_by_key_p(len, linear_trend(len, len)),
    "combine_by_key_p": combine_by_key_p(counting(), lambda k, v: v),
    "insert_watermarks_p": insert_watermarks_p(
        whole_item, limiting_lag_and_lull(10, 100), emit_by_frame(POLICY), 1000
    ),
    "accumulate_by_frame_p": accumulate_by_frame_p(
        whole_item, whole_item, TimestampKind.EVENT, POLICY, counting()
    ),
    "combine_to_sliding_window_p": combine_to_sliding_window_p(POLICY, counting()),
    "aggregate_to_sliding_window_p": aggregate_to_sliding_window_p(
        whole_item, whole_item, TimestampKind.EVENT, POLICY, counting()
    ),
    "aggregate_to_session_window_p": aggregate_to_session_window_p(
        10, whole_item, whole_item, counting()
    ),
    "noop_p": noop_p(),
    "non_cooperative_p": non_cooperative_p(noop_p()),
    "read_list_p": read_list_p("in"),
    "read_map_p": read_map_p("in"),
    "read_files_p": read_files_p("/tmp"),
    "generate_p": generate_p(10, str),
    "write_list_p": write_list_p("out"),
    "write_map_p": write_map_p("out"),
    "write_file_p": write_file_p("/tmp/out"),
    "write_logger_p": write_logger_p(),
    "write_buffered_p": write_buffered_p(lambda c: [], list.append, list.clear),
    "peek_input_p": peek_input_p(noop_p()),
    "peek_output_p": peek_output_p(map_p(str)),
    "peek_snapshot_p": peek_snapshot_p(aggregate_p(counting())),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factory_round_trips_through_cloudpickle(name):
    clone = cloudpickle.loads(cloudpickle.dumps(FACTORIES[name]))
    meta = as_meta_supplier(clone, name)
    supplier = as_processor_supplier(meta.get([0])(0), name)
    processors = supplier.get(2)
    assert len(processors) == 2
    assert all(isinstance(p, Processor) for p in processors)
    assert processors[0] is not processors[1]
