"""The replayable journal sources and the transactional file sink, processor by processor."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from test_processors_helpers import output_of, verify, with_stores

from jetspark.core.config import ProcessingGuarantee
from jetspark.core.stores import Stores
from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext
from jetspark.processors import read_journal_p, stream_journal_p, write_file_transactional_p

pytestmark = pytest.mark.timeout(30)

# ------------------------------------------------------------------- journals


def test_a_bounded_list_journal_replays_exactly_after_every_snapshot():
    stores = Stores()
    stores.get_list("log").extend(["a", None, "b", "c", "d"])
    verify(with_stores(read_journal_p("log", partition_count=3), stores)).expect_output(
        ["a", "b", "c", "d"]
    )


def test_processors_read_the_partitions_congruent_to_their_index_in_offset_order():
    stores = Stores()
    stores.get_list("log").extend(range(20))
    outputs = [
        output_of(
            verify(with_stores(read_journal_p("log", partition_count=4), stores))
            .total_parallelism(2)
            .local_parallelism(2)
            .global_processor_index(index)
            .local_processor_index(index)
        )
        for index in range(2)
    ]
    assert outputs == [
        [n for n in range(20) if n % 4 in (0, 2)],
        [n for n in range(20) if n % 4 in (1, 3)],
    ]


def test_a_journal_of_an_item_function_is_bounded_by_count():
    verify(read_journal_p(lambda n: n * n, count=6, partition_count=2)).expect_output(
        [0, 1, 4, 9, 16, 25]
    )


def start(processor_fn: Any, stores: Stores | None = None) -> tuple[Any, TestOutbox]:
    processor = processor_fn()
    outbox = TestOutbox(100)
    processor.init(outbox, TestProcessorContext(stores=stores))
    return processor, outbox


def emitted(outbox: TestOutbox) -> list[Any]:
    items = list(outbox.buckets[0])
    outbox.buckets[0].clear()
    return items


def test_a_streaming_list_journal_picks_up_appended_items_and_never_completes():
    stores = Stores()
    log = stores.get_list("log")
    log.extend([1, 2])
    source, outbox = start(stream_journal_p("log", partition_count=2), stores)
    assert source.complete() is False and emitted(outbox) == [1, 2]
    assert source.complete() is False and emitted(outbox) == []
    log.extend([3, 4, 5])
    assert source.complete() is False and emitted(outbox) == [3, 4, 5]


def test_a_streaming_function_journal_resumes_from_its_saved_offsets():
    source, outbox = start(stream_journal_p(lambda n: n, partition_count=3))
    source.complete()
    first = emitted(outbox)
    assert first == list(range(100)), "the outbox bounds each call"
    source.save_to_snapshot()
    entries = list(outbox.snapshot_bucket)
    restored, outbox = start(stream_journal_p(lambda n: n, partition_count=3))
    restored.restore_from_snapshot(TestInbox(entries))
    restored.finish_snapshot_restore()
    restored.complete()
    assert emitted(outbox)[:3] == [100, 101, 102]


def test_offsets_of_another_partition_count_are_refused():
    source, outbox = start(stream_journal_p(lambda n: n, partition_count=3))
    source.save_to_snapshot()
    other, _ = start(stream_journal_p(lambda n: n, partition_count=4))
    with pytest.raises(ValueError, match="journal of 3 partitions, this one has 4"):
        other.restore_from_snapshot(TestInbox(outbox.snapshot_bucket))


def test_journal_arguments_are_checked():
    with pytest.raises(ValueError, match="needs a count"):
        read_journal_p(lambda n: n)
    with pytest.raises(ValueError, match="count applies to an item function"):
        read_journal_p("log", count=3)
    with pytest.raises(ValueError, match="partition_count"):
        stream_journal_p("log", partition_count=0)
    with pytest.raises(TypeError, match="list name or an item function"):
        stream_journal_p(42)  # type: ignore[arg-type]


# ----------------------------------------------------------- the file sink


def sink_in(directory: str, guarantee: ProcessingGuarantee, index: int = 0, total: int = 1) -> Any:
    processor = write_file_transactional_p(directory)()
    outbox = TestOutbox(1)
    context = TestProcessorContext(
        processing_guarantee=guarantee, global_processor_index=index, total_parallelism=total
    )
    processor.init(outbox, context)
    processor.snapshot_outbox = outbox
    return processor


def write(processor: Any, *items: Any) -> None:
    processor.process(0, TestInbox(items))


def names(directory: Any) -> list[str]:
    """The directory's file names, each temporary file's random part left out."""
    return sorted(re.sub(r"\.[0-9a-f]{32}\.tmp$", ".tmp", name) for name in os.listdir(directory))


EXACTLY_ONCE = ProcessingGuarantee.EXACTLY_ONCE


def test_without_a_guarantee_complete_publishes_the_file(tmp_path):
    sink = sink_in(str(tmp_path), ProcessingGuarantee.NONE)
    write(sink, 1, 2)
    assert names(tmp_path) == [".part-00000-00000000.tmp"]
    sink.complete()
    assert names(tmp_path) == ["part-00000-00000000"]
    assert (tmp_path / "part-00000-00000000").read_text() == "1\n2\n"


def test_a_failed_job_without_a_guarantee_leaves_no_file(tmp_path):
    sink = sink_in(str(tmp_path), ProcessingGuarantee.NONE)
    write(sink, 1)
    sink.close()
    assert names(tmp_path) == []


def test_each_epoch_is_published_only_when_its_snapshot_is_committed(tmp_path):
    sink = sink_in(str(tmp_path), EXACTLY_ONCE)
    write(sink, "a")
    assert sink.save_to_snapshot()
    write(sink, "b")
    assert names(tmp_path) == [".part-00000-00000000.tmp", ".part-00000-00000001.tmp"]
    sink.snapshot_committed()
    assert names(tmp_path) == [".part-00000-00000001.tmp", "part-00000-00000000"]
    assert sink.complete()
    assert names(tmp_path) == [".part-00000-00000001.tmp", "part-00000-00000000"]
    sink.snapshot_outbox.snapshot_bucket.clear()
    assert sink.save_to_snapshot()
    sink.snapshot_committed()
    assert names(tmp_path) == ["part-00000-00000000", "part-00000-00000001"]


def test_a_restore_publishes_the_snapshot_files_and_drops_what_followed(tmp_path):
    old = sink_in(str(tmp_path), EXACTLY_ONCE)
    write(old, "a")
    old.save_to_snapshot()  # the process dies before the commit reaches the sink...
    entries = list(old.snapshot_outbox.snapshot_bucket)
    write(old, "after the snapshot")
    old.close()
    assert names(tmp_path) == [".part-00000-00000000.tmp", ".part-00000-00000001.tmp"]
    # ... and the job restarts at another parallelism: processor 0 of 2 takes over
    new = sink_in(str(tmp_path), EXACTLY_ONCE, index=0, total=2)
    new.restore_from_snapshot(TestInbox(entries))
    new.finish_snapshot_restore()
    assert names(tmp_path) == ["part-00000-00000000"]
    write(new, "b")
    new.complete()
    new.save_to_snapshot()
    new.snapshot_committed()
    assert names(tmp_path) == ["part-00000-00000000", "part-00000-00000001"]
    assert (tmp_path / "part-00000-00000001").read_text() == "b\n"
    other = sink_in(str(tmp_path), EXACTLY_ONCE, index=1, total=2)
    other.restore_from_snapshot(TestInbox(entries))
    other.finish_snapshot_restore()
    assert names(tmp_path) == ["part-00000-00000000", "part-00000-00000001"]


def test_a_published_file_that_went_missing_is_reported(tmp_path):
    old = sink_in(str(tmp_path), EXACTLY_ONCE)
    write(old, "a")
    old.save_to_snapshot()
    entries = list(old.snapshot_outbox.snapshot_bucket)
    (sealed,) = tmp_path.glob(".part-00000-00000000.*.tmp")
    os.remove(sealed)
    new = sink_in(str(tmp_path), EXACTLY_ONCE)
    with pytest.raises(FileNotFoundError, match="its lines are lost"):
        new.restore_from_snapshot(TestInbox(entries))
