"""Storage the executors write and the driver reads, checked before anything of a snapshot counts.

On a cluster the snapshot store and each transactional sink's directory must be shared storage
that the driver and every executor reach at the same path. A path that exists on every host
but is each host's own (a local /tmp) does not stop the executors, which write their snapshot
parts and sealed files there; the driver finds it out before it writes a snapshot's manifest,
in both streaming modes: it opens every part as the member that wrote it reported it
(`check_parts`) and looks for every file the transactional sinks sealed for the snapshot
(`check_sealed`). Nothing of the snapshot is committed or published before these checks; one
that fails fails the job at once, naming the part or vertex, the member or processor and its
host, since running the job again would fail the same way. A directory a job's tasks write for
the driver, such as `jetspark tfidf`'s index, can be checked before the job (`hosts_not_seeing`);
on a cluster `SparkEngine.new_job` checks so the snapshot store and the directories of the
transactional file sinks (`check_storage_shared`: their suppliers declare them,
`suppliers.writes_directory`), and refuses a job some executors cannot share them with before
anything of it runs.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from jetspark.core.dag import DAG
from jetspark.core.errors import JobFailedError, SnapshotError
from jetspark.core.snapshot_store import DirectorySnapshotStore, Held
from jetspark.core.spark.session import master_of
from jetspark.core.spark.stages.task_stores import TaskStores
from jetspark.core.suppliers import declared_directory


def task_host() -> str:
    """How a task names the host it runs on: the host name, with SPARK_LOCAL_IP (the address
    Spark uses there) when that is set."""
    name = socket.gethostname()
    address = os.environ.get("SPARK_LOCAL_IP")
    return f"{name} ({address})" if address and address != name else name


def hosts_not_seeing(context: Any, parent: str) -> list[str]:
    """The hosts (`task_host`) of the executors of SparkContext `context` that do not see a
    directory the driver makes in `parent` (and removes again), so a directory of the driver's
    own is found out before a job writes there."""
    probe = tempfile.mkdtemp(prefix=".jetspark-shared-", dir=parent)
    try:
        return hosts_missing(context, [probe])
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def check_storage_shared(context: Any, store: DirectorySnapshotStore | None, dag: DAG) -> None:
    """SnapshotError naming the snapshot store's directory, or JobFailedError naming a
    transactional sink's vertex and directory, and the hosts whose executors do not see it
    (`hosts_not_seeing`), on a cluster; on a local master (`local[...]`, `local-cluster[...]`)
    the executors run on the driver's machine, and nothing is checked. A sink's directory is
    made first, as its processors would make it."""
    master = master_of(context)
    if master.startswith("local"):
        return
    shared = "shared storage that the driver and every executor reach at the same path"
    not_started = (
        "(a directory the driver made there did not appear to them). The job was not started"
    )
    if store is not None and (missing := hosts_not_seeing(context, store.directory)):
        raise SnapshotError(
            f"the snapshot store {store.directory!r} must be {shared}: on the cluster {master} "
            f"the executors on {', '.join(missing)} do not see it {not_started}"
        )
    for vertex in dag.vertices():
        directory = declared_directory(vertex.meta_supplier)
        if directory is None:
            continue
        os.makedirs(directory, exist_ok=True)
        if missing := hosts_not_seeing(context, directory):
            raise JobFailedError(
                f"vertex '{vertex.name}' writes its files into {directory!r}, which must be "
                f"{shared}: on the cluster {master} the executors on {', '.join(missing)} do "
                f"not see it {not_started}"
            )


def hosts_missing(context: Any, paths: list[str]) -> list[str]:
    """The hosts (`task_host`) of the executors of SparkContext `context` on which one of
    `paths` does not exist: one task per task slot of the cluster looks."""
    slots = max(context.defaultParallelism, 1)
    tasks = context.parallelize(range(slots), slots)
    seen = tasks.map(partial(_sees, paths)).collect()
    return sorted({host for host, present in seen if not present})


def _sees(paths: list[str], _task: int) -> tuple[str, bool]:
    return task_host(), all(os.path.exists(path) for path in paths)


@dataclass(frozen=True)
class SealedFiles:
    """What one transactional sink processor sealed for one snapshot."""

    vertex: str
    index: int
    """The processor's global index."""
    directory: str
    files: tuple[tuple[str, str], ...]
    """(temporary, final) paths."""
    temporaries: str
    """A glob matching the sink's temporary files in `directory`."""
    host: str
    """Where the task that sealed them ran."""


class SealingStores(TaskStores):
    """The stores of a task with a snapshot: TaskStores, and the files its transactional sinks
    sealed for the snapshot under way, which the driver checks before it commits the snapshot
    (`check_sealed`). `driver_publishes`: whether the driver publishes them after the commit
    (micro-batches) or the sinks do (continuous members)."""

    driver_publishes = False

    def __init__(self, shipped: Any, rdd_input: Any = None) -> None:
        super().__init__(shipped, rdd_input)
        self._sealed: list[SealedFiles] = []

    def note_sealed(
        self,
        vertex: str,
        index: int,
        directory: str,
        files: tuple[tuple[str, str], ...],
        temporaries: str,
    ) -> None:
        """Processor `index` of `vertex` sealed `files` ((temporary, final) paths) in
        `directory`, whose temporary files match `temporaries`, for the snapshot under way."""
        sealed = SealedFiles(vertex, index, directory, files, temporaries, task_host())
        with self._lock:
            self._sealed.append(sealed)

    def take_sealed(self) -> list[SealedFiles]:
        """The files noted since the last call, for the task's part of the snapshot."""
        with self._lock:
            sealed, self._sealed = self._sealed, []
        return sealed


def check_parts(
    store: DirectorySnapshotStore,
    snapshot_id: int,
    parts: Mapping[str, tuple[bytes, Held]],
    writers: Mapping[str, tuple[int, str]],
) -> None:
    """SnapshotError naming the part, the member that wrote it and its host (`writers`: part
    name -> (member, host)) when the driver cannot read a part of snapshot `snapshot_id` as
    its writer reported it (`DirectorySnapshotStore.check_part`)."""
    for name, (tag, _) in sorted(parts.items()):
        try:
            store.check_part(snapshot_id, name, tag)
        except SnapshotError as problem:
            member, host = writers[name]
            raise SnapshotError(
                f"part {name!r} of snapshot {snapshot_id}, written by member {member} on "
                f"{host}, cannot be read by the driver ({problem}): the snapshot store "
                f"{store.directory!r} must be shared storage that the driver and every "
                "executor reach at the same path, not a directory of each host's own. "
                f"Snapshot {snapshot_id} was not committed, and nothing of it was published"
            ) from problem


def check_sealed(sealed: Iterable[SealedFiles], snapshot_id: int) -> None:
    """JobFailedError naming the vertex, processor and host when the driver cannot see a file
    a transactional sink sealed for snapshot `snapshot_id`."""
    for batch in sealed:
        for temporary, final in batch.files:
            if not (os.path.exists(temporary) or os.path.exists(final)):
                raise JobFailedError(
                    f"vertex '{batch.vertex}': {temporary!r}, which processor #{batch.index} "
                    f"sealed on {batch.host} for snapshot {snapshot_id}, is not visible to the "
                    "driver: the driver sees every file a transactional sink sealed before it "
                    "commits the snapshot, so on a cluster the sink's directory must be shared "
                    "storage that the driver and every executor reach at the same path, as the "
                    f"snapshot store is. Snapshot {snapshot_id} was not committed",
                    vertex_name=batch.vertex,
                    processor_index=batch.index,
                    callback="publishing its files",
                )
