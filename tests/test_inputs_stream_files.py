"""stream_files_p under files that change behind its back (issue 28 items 1 and 2, its POOR note
on undecodable lines; issue 25 item 9): a log rotated (renamed, then a new file under the old
name, larger or smaller than what was read), a file truncated or rewritten in place, a file
deleted while partly read, a restore after a rotation, a line that is not the charset, and a
backlog far larger than the read-ahead. Exactly-once into write_file_transactional_p, asserting
the exact committed lines, on LocalEngine and on SparkEngine in both its streaming modes. The
waits are on counts of items and snapshots, never on what some seconds achieve."""

from __future__ import annotations

import logging
import shutil
import threading
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path
from typing import Any

import fault_tolerance_jobs as jobs
import pytest

from jetspark.core import (
    DAG,
    DirectorySnapshotStore,
    ExecutionMode,
    JobCancelledError,
    JobConfig,
    JobFailedError,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.job import Job
from jetspark.edges import between
from jetspark.processors import filter_p, stream_files_p, write_file_transactional_p
from jetspark.processors.stream_files import StreamFilesP

pytestmark = pytest.mark.timeout(600)

CONFIG = JobConfig(
    processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=5
)
ENGINES = [
    "local",
    pytest.param("spark-batches", marks=pytest.mark.spark),
    pytest.param("spark-continuous", marks=pytest.mark.spark),
]


def engine_and_config(kind: str, request: pytest.FixtureRequest) -> tuple[Any, JobConfig]:
    if kind == "local":
        return LocalEngine(1, snapshot_clock=jobs.TickClock()), CONFIG
    from jetspark.core.spark import SparkEngine

    context = request.getfixturevalue("spark_engine").context
    mode = ExecutionMode.MICRO_BATCH if kind == "spark-batches" else ExecutionMode.CONTINUOUS
    return SparkEngine(context, members=2, batch_items=1000), replace(CONFIG, execution_mode=mode)


def files_dag(directory: Path, out: Path, source: Any = None, **options: Any) -> DAG:
    dag = DAG("followed-files")
    options.setdefault("shared_file_system", True)
    supplier = source or stream_files_p(str(directory), "*.log", **options)
    files = dag.new_vertex("files", supplier, local_parallelism=1)
    sink = dag.new_vertex("sink", write_file_transactional_p(str(out)))
    dag.edge(between(files, sink).distributed())
    return dag


def lines(prefix: str, first: int, count: int) -> list[str]:
    return [f"{prefix}{n}" for n in range(first, first + count)]


def write(path: Path, content: list[str], mode: str = "w") -> None:
    with open(path, mode, encoding="utf-8") as file:
        file.writelines(line + "\n" for line in content)


def emitted(job: Job) -> int:
    return sum(sum(p.emitted_count.values()) for p in job.metrics.of_vertex("files"))


def wait_until(job: Job, condition: Any, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert not job.status.is_terminal, job.join(0)
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.02)


def committed(out: Path) -> list[str]:
    return jobs.committed_lines(str(out)) if out.is_dir() else []


def finish(job: Job, directory: Path, out: Path, expected: list[str]) -> None:
    """Waits until as many lines as `expected` holds are committed, deletes the directory (the
    source completes) and checks that exactly `expected` was committed."""
    wait_until(job, lambda: len(committed(out)) >= len(expected))
    shutil.rmtree(directory)
    job.join(300)
    assert committed(out) == sorted(expected)


def reading_a_log(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[Job, Path, Path]:
    """A job reading logs/a.log, once its 1,000 lines are committed: (job, logs, out)."""
    directory, out = tmp_path / "logs", tmp_path / "out"
    directory.mkdir()
    write(directory / "a.log", lines("first-", 0, 1000))
    engine, config = engine_and_config(kind, request)
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    job = engine.new_job(files_dag(directory, out), config, snapshot_store=store)
    wait_until(job, lambda: len(committed(out)) >= 1000)
    return job, directory, out


@pytest.mark.parametrize("kind", ENGINES)
@pytest.mark.parametrize("new_lines", [3000, 500], ids=["larger", "smaller"])
def test_a_rotated_log_is_read_to_its_end_and_the_new_one_from_its_start(
    kind: str, new_lines: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    job, directory, out = reading_a_log(kind, tmp_path, request)
    log = directory / "a.log"
    write(log, lines("first-", 1000, 200), "a")  # written just before the rotation
    log.rename(directory / "a.log.1")  # what logrotate does
    write(log, lines("rr", 0, new_lines))
    finish(job, directory, out, lines("first-", 0, 1200) + lines("rr", 0, new_lines))


@pytest.mark.parametrize("kind", ENGINES)
@pytest.mark.parametrize("rewritten", [10, 3000], ids=["shorter", "longer"])
def test_a_file_truncated_or_rewritten_in_place_is_read_again_from_its_start(
    kind: str, rewritten: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    job, directory, out = reading_a_log(kind, tmp_path, request)
    write(directory / "a.log", lines("again-", 0, rewritten))  # the same inode, truncated
    finish(job, directory, out, lines("first-", 0, 1000) + lines("again-", 0, rewritten))


class Paused(StreamFilesP):
    """stream_files_p that stops emitting after `after` lines until `resume` is set (its
    `complete()` returns False meanwhile: it takes part in snapshots, which then save the
    position after exactly `after` lines)."""

    def __init__(self, directory: Path, after: int, resume: threading.Event) -> None:
        super().__init__(str(directory), "*.log", "utf-8", False, True)
        self._after, self._resume, self._count = after, resume, 0

    def try_emit(self, item: Any, ordinal: Any = None) -> bool:
        if self._count >= self._after and not self._resume.is_set():
            return False
        if not super().try_emit(item, ordinal):
            return False
        self._count += 1
        return True


def test_a_file_deleted_while_partly_read_is_finished_from_its_open_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory, out = tmp_path / "logs", tmp_path / "out"
    directory.mkdir()
    log = directory / "a.log"
    write(log, lines("line-", 0, 20_000))
    resume = threading.Event()
    source = lambda: Paused(directory, 100, resume)  # noqa: E731
    job = LocalEngine(1, snapshot_clock=jobs.TickClock()).new_job(
        files_dag(directory, out, source), CONFIG
    )
    wait_until(job, lambda: emitted(job) >= 100 and job.snapshot_store.latest() is not None)
    write(log, lines("line-", 20_000, 500), "a")
    log.unlink()
    with caplog.at_level(logging.INFO, logger="jetspark.files"):
        resume.set()
        finish(job, directory, out, lines("line-", 0, 20_500))
    assert "'a.log' (inode" in caplog.text and "was renamed away or deleted" in caplog.text


def test_a_file_gone_before_a_restore_is_logged_as_lost_with_its_size(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory, out = tmp_path / "logs", tmp_path / "out"
    directory.mkdir()
    write(directory / "a.log", lines("line-", 0, 1000))
    write(directory / "b.log", lines("other-", 0, 10))
    size = (directory / "a.log").stat().st_size
    resume = threading.Event()
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    first = LocalEngine(1, snapshot_clock=jobs.TickClock()).new_job(
        files_dag(directory, out, lambda: Paused(directory, 100, resume)),
        CONFIG,
        snapshot_store=store,
    )
    # the source paused after 100 lines: a snapshot taken from now on saves exactly that
    wait_until(first, lambda: emitted(first) >= 100)
    taken = store.latest().snapshot_id if store.latest() is not None else 0
    wait_until(first, lambda: store.latest() is not None and store.latest().snapshot_id > taken + 1)
    first.cancel()
    with pytest.raises(JobCancelledError):
        first.join(60)
    (directory / "a.log").unlink()
    resume.set()
    with caplog.at_level(logging.WARNING, logger="jetspark.files"):
        second = LocalEngine(1, snapshot_clock=jobs.TickClock()).new_job(
            files_dag(directory, out), CONFIG, snapshot_store=store, restore_from=store.latest()
        )
        wait_until(second, lambda: "'a.log' (inode" in caplog.text)
    read = sorted(line for line in committed(out) if line.startswith("line-"))
    assert read == sorted(lines("line-", 0, 100))
    unread = size - sum(len(line) + 1 for line in read)
    assert f"bytes {size - unread} to {size} of it were never read ({unread} bytes lost" in (
        caplog.text
    )
    finish(second, directory, out, read + lines("other-", 0, 10))


def test_a_restore_after_a_rotation_reads_the_rotated_file_on_then_the_new_one(
    tmp_path: Path,
) -> None:
    directory, out = tmp_path / "logs", tmp_path / "out"
    directory.mkdir()
    log = directory / "a.log"
    write(log, lines("first-", 0, 1000))
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    first = LocalEngine(1, snapshot_clock=jobs.TickClock()).new_job(
        files_dag(directory, out), CONFIG, snapshot_store=store
    )
    wait_until(first, lambda: len(committed(out)) >= 1000)
    first.cancel()
    with pytest.raises(JobCancelledError):
        first.join(60)
    write(log, lines("first-", 1000, 200), "a")  # never read by the first job
    log.rename(directory / "a.log.1")
    write(log, lines("rr", 0, 300))
    second = LocalEngine(1, snapshot_clock=jobs.TickClock()).new_job(
        files_dag(directory, out), CONFIG, snapshot_store=store, restore_from=store.latest()
    )
    finish(second, directory, out, lines("first-", 0, 1200) + lines("rr", 0, 300))


def bad_input_files(directory: Path) -> int:
    """good.log, and bad.log whose third line is not UTF-8; returns that line's byte offset."""
    directory.mkdir()
    write(directory / "good.log", lines("good-", 0, 50))
    (directory / "bad.log").write_bytes(b"bad-0\nbad-1\ncaf\xe9 latin-1\nbad-3\n")
    return len(b"bad-0\nbad-1\n")


@pytest.mark.parametrize("kind", ["local", pytest.param("spark-batches", marks=pytest.mark.spark)])
def test_a_line_not_in_the_charset_fails_the_job_naming_the_file_and_offset(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    directory, out = tmp_path / "logs", tmp_path / "out"
    offset = bad_input_files(directory)
    engine, config = engine_and_config(kind, request)
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    job = engine.new_job(files_dag(directory, out), config, snapshot_store=store)
    with pytest.raises(JobFailedError) as failed:
        job.join(300)
    message = str(failed.value)
    where = f"the line at byte {offset} of {str(directory / 'bad.log')!r} (13 bytes)"
    assert f"{where} is not utf-8" in message
    assert "on_bad_input='skip'" in message and "at org.apache" not in message  # no JVM stack


@pytest.mark.parametrize("kind", ["local", pytest.param("spark-batches", marks=pytest.mark.spark)])
def test_a_line_not_in_the_charset_is_skipped_with_a_warning_when_asked(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    directory, out = tmp_path / "logs", tmp_path / "out"
    offset = bad_input_files(directory)
    engine, config = engine_and_config(kind, request)
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    dag = files_dag(directory, out, on_bad_input="skip")
    with caplog.at_level(logging.WARNING, logger="jetspark.files"):
        job = engine.new_job(dag, config, snapshot_store=store)
        finish(job, directory, out, [*lines("good-", 0, 50), "bad-0", "bad-1", "bad-3"])
    if kind == "local":  # a Spark task logs in its executor
        where = f"the line at byte {offset} of {str(directory / 'bad.log')!r} (13 bytes)"
        assert f"skipped a line: {where} is not utf-8" in caplog.text


def test_files_in_another_charset_are_decoded_and_unsplittable_ones_refused(
    tmp_path: Path,
) -> None:
    directory, out = tmp_path / "logs", tmp_path / "out"
    directory.mkdir()
    (directory / "a.log").write_bytes("café\nnaïve\n".encode("iso-8859-1"))
    job = LocalEngine(1, snapshot_clock=jobs.TickClock()).new_job(
        files_dag(directory, out, charset="iso-8859-1"), CONFIG
    )
    finish(job, directory, out, ["café", "naïve"])
    with pytest.raises(ValueError, match=r"line breaks are single ASCII bytes.*'utf-16' is not"):
        stream_files_p(str(directory), charset="utf-16")
    with pytest.raises(ValueError, match="unknown charset 'klingon'"):
        stream_files_p(str(directory), charset="klingon")
    with pytest.raises(ValueError, match="on_bad_input is 'fail' or 'skip'"):
        stream_files_p(str(directory), on_bad_input="ignore")  # type: ignore[arg-type]


def test_a_backlog_is_read_a_bounded_window_at_a_time(tmp_path: Path) -> None:
    """4 MB of lines waiting: the source holds about `read_ahead_bytes` of them at a time, not
    the backlog (memory measured by tracemalloc over the whole run, in bytes, not time)."""
    directory = tmp_path / "logs"
    directory.mkdir()
    count = 200_000
    write(directory / "a.log", lines("a backlog line number ", 0, count))
    backlog = (directory / "a.log").stat().st_size
    dag = DAG("backlog")
    source = stream_files_p(str(directory), "*.log", read_ahead_bytes=1 << 16)
    files = dag.new_vertex("files", source, local_parallelism=1)
    drop = dag.new_vertex("drop", filter_p(lambda line: False), local_parallelism=1)
    dag.edge(between(files, drop))
    tracemalloc.start()
    try:
        job = LocalEngine(1).new_job(dag)
        wait_until(job, lambda: emitted(job) >= count)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        shutil.rmtree(directory)
    job.join(60)
    assert backlog > 4_000_000
    assert peak < backlog // 4, f"{peak} bytes traced at the peak, for a {backlog}-byte backlog"
