"""stream_files_p (manual §5.7, replayable): lines appended to files while the job runs, a
cancel, more lines while no job runs, a continue at another member count, then the directory
deleted to complete the source; every line committed exactly once, on both engines. The
waits are on counts of items and snapshots, never on what some seconds achieve."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import fault_tolerance_jobs as jobs
import pytest

from jetspark.core import (
    DAG,
    DirectorySnapshotStore,
    JobCancelledError,
    JobConfig,
    JobFailedError,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.job import Job
from jetspark.core.test_support import TestSupport
from jetspark.edges import between
from jetspark.processors import map_p, stream_files_p, write_file_transactional_p
from jetspark.processors.stream_files import StreamFilesP, file_owner

pytestmark = pytest.mark.timeout(600)

CONFIG = JobConfig(
    processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=5
)
FILES = 3


def engine_for(kind: str, members: int, request: pytest.FixtureRequest) -> Any:
    if kind == "local":
        return LocalEngine(members, snapshot_clock=jobs.TickClock())
    from jetspark.core.spark import SparkEngine

    context = request.getfixturevalue("spark_engine").context
    return SparkEngine(context, members=members, batch_items=150)


def files_dag(directory: Path, out: Path, **options: Any) -> DAG:
    dag = DAG("streamed-files")
    source = dag.new_vertex("files", stream_files_p(str(directory), "*.log", **options))
    tag = dag.new_vertex("tag", map_p(str.upper))
    sink = dag.new_vertex("sink", write_file_transactional_p(str(out)))
    dag.edge(between(source, tag).distributed())
    dag.edge(between(tag, sink))
    return dag


class Writer:
    """Appends numbered lines to the files, in whole lines, from a thread of its own."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.written: list[str] = []
        self._next = 0

    def append(self, count: int) -> None:
        for _ in range(count):
            n = self._next
            self._next += 1
            line = f"file{n % FILES}-line{n}"
            with open(self.directory / f"f{n % FILES}.log", "a") as file:
                file.write(line + "\n")
            self.written.append(line.upper())

    def in_background(self, count: int) -> threading.Thread:
        thread = threading.Thread(target=self.append, args=(count,))
        thread.start()
        return thread


def emitted(job: Job) -> int:
    return sum(sum(p.emitted_count.values()) for p in job.metrics.of_vertex("files"))


def wait_until(job: Job, condition: Any, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert not job.status.is_terminal, job.join(0)
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.05)


@pytest.mark.parametrize("kind", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_appended_lines_are_committed_once_across_a_cancel_and_a_continue(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    directory, out = tmp_path / "logs", tmp_path / "out"
    directory.mkdir()
    (directory / "ignored.txt").write_text("not a log\n")
    writer = Writer(directory)
    writer.append(300)
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    shared = {"shared_file_system": True}  # one directory for all members of LocalEngine
    first = engine_for(kind, 2, request).new_job(
        files_dag(directory, out, **shared), CONFIG, snapshot_store=store
    )
    appending = writer.in_background(300)
    wait_until(first, lambda: emitted(first) >= 200 and store.latest() is not None)
    first.cancel()
    with pytest.raises(JobCancelledError):
        first.join(120)
    appending.join()
    writer.append(150)  # while no job runs
    second = engine_for(kind, 3, request).new_job(
        files_dag(directory, out, **shared),
        CONFIG,
        snapshot_store=store,
        restore_from=store.latest(),
    )
    wait_until(second, lambda: _all_read(second, out, writer))
    shutil.rmtree(directory)  # completes the source, as in Jet: the job ends, all published
    second.join(120)
    assert jobs.committed_lines(str(out)) == sorted(writer.written)


def _all_read(job: Job, out: Path, writer: Writer) -> bool:
    """Every written line has been read by this run or published by the previous one."""
    return len(jobs.committed_lines(str(out))) + emitted(job) >= len(writer.written)


def test_only_new_reads_what_is_appended_after_the_start(tmp_path: Path) -> None:
    directory, out = tmp_path / "logs", tmp_path / "out"
    directory.mkdir()
    (directory / "a.log").write_text("old 1\nold 2\npartial")
    engine = LocalEngine(1, snapshot_clock=jobs.TickClock())
    job = engine.new_job(files_dag(directory, out, only_new=True), CONFIG)
    # a committed snapshot: the source saved, sent its barrier and polled right after
    wait_until(job, lambda: job.snapshot_store.latest() is not None)
    with open(directory / "a.log", "a") as file:
        file.write(" end\nnew 1\n")
    (directory / "b.log").write_text("new file\n")
    wait_until(job, lambda: emitted(job) >= 2)
    shutil.rmtree(directory)
    job.join(60)
    assert jobs.committed_lines(str(out)) == ["NEW 1", "NEW FILE"]


def test_a_missing_directory_fails_the_job_naming_the_vertex(tmp_path: Path) -> None:
    job = LocalEngine().new_job(files_dag(tmp_path / "nowhere", tmp_path / "out"))
    with pytest.raises(JobFailedError, match=r"vertex 'files'.*does not exist"):
        job.join(60)
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        stream_files_p(str(tmp_path / "file"))


class AppendedWhileRunning(StreamFilesP):
    """stream_files_p whose directory gets one more write before each `complete()` call.

    TestSupport snapshots and restores between calls, so every write is read by whichever
    instance runs then. A run's first instance (not restored before its first call) removes the
    files the script writes and starts it again; the source completes once `total` lines were
    emitted in the run (the real one waits for its directory to be deleted).
    """

    poll_seconds = 0.0  # looks at the directory on every call

    def __init__(self, directory: Path, writes: list[tuple[str, bytes]], total: int) -> None:
        super().__init__(str(directory), "*.log", "utf-8", False, False)
        self._path, self._writes, self._total, self._fresh = directory, writes, total, True

    run = {"written": 0, "emitted": 0}
    """The current run's progress, shared by its successive instances."""

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        self._fresh = False
        super().restore_from_snapshot_entry(key, value)

    def try_emit(self, *args: Any) -> bool:
        emitted = super().try_emit(*args)
        self.run["emitted"] += emitted
        return emitted

    def complete(self) -> bool:
        if self._fresh:
            self._fresh = False
            self._path.mkdir(exist_ok=True)
            for name in {name for name, _ in self._writes}:
                (self._path / name).unlink(missing_ok=True)
            self.run.update(written=0, emitted=0)
        if self.run["emitted"] >= self._total:
            return True
        if self.run["written"] < len(self._writes):
            name, data = self._writes[self.run["written"]]
            with open(self._path / name, "ab") as file:
                file.write(data)
            self.run["written"] += 1
        return super().complete()


def test_support_verifies_snapshots_and_restores_between_appends(tmp_path: Path) -> None:
    """Each line once, as it is completed, whatever snapshot a new instance restores: a line
    written in two parts (split inside a multi-byte character, ended by `\\r\\n`) waits for
    its line break, and an unterminated last line is not emitted."""
    writes = [
        ("a.log", b"a1\na2 \xc3"),
        ("b.log", b"b1\n"),
        ("a.log", b"\xa9t\xc3\xa9\r\na3\n"),
        ("c.txt", b"not matched by the glob\n"),
        ("b.log", b"b2\nstill being writ"),
        ("a.log", b"a4\n"),
    ]
    expected = ["a1", "b1", "a2 \u00e9t\u00e9", "a3", "b2", "a4"]
    TestSupport.verify_processor(
        lambda: AppendedWhileRunning(tmp_path / "logs", writes, len(expected))
    ).disable_progress_assertion().expect_output(expected)


@pytest.mark.parametrize("index", [0, 1])
def test_support_each_of_two_processors_reads_the_files_it_owns(tmp_path: Path, index: int) -> None:
    directory = tmp_path / "logs"
    directory.mkdir()
    owners: dict[str, int] = {}  # files are owned by inode: at least 8, on both processors
    while len(owners) < 8 or len(set(owners.values())) < 2:
        path = directory / f"f{len(owners)}.log"
        path.write_text(f"{path.name} 1\n{path.name} 2\n")
        owners[path.name] = file_owner(path.stat().st_ino, 2)
    mine = [f"{name} {n}" for name, owner in owners.items() if owner == index for n in (1, 2)]
    TestSupport.verify_processor(
        lambda: AppendedWhileRunning(directory, [], len(mine))
    ).local_parallelism(2).total_parallelism(2).local_processor_index(index).global_processor_index(
        index
    ).disable_progress_assertion().output_checker(TestSupport.SAME_ITEMS_ANY_ORDER).expect_output(
        mine
    )
