"""read_files_p's byte ranges: every line read exactly once whatever the cut points (Hadoop's
rule), the split plan, resuming at a saved position, and whole jobs on LocalEngine."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest
from test_processors_helpers import output_of, verify

from jetspark.core import DAG, JobStatus, LocalEngine
from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext
from jetspark.edges import between
from jetspark.processors import file_ranges, read_files_p, write_list_p
from jetspark.processors.file_ranges import (
    FileRange,
    RangeLineReader,
    plan_ranges,
    splits_lines_by_bytes,
    text_file_batches,
)

pytestmark = pytest.mark.timeout(60)

CONTENTS = {
    "plain": b"alpha\nbeta\ngamma\n",
    "no final line end": b"alpha\nbeta\ngamma",
    "crlf": b"one\r\ntwo\r\n\r\nthree\r\n",
    "lone cr": b"a\rb\r\rc",
    "mixed": b"a\r\nb\nc\rd\n\n",
    "multi-byte": "zürich\nnaïve café\n日本語\n€\n".encode(),
    "empty": b"",
    "one line end": b"\n",
    "only cr": b"\r",
    "vertical tab and form feed": b"a\x0bb\x0cc\nd\x1ce\n",
    "u2028 in utf-8": "x\u2028y\nz\x85w\n".encode(),
}


def expected_lines(data: bytes, charset: str = "utf-8") -> list[str]:
    """The file's lines as universal newlines read them."""
    return [line.decode(charset) for line in data.splitlines()]


def read_cuts(path: Path, cuts: list[int], block_bytes: int) -> list[str]:
    """The lines of the ranges between consecutive `cuts`, concatenated."""
    lines: list[str] = []
    for start, end in itertools.pairwise(cuts):
        reader = RangeLineReader(path, start, end, "utf-8", block_bytes=block_bytes)
        lines += [line for _, batch in reader.batches() for line in batch]
    return lines


@pytest.mark.parametrize("name", CONTENTS)
@pytest.mark.parametrize("block_bytes", [1, 2, 3, 1 << 20])
def test_any_two_cut_points_read_every_line_once(tmp_path, name, block_bytes):
    data = CONTENTS[name]
    path = tmp_path / "f"
    path.write_bytes(data)
    size = len(data)
    for first, second in itertools.combinations_with_replacement(range(size + 1), 2):
        cuts = [0, first, second, size]
        assert read_cuts(path, cuts, block_bytes) == expected_lines(data), (name, cuts)


def test_a_long_line_crossing_many_ranges_is_read_once_by_the_range_where_it_starts(tmp_path):
    data = b"short\n" + b"x" * 10_000 + b"\r\nend"
    path = tmp_path / "f"
    path.write_bytes(data)
    cuts = [*range(0, len(data), 997), len(data)]
    assert read_cuts(path, cuts, 64) == ["short", "x" * 10_000, "end"]


def test_batch_positions_resume_exactly_where_the_batch_starts(tmp_path):
    data = b"".join(f"line {i}\r\n".encode() for i in range(200))
    path = tmp_path / "f"
    path.write_bytes(data)
    batches = list(RangeLineReader(path, 0, len(data), "utf-8", block_bytes=50).batches())
    assert len(batches) > 10
    for position, lines in batches:
        resumed = RangeLineReader(path, position, len(data), "utf-8", aligned=True, block_bytes=50)
        first = next(iter(resumed.batches()))
        assert first[0] == position
        assert first[1][: len(lines)] == lines[: len(first[1])]


def test_a_reader_to_the_end_of_a_growing_file_keeps_an_unfinished_last_line(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"done\nhalf")
    reader = RangeLineReader(path, 0, None, "utf-8", complete_last_line=False)
    assert [line for _, batch in reader.batches() for line in batch] == ["done"]
    assert reader.position == 5
    with open(path, "ab") as file:
        file.write(b" written\nnext")
    resumed = RangeLineReader(path, reader.position, None, "utf-8", aligned=True)
    assert [line for _, batch in resumed.batches() for line in batch] == ["half written", "next"]


def test_charsets_that_cannot_be_cut_by_bytes_are_read_whole_as_text(tmp_path):
    assert splits_lines_by_bytes("utf-8") and splits_lines_by_bytes("latin-1")
    assert not splits_lines_by_bytes("utf-16") and not splits_lines_by_bytes("utf-8-sig")
    path = tmp_path / "f"
    path.write_text("ä\r\nb\rc\n", encoding="utf-16")
    batches = list(text_file_batches(path, "utf-16", batch_lines=2))
    assert batches == [(0, ["ä", "b"]), (2, ["c"])]
    assert list(text_file_batches(path, "utf-16", skip_lines=1)) == [(1, ["b", "c"])]


def test_plan_keeps_small_files_whole_and_cuts_large_ones_evenly():
    sizes = [("big", 1000), ("small-a", 10), ("small-b", 30), ("empty", 0)]
    plan = plan_ranges(sizes, readers=2, min_split=100)
    ranges = sorted(r for own in plan for r in own)
    assert ranges == [
        FileRange("big", 0, 250),
        FileRange("big", 250, 500),
        FileRange("big", 500, 750),
        FileRange("big", 750, 1000),
        FileRange("empty", 0, 0),
        FileRange("small-a", 0, 10),
        FileRange("small-b", 0, 30),
    ]
    assert [sum(r.size for r in own) for own in plan] == [530, 510]
    assert plan == plan_ranges(sizes, readers=2, min_split=100)  # every reader agrees


def test_plan_with_more_readers_than_ranges_leaves_some_idle():
    plan = plan_ranges([("a", 50), ("b", 40)], readers=5, min_split=100)
    assert plan == [[FileRange("a", 0, 50)], [FileRange("b", 0, 40)], [], [], []]


def test_plan_of_an_unsplittable_charset_keeps_every_file_whole():
    plan = plan_ranges([("a", 10_000)], readers=4, min_split=1, splittable=False)
    assert plan == [[FileRange("a", 0, 10_000)], [], [], []]


# ------------------------------------------------------------------- the read_files_p source


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Three files with every kind of line end and a multi-byte character on many offsets."""
    (tmp_path / "a.txt").write_bytes(
        b"".join(f"a{i} \u00e9\u20ac{'x' * (i % 7)}\r\n".encode() for i in range(300))
    )
    (tmp_path / "b.txt").write_bytes(b"".join(f"b{i}\r".encode() for i in range(50)) + b"b-last")
    (tmp_path / "c.txt").write_bytes(b"")
    (tmp_path / "skip.log").write_bytes(b"not matched\n")
    return tmp_path


def corpus_lines(directory: Path) -> list[tuple[str, str]]:
    return [
        (path.name, line)
        for path in sorted(directory.glob("*.txt"))
        for line in expected_lines(path.read_bytes())
    ]


def with_name(name: str, line: str) -> tuple[str, str]:
    return name, line


@pytest.mark.parametrize("total", [1, 2, 3, 7, 40])
def test_processors_of_a_shared_file_system_read_every_line_once(corpus, total):
    outputs = []
    for index in range(total):
        supplier = read_files_p(
            str(corpus), "*.txt", shared_file_system=True, map_fn=with_name, min_split_bytes=64
        )
        outputs += output_of(
            verify(supplier).total_parallelism(total).global_processor_index(index)
        )
    assert Counter(outputs) == Counter(corpus_lines(corpus))


def drain_with_snapshots(
    supplier, total: int, index: int, capacity: int, snapshot_every: int
) -> tuple[list, int]:
    """Runs one processor of `supplier` with a small outbox; every `snapshot_every` calls saves a
    snapshot, throws the processor away and restores the snapshot into a new one."""
    context = TestProcessorContext().set_total_parallelism(total).set_global_processor_index(index)
    emitted: list = []
    restores = calls = 0
    processor, outbox = supplier(), TestOutbox(capacity)
    processor.init(outbox, context)
    while True:
        done = processor.complete()
        outbox.drain_queue(0, emitted)
        if done:
            processor.close()
            return emitted, restores
        calls += 1
        if calls % snapshot_every == 0:
            while not processor.save_to_snapshot():
                pass
            saved: list = []
            outbox.drain_snapshot_queue(saved)
            processor.close()
            processor, outbox = supplier(), TestOutbox(capacity)
            processor.init(outbox, context)
            processor.restore_from_snapshot(TestInbox(saved))
            assert processor.finish_snapshot_restore()
            restores += 1


@pytest.mark.parametrize(("capacity", "snapshot_every"), [(1, 1), (7, 2), (30, 3)])
def test_a_restored_processor_resumes_at_its_saved_position(
    corpus, monkeypatch, capacity, snapshot_every
):
    """With 40-byte blocks each range has many batches: saved positions fall inside ranges and
    inside batches, and the restored processors together emit each line exactly once."""
    monkeypatch.setattr(file_ranges, "BLOCK_BYTES", 40)
    supplier = read_files_p(
        str(corpus), "*.txt", shared_file_system=True, map_fn=with_name, min_split_bytes=64
    )
    outputs, restores = [], 0
    for index in range(3):
        emitted, restored = drain_with_snapshots(supplier, 3, index, capacity, snapshot_every)
        outputs += emitted
        restores += restored
    assert restores > 0
    assert Counter(outputs) == Counter(corpus_lines(corpus))


def test_map_fn_none_results_are_skipped(corpus):
    def even_only(name: str, line: str) -> str | None:
        return line if line != "b-last" and int(line[1:]) % 2 == 0 else None

    supplier = read_files_p(str(corpus), "b.txt", map_fn=even_only, min_split_bytes=16)
    verify(supplier).expect_output([f"b{i}" for i in range(0, 50, 2)])


def test_min_split_bytes_must_be_positive(corpus):
    with pytest.raises(ValueError, match="min_split_bytes"):
        read_files_p(str(corpus), min_split_bytes=0)


def read_files_dag(directory: Path, shared: bool) -> DAG:
    dag = DAG("read files")
    source = dag.new_vertex(
        "source",
        read_files_p(
            str(directory), "*.txt", shared_file_system=shared, map_fn=with_name, min_split_bytes=64
        ),
        local_parallelism=3,
    )
    sink = dag.new_vertex("sink", write_list_p("lines"), local_parallelism=1)
    dag.edge(between(source, sink))
    return dag


def run_local(dag: DAG, members: int) -> list[tuple[str, str]]:
    engine = LocalEngine(members=members)
    job = engine.new_job(dag)
    job.join(timeout=30)
    assert job.status is JobStatus.COMPLETED
    return [tuple(item) for item in engine.get_list("lines")]


@pytest.mark.parametrize("members", [1, 2, 3])
def test_local_engine_job_reads_each_line_once_with_a_shared_file_system(corpus, members):
    lines = run_local(read_files_dag(corpus, shared=True), members)
    assert Counter(lines) == Counter(corpus_lines(corpus))


def test_local_engine_members_without_a_shared_file_system_each_read_their_own_directory(corpus):
    lines = run_local(read_files_dag(corpus, shared=False), members=2)
    assert Counter(lines) == Counter(corpus_lines(corpus) * 2)
