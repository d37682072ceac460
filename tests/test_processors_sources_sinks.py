"""Sources and sinks: named lists and maps, files, the number generator, logger, buffered sinks."""

from __future__ import annotations

import logging
import os

import pytest
from test_processors_helpers import output_of, verify, with_stores

from jetspark.core.context import ProcessorMetaSupplierContext
from jetspark.core.stores import Stores
from jetspark.core.test_support import (
    DEFAULT_MODES,
    ONE_ITEM,
    TestOutbox,
    TestProcessorContext,
    TestSupport,
)
from jetspark.core.watermark import Watermark
from jetspark.partitioning import member_of_partition, partition_id
from jetspark.processors import (
    generate_p,
    read_files_p,
    read_list_p,
    read_map_p,
    write_buffered_p,
    write_file_p,
    write_list_p,
    write_logger_p,
    write_map_p,
)

# ------------------------------------------------------------------------- sources


def test_read_list_p_single_processor_reads_everything_in_order():
    stores = Stores()
    stores.get_list("in").extend(["a", "b", "c"])
    verify(with_stores(read_list_p("in"), stores)).expect_output(["a", "b", "c"])


def test_read_list_p_splits_the_list_into_contiguous_runs():
    stores = Stores()
    stores.get_list("in").extend(range(10))
    slices = [
        output_of(
            verify(with_stores(read_list_p("in"), stores))
            .total_parallelism(3)
            .local_parallelism(3)
            .global_processor_index(g)
            .local_processor_index(g)
        )
        for g in range(3)
    ]
    assert slices == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]


def test_read_map_p_each_member_reads_only_its_own_partitions():
    stores = Stores()
    entries = {f"line-{i}": i for i in range(50)}
    stores.get_map("lines").update(entries)
    seen = []
    for global_index in range(4):  # 2 members x 2 processors
        out = output_of(
            verify(with_stores(read_map_p("lines"), stores))
            .total_parallelism(4)
            .local_parallelism(2)
            .global_processor_index(global_index)
            .local_processor_index(global_index % 2)
        )
        member = global_index // 2
        assert all(member_of_partition(partition_id(k), 2) == member for k, _ in out)
        seen.extend(out)
    assert sorted(seen) == sorted(entries.items())
    verify(with_stores(read_map_p("lines"), stores)).output_checker(
        TestSupport.SAME_ITEMS_ANY_ORDER
    ).expect_output(list(entries.items()))


def test_a_source_without_engine_stores_fails_clearly():
    with pytest.raises(RuntimeError, match="no named lists"):
        verify(read_list_p("in")).expect_output([])


def test_generate_p_produces_each_number_once_cluster_wide():
    """The meta-supplier pattern of §8.7.2: 2 members x 2 processors, each its own numbers."""
    meta = generate_p(20, lambda n: n * n)
    meta.init(
        ProcessorMetaSupplierContext(
            vertex_name="gen", total_parallelism=4, local_parallelism=2, member_count=2
        )
    )
    supplier_of = meta.get([0, 1])
    processors = [p for member in (0, 1) for p in supplier_of(member).get(2)]
    outputs = [
        output_of(
            verify(processor)
            .total_parallelism(4)
            .local_parallelism(2)
            .global_processor_index(g)
            .local_processor_index(g % 2)
        )
        for g, processor in enumerate(processors)
    ]
    assert outputs[1] == [1, 25, 81, 169, 289]
    assert sorted(x for out in outputs for x in out) == [n * n for n in range(20)]
    verify(generate_p(5)).expect_output([0, 1, 2, 3, 4])


@pytest.fixture
def text_files(tmp_path):
    (tmp_path / "a.txt").write_text("first\nsecond\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("café\n", encoding="utf-8")
    (tmp_path / "c.log").write_text("ignored\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    return tmp_path


def test_read_files_p_reads_matching_files_line_by_line(text_files):
    supplier = read_files_p(str(text_files), glob="*.txt", map_fn=lambda name, line: (name, line))
    assert supplier().is_cooperative() is False
    verify(supplier).expect_output([("a.txt", "first"), ("a.txt", "second"), ("b.txt", "café")])


def test_read_files_p_charset_and_default_map_fn(text_files):
    (text_files / "latin.txt").write_bytes("naïve\n".encode("latin-1"))
    verify(read_files_p(str(text_files), "latin*", "latin-1")).expect_output(["naïve"])


def test_read_files_p_splits_files_locally_or_cluster_wide(text_files):
    def files_read(shared: bool, global_index: int) -> set:
        supplier = read_files_p(
            str(text_files), "*.txt", shared_file_system=shared, map_fn=lambda name, line: name
        )
        return set(
            output_of(
                verify(supplier)
                .total_parallelism(4)
                .local_parallelism(2)
                .global_processor_index(global_index)
                .local_processor_index(global_index % 2)
            )
        )

    # not shared: each member reads its whole local directory, split among its 2 processors
    assert [files_read(False, g) for g in range(4)] == [{"a.txt"}, {"b.txt"}] * 2
    # shared: the files are split among all 4 processors of the cluster
    assert [files_read(True, g) for g in range(4)] == [{"a.txt"}, {"b.txt"}, set(), set()]


def test_read_files_p_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        verify(read_files_p(str(tmp_path / "nope"))).expect_output([])


# --------------------------------------------------------------------------- sinks


@pytest.mark.parametrize("mode", DEFAULT_MODES, ids=str)
def test_write_list_p_appends_items(mode):
    stores = Stores()
    verify(with_stores(write_list_p("out"), stores)).modes(mode).input([1, 2, 3]).verify()
    assert stores.get_list("out") == [1, 2, 3]


@pytest.mark.parametrize("mode", DEFAULT_MODES, ids=str)
def test_write_map_p_puts_entries_and_window_results(mode):
    from jetspark.processors.windowing import KeyedWindowResult

    stores = Stores()
    items = [("a", 1), ("b", 2), ("a", 3), KeyedWindowResult(0, 10, "w", 9)]
    verify(with_stores(write_map_p("out"), stores)).modes(mode).input(items).verify()
    assert stores.get_map("out") == {"a": 3, "b": 2, "w": 9}


@pytest.mark.parametrize("item", [("k", 1, "lost"), ["k"], ()], ids=["three", "one", "empty"])
def test_write_map_p_refuses_an_item_that_is_not_a_pair_instead_of_dropping_part_of_it(item):
    stores = Stores()
    test = verify(with_stores(write_map_p("out"), stores)).input([item])
    with pytest.raises(TypeError, match=r"the map sink 'out' puts \(key, value\) pairs; got a"):
        test.verify()
    assert stores.get_map("out") == {}


@pytest.mark.parametrize("mode", DEFAULT_MODES, ids=str)
def test_write_file_p_writes_one_file_per_processor_atomically(tmp_path, mode):
    supplier = write_file_p(str(tmp_path), lambda x: f"<{x}>")
    verify(supplier).modes(mode).input(["a", "b", Watermark(1), "c"]).verify()
    assert os.listdir(tmp_path) == ["0"]
    assert (tmp_path / "0").read_text() == "<a>\n<b>\n<c>\n"


def test_write_file_p_names_the_file_by_global_index_and_appends(tmp_path):
    (tmp_path / "3").write_text("old\n", encoding="utf-16")
    supplier = write_file_p(str(tmp_path), charset="utf-16", append=True)
    verify(supplier).total_parallelism(4).global_processor_index(3).local_parallelism(
        4
    ).local_processor_index(3).modes(ONE_ITEM).input([1, 2]).verify()
    assert (tmp_path / "3").read_text(encoding="utf-16") == "old\n1\n2\n"


def test_write_file_p_leaves_no_file_when_the_job_fails(tmp_path):
    from jetspark.core.test_support import TestInbox

    processor = write_file_p(str(tmp_path / "out"))()
    processor.init(TestOutbox(), TestProcessorContext())
    processor.process(0, TestInbox(["x", "y"]))
    assert len(os.listdir(tmp_path / "out")) == 1  # the hidden temporary file
    processor.close()  # the job failed before complete()
    assert os.listdir(tmp_path / "out") == []


def test_write_logger_p_logs_each_item(caplog):
    with caplog.at_level(logging.INFO, logger="jetspark"):
        verify(write_logger_p(lambda x: f"item {x}")).modes(ONE_ITEM).input([1, 2]).verify()
    assert [r.message for r in caplog.records] == ["item 1", "item 2"]


def test_write_buffered_p_creates_adds_flushes_and_destroys():
    events = []

    def create(context):
        events.append(("create", context.global_processor_index))
        return []

    def flush(buffer):
        events.append(("flush", list(buffer)))
        buffer.clear()

    supplier = write_buffered_p(create, list.append, flush, lambda b: events.append(("destroy",)))
    assert supplier().is_cooperative() is False
    verify(supplier).modes(ONE_ITEM).input([1, 2, 3]).verify()
    assert events[0] == ("create", 0) and events[-1] == ("destroy",)
    assert [e[1] for e in events if e[0] == "flush"] == [[1], [2], [3]]
