"""Storage that is not shared, found before anything of a snapshot counts (issue #32, item 6):
a snapshot store or a transactional sink's directory whose path exists on every host, but is
each host's own (a local /tmp on a cluster).

How it is made on one host: the executors' view of the path differs from the driver's, as it
would on a cluster, while the driver's check is the one it makes in production.

- The store: `StoreOnExecutorsOwnDisk` is a DirectorySnapshotStore whose copy unpickled in a
  Spark task (an executor's) reads and writes the directory `<path>.executors` instead of
  `<path>`: the members write their parts there, under the names they report, and the driver,
  holding the original, looks for them at `<path>` as it would on another host.
- A transactional sink's directory: `SinkOnExecutorsOwnDisk` moves every file it sealed to a
  directory beside the sink's right after it sealed it (the driver looks at the sealed name
  and finds nothing, as on another host) and back before it publishes it.

Both are test code around the production classes; the members report what they wrote as they
always do, and nothing tells the driver's check that this is a test.
"""

from __future__ import annotations

import glob
import os
import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from fault_tolerance_jobs import committed_lines
from pyspark import cloudpickle

from jetspark.core import (
    DAG,
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    JobFailedError,
    ProcessingGuarantee,
    SnapshotError,
)
from jetspark.edges import between
from jetspark.processors import (
    read_journal_p,
    stream_journal_p,
    write_file_transactional_p,
    write_list_p,
)
from jetspark.processors.sinks import WriteFileTransactionalP

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # executors cannot import tests

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

NUMBERS = 60
PRIVATE = ".executors"
"""The suffix of the directory an executor uses in place of the shared one."""


class StoreOnExecutorsOwnDisk(DirectorySnapshotStore):
    """A snapshot store whose executors' copies use `<directory>.executors` (module
    docstring): the path is there on every host, but not shared with the driver."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.directory += PRIVATE
        os.makedirs(self.directory, mode=0o700, exist_ok=True)


class SinkOnExecutorsOwnDisk(WriteFileTransactionalP):
    """A transactional file sink whose sealed files lie in `<directory>.executors` from their
    sealing until their commit (module docstring)."""

    def _hidden(self) -> list[str]:
        pattern = f".part-{self.context.global_processor_index:05d}-*.tmp"
        return glob.glob(os.path.join(self._directory + PRIVATE, pattern))

    def save_to_snapshot(self) -> bool:
        if not super().save_to_snapshot():
            return False
        pattern = f".part-{self.context.global_processor_index:05d}-*.tmp"
        os.makedirs(self._directory + PRIVATE, exist_ok=True)
        for path in glob.glob(os.path.join(self._directory, pattern)):
            os.rename(path, os.path.join(self._directory + PRIVATE, os.path.basename(path)))
        return True

    def snapshot_committed(self) -> None:
        for path in self._hidden():
            os.rename(path, os.path.join(self._directory, os.path.basename(path)))
        super().snapshot_committed()


def _sink_on_executors_own_disk(directory: str) -> Any:
    return lambda: SinkOnExecutorsOwnDisk(directory, str, "utf-8")


def _config(mode: ExecutionMode) -> JobConfig:
    return JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=100,
        execution_mode=mode,
        max_restarts=2,
    )


def _engine(spark_engine: Any) -> Any:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2, batch_items=20)
    engine.get_list("numbers").extend(range(NUMBERS))
    return engine


def _dag(source: Any, sink: Any) -> DAG:
    dag = DAG("numbers")
    numbers = dag.new_vertex("numbers", source).local_parallelism(1)
    out = dag.new_vertex("sink", sink).local_parallelism(1)
    dag.edge(between(numbers, out).distributed())
    return dag


def _failure(job: Any) -> JobFailedError:
    with pytest.raises(JobFailedError) as failure:
        job.join(240)
    return failure.value


def _unreadable_part(error: JobFailedError, store: str) -> None:
    """Asserts that `error` is the SnapshotError of a part of snapshot 1 the driver could not
    read, naming the part, the member and its host, and the store."""
    cause = error.__cause__
    assert isinstance(cause, SnapshotError), repr(cause)
    text = str(cause)
    part = r"part '(member[01]-|stage0-member[01]-attempt)\w+' of snapshot 1"
    assert re.search(rf"{part}, written by member [01] on {socket.gethostname()}", text), text
    assert "cannot be read by the driver" in text and "No such file or directory" in text, text
    assert f"the snapshot store {store!r} must be shared storage" in text, text


@pytest.mark.parametrize("mode", [ExecutionMode.CONTINUOUS, ExecutionMode.MICRO_BATCH])
def test_a_store_the_driver_does_not_share_fails_the_job_before_its_first_commit(
    spark_engine: Any, tmp_path: Path, mode: ExecutionMode
) -> None:
    """Today CONTINUOUS wrote manifests naming parts the driver could not see, counted 3
    snapshots, restarted until 'the driver's coordinator is gone' and put its list items in
    three times; MICRO_BATCH wrote the manifest and applied the sink's writes before it
    found the part missing."""
    engine = _engine(spark_engine)
    store = str(tmp_path / "snapshots")
    source = stream_journal_p("numbers") if mode is ExecutionMode.CONTINUOUS else None
    dag = _dag(source or read_journal_p("numbers"), write_list_p("out"))
    job = engine.new_job(dag, _config(mode), snapshot_store=StoreOnExecutorsOwnDisk(store))
    _unreadable_part(_failure(job), store)
    assert engine.get_list("out") == []  # nothing published
    assert job.metrics.snapshot_count == 0 and job.metrics.restarts == 0
    assert os.listdir(store) == ["KEY"]  # no manifest, nothing recorded as committed
    assert DirectorySnapshotStore(store).latest(skip_damaged=True) is None


def test_a_micro_batch_job_run_again_after_an_unshared_store_publishes_once(
    spark_engine: Any, tmp_path: Path
) -> None:
    """Today the failed batch's files were published before its commit failed; the run
    restored from `latest(skip_damaged=True)` (the damaged snapshot skipped) published them
    again."""
    engine = _engine(spark_engine)
    store, out = str(tmp_path / "snapshots"), str(tmp_path / "out")
    dag = _dag(read_journal_p("numbers"), write_file_transactional_p(out))
    config = _config(ExecutionMode.MICRO_BATCH)
    job = engine.new_job(dag, config, snapshot_store=StoreOnExecutorsOwnDisk(store))
    _unreadable_part(_failure(job), store)
    assert committed_lines(out) == []
    shared = DirectorySnapshotStore(store)  # the store on shared storage, as it should be
    again = engine.new_job(
        dag, config, snapshot_store=shared, restore_from=shared.latest(skip_damaged=True)
    )
    again.join(240)
    assert committed_lines(out) == sorted(str(n) for n in range(NUMBERS))


def test_a_continuous_sink_directory_the_driver_does_not_see_fails_the_job_naming_it(
    spark_engine: Any, tmp_path: Path
) -> None:
    """Today CONTINUOUS ran on: each member published its files on its own host's disk."""
    engine = _engine(spark_engine)
    out = str(tmp_path / "out")
    dag = _dag(stream_journal_p("numbers"), _sink_on_executors_own_disk(out))
    config = _config(ExecutionMode.CONTINUOUS)
    job = engine.new_job(dag, config, snapshot_store=DirectorySnapshotStore(tmp_path / "s"))
    error = _failure(job)
    assert error.vertex_name == "sink" and error.processor_index in (0, 1), error
    text = str(error)
    assert f"{out}/.part-" in text and "is not visible to the driver" in text, text
    assert f"sealed on {socket.gethostname()}" in text, text
    assert "the sink's directory must be shared storage" in text, text
    assert committed_lines(out) == []
    assert job.metrics.snapshot_count == 0 and job.metrics.restarts == 0
