"""Leases on snapshot stores: a store takes the snapshots of one job at a time.

Two jobs writing into one store would write snapshots under the same ids and part names, and
each would restore the other's state. So an engine takes the store for a job when the job is
submitted (`store.acquire(job_name)`) and releases it when the job ends; a second job is
refused at once, naming the job, process and host that hold the store, and the holder is not
disturbed.

A DirectorySnapshotStore's lease is the file `LOCK` in its directory, locked with `flock`, so
other processes see it too; the operating system drops the lock of a process that is gone, and
the next job takes the store over (logging whom from). The lock file names its holder in JSON.
Within one process a registry refuses a second lease whatever the file system's `flock` does
(NFS emulates it with locks of the whole process).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jetspark.core.errors import SnapshotError

_log = logging.getLogger("jetspark.snapshots")

LOCK_FILE = "LOCK"
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class StoreHolder:
    """Who holds a snapshot store: a job, in a process, on a host."""

    job: str
    pid: int
    host: str

    @classmethod
    def here(cls, job: str) -> StoreHolder:
        """The job `job` of this process."""
        return cls(job, os.getpid(), socket.gethostname())

    def __str__(self) -> str:
        return f"job '{self.job}' (process {self.pid} on {self.host})"


class StoreLease:
    """A job's hold on a snapshot store, from its submission to its end. `release()` gives the
    store back; it may be called any number of times, from any thread."""

    def __init__(self, holder: StoreHolder, release: Callable[[], None]) -> None:
        self.holder = holder
        self._release: Callable[[], None] | None = release
        self._lock = threading.Lock()

    def release(self) -> None:
        """Gives the store back (once; later calls do nothing)."""
        with self._lock:
            release, self._release = self._release, None
        if release is not None:
            release()

    @property
    def released(self) -> bool:
        """True once `release()` was called."""
        return self._release is None

    def __repr__(self) -> str:
        state = "released" if self.released else "held"
        return f"StoreLease({self.holder}, {state})"


def in_use_error(store: object, holder: StoreHolder | None) -> SnapshotError:
    """The error refusing a second job the store `store` that `holder` holds."""
    who = str(holder) if holder is not None else "another job (it has not written its name yet)"
    return SnapshotError(
        f"{store} is in use by {who}: a snapshot store takes the snapshots of one job at a "
        "time. Give this job a store of its own, or wait until that job has ended"
    )


def acquire_store(store: Any, job_name: str) -> StoreLease:
    """`store.acquire(job_name)`; a store of the user's own without `acquire` gets a lease that
    holds nothing (engines call this, so any SnapshotStore works)."""
    acquire = getattr(store, "acquire", None)
    if acquire is None:
        return StoreLease(StoreHolder.here(job_name), lambda: None)
    lease = acquire(job_name)
    if not isinstance(lease, StoreLease):
        raise TypeError(f"{store!r}.acquire() must return a StoreLease, got {lease!r:.80}")
    return lease


_held_here: dict[tuple[int, int], StoreHolder] = {}
"""(st_dev, st_ino) of a store directory -> the holder of its lease in this process."""
_held_here_lock = threading.Lock()


def lock_directory(store: object, directory: str, job_name: str) -> StoreLease:
    """The lease on the store `store` kept in `directory`: the file LOCK there, locked and
    naming this job; SnapshotError naming the holder when someone else has it."""
    info = os.stat(directory)
    identity = (info.st_dev, info.st_ino)
    holder = StoreHolder.here(job_name)
    path = os.path.join(directory, LOCK_FILE)
    with _held_here_lock:
        if identity in _held_here:
            raise in_use_error(store, _held_here[identity])
        descriptor = _lock_file(store, path)
        try:
            previous = _holder_in(descriptor)
            if previous is not None:
                _log.warning(
                    "%s: taking it over from %s, which ended without giving it back",
                    store,
                    previous,
                )
            content = json.dumps({"job": holder.job, "pid": holder.pid, "host": holder.host})
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, content.encode(), 0)
            os.fsync(descriptor)
        except BaseException:
            os.close(descriptor)
            raise
        _held_here[identity] = holder

    def release() -> None:
        with _held_here_lock:
            try:
                os.unlink(path)  # before unlocking: a waiter re-checks the path (_lock_file)
            except FileNotFoundError:
                pass
            except OSError as error:  # a store gone read-only or unmounted: the lock still goes
                _log.warning("%s: its lease file %s stays behind: %s", store, path, error)
            finally:
                del _held_here[identity]
                with contextlib.suppress(OSError):
                    fcntl.flock(descriptor, fcntl.LOCK_UN)
                os.close(descriptor)

    return StoreLease(holder, release)


def _lock_file(store: object, path: str) -> int:
    """A descriptor of the file at `path`, exclusively locked, that is still the file at
    `path` (a holder releasing unlinks the file before unlocking it)."""
    while True:
        try:
            descriptor = os.open(path, _OPEN_FLAGS, 0o600)
        except OSError as error:  # read-only: permissions, or the file system
            raise SnapshotError(
                f"{store} cannot be written ({error.strerror}: {LOCK_FILE}): a job writes its "
                "snapshots there; give it a directory this user may write"
            ) from error
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_in(descriptor)
            os.close(descriptor)
            raise in_use_error(store, holder) from None
        except BaseException:
            os.close(descriptor)
            raise
        try:
            same = os.path.samestat(os.fstat(descriptor), os.stat(path, follow_symlinks=False))
        except FileNotFoundError:
            same = False
        if same:
            return descriptor
        os.close(descriptor)  # released and unlinked meanwhile: lock the file there now


def _holder_in(descriptor: int) -> StoreHolder | None:
    """The holder a lock file names, or None (empty: released cleanly, or not written yet)."""
    data = os.pread(descriptor, 4096, 0)
    try:
        fields = json.loads(data)
        return StoreHolder(str(fields["job"]), int(fields["pid"]), str(fields["host"]))
    except (ValueError, TypeError, KeyError):
        return None
