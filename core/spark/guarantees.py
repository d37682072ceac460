"""Checks, before any Spark job starts, that a job with a processing guarantee can run as
micro-batches: a snapshot store the executors can write, a snapshot of this DAG to restore,
and vertices that can take part in batches. Also the life of the store jetspark makes when the
job names none (`TemporarySnapshotStore`)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from pyspark import SparkContext

from jetspark.core.config import JobConfig, ProcessingGuarantee
from jetspark.core.dag import DAG
from jetspark.core.errors import DagValidationError, SnapshotError
from jetspark.core.snapshot_store import DirectorySnapshotStore, Snapshot, SnapshotStore
from jetspark.core.spark.session import master_of


class TemporarySnapshotStore(DirectorySnapshotStore):
    """The store of a job with a guarantee that named none (local masters only): a new
    temporary directory, removed when the job ends, however it ends (`discard_temporary_store`);
    a job to continue after a failure names a store of its own."""


def stream_vertex(dag: DAG) -> tuple[str, Any] | None:
    """The `read_stream_p` vertex of `dag` and its streaming DataFrame, if it has one; a DAG
    with several is refused (one Spark query drives the batches)."""
    found = [
        (v.name, frame)
        for v in dag.vertices()
        if (frame := getattr(v.meta_supplier, "streaming_frame", None)) is not None
    ]
    if len(found) > 1:
        names = ", ".join(f"'{name}'" for name, _ in found)
        raise DagValidationError(
            f"vertices {names} each read a Spark stream: one Spark streaming query drives a "
            "job's micro-batches, so a DAG may hold one read_stream_p vertex (union the "
            "streams into one DataFrame first)"
        )
    return found[0] if found else None


def check_streaming_job(
    context: SparkContext,
    dag: DAG,
    config: JobConfig,
    store: SnapshotStore | None,
    restore_from: Snapshot | None,
) -> DirectorySnapshotStore | None:
    """The job's snapshot store (None without a guarantee); raises a clear error for anything
    that would fail once the batches run."""
    stream = stream_vertex(dag)
    if config.processing_guarantee is ProcessingGuarantee.NONE:
        if stream is not None:
            raise DagValidationError(
                f"vertex '{stream[0]}' reads a Spark stream (read_stream_p): its job runs as "
                "Spark's micro-batches, whose state passes from batch to batch through "
                "snapshots, so it needs JobConfig(processing_guarantee=EXACTLY_ONCE or "
                "AT_LEAST_ONCE)"
            )
        if store is not None or restore_from is not None:
            raise ValueError(
                "snapshot_store and restore_from need a processing guarantee "
                "(JobConfig(processing_guarantee=...)); this job takes no snapshots"
            )
        return None
    for vertex in dag.vertices():
        supplier = vertex.meta_supplier
        kind = (
            "write_rdd_p"
            if getattr(supplier, "rdd_sink_name", None)
            else "read_rdd_p"
            if getattr(supplier, "source_rdd", None) is not None
            else None
        )
        if kind is not None:
            raise DagValidationError(
                f"vertex '{vertex.name}' ({kind}) cannot take part in a job with a processing "
                "guarantee: such a job runs as micro-batches, and an RDD is neither replayable "
                "batch by batch nor a sink a batch can commit; use a journal or file source and "
                "a list, map or transactional file sink"
            )
    if context.getConf().get("spark.speculation", "false").strip().lower() == "true":
        raise ValueError(
            "this SparkContext runs with spark.speculation=true, which starts a second copy of "
            "a slow task beside the first: a job with a processing guarantee redoes each task "
            "exactly from its recorded input, and two copies running at once could emit "
            "different input, so such a job is refused; run it on a context with "
            "spark.speculation=false (Spark's default)"
        )
    if store is None:
        if not master_of(context).startswith("local"):
            raise ValueError(
                f"a job with a processing guarantee on the cluster {context.master} needs "
                "snapshot_store=DirectorySnapshotStore(directory) on storage that the driver "
                "and every executor reach (a shared or network file system)"
            )
        store = TemporarySnapshotStore(tempfile.mkdtemp(prefix="jetspark-snapshots-"))
    if not isinstance(store, DirectorySnapshotStore):
        raise TypeError(
            f"SparkEngine keeps snapshots in files its tasks write, so snapshot_store must be a "
            f"DirectorySnapshotStore on storage every executor reaches, got {store!r}"
        )
    _check_writable(store.directory)
    return store


def _check_writable(directory: str) -> None:
    try:
        handle, probe = tempfile.mkstemp(prefix=".write-check-", dir=directory)
    except OSError as error:
        raise SnapshotError(
            f"the snapshot directory {directory!r} cannot be written: {error.strerror}"
        ) from error
    os.close(handle)
    os.remove(probe)


def discard_temporary_store(store: SnapshotStore | None, restarting: bool = False) -> None:
    """Removes `store` if jetspark made it for the job (a TemporarySnapshotStore), however the
    job ended, unless `restarting` (the cancel of `job.restart()`, which restores from it); a
    user's store is never touched."""
    if isinstance(store, TemporarySnapshotStore) and not restarting:
        shutil.rmtree(store.directory, ignore_errors=True)


def store_for_restart(store: DirectorySnapshotStore | None) -> DirectorySnapshotStore | None:
    """The store a restarted job takes: the job's own, unless it was a temporary store that is
    gone (its job ended), in which case the restart makes a new one."""
    if isinstance(store, TemporarySnapshotStore) and not os.path.isdir(store.directory):
        return None
    return store
