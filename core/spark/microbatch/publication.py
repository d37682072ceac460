"""Jet's second phase for micro-batches: the driver publishes what a batch's transactional sinks
sealed, right after it committed the batch.

A transactional sink writes each batch's lines to temporary files and seals them when it saves
the batch's snapshot; in a micro-batch task it hands their names to the task's stores
(`BatchStores.note_sealed`) instead of renaming them itself, since only the driver knows
when the batch is committed. The driver then, for each batch:

1. checks that it reads every part of the batch's snapshot and sees every sealed file
   (shared_storage.py: on a cluster the sink's directory must be shared storage, as the
   snapshot store is); a part or file it cannot see fails the job before the commit, naming
   the host that wrote it, so nothing is published that a restart would publish again;
2. records the names in the snapshot (`record_publications`) and commits it;
3. renames them to their final names (`publish`), whatever the stream does next, and removes
   the sinks' other temporary files: those of task attempts Spark ran beside the one whose
   output it kept, or of a run that stopped. Tasks never delete them, so one attempt can
   never remove a file another attempt sealed.

A driver that stops between steps 2 and 3 publishes the recorded names when it starts again.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
from collections.abc import Iterable

from jetspark.core.files import fsync_directory
from jetspark.core.snapshot_store import DirectorySnapshotStore
from jetspark.core.spark.shared_storage import SealedFiles

_log = logging.getLogger("jetspark.spark")


def publish(files: Iterable[tuple[str, str]], *, lenient: bool = False) -> None:
    """Renames each (temporary, final) file; one renamed already is left as it is. A file
    that is neither there nor published raises FileNotFoundError, or with `lenient` (a
    restart publishing what a stopped driver recorded) is logged and skipped."""
    directories = set()
    for temporary, final in files:
        if os.path.exists(temporary):
            os.replace(temporary, final)
            directories.add(os.path.dirname(final))
        elif not os.path.exists(final):
            if not lenient:
                raise FileNotFoundError(f"{temporary!r}, part of a committed snapshot, is gone")
            _log.warning("%r, part of a committed snapshot, is gone: not published", temporary)
    for directory in directories:
        fsync_directory(directory)


def publish_recorded(store: DirectorySnapshotStore, snapshot_id: int) -> None:
    """Publishes the files recorded for committed snapshot `snapshot_id` (a driver starting
    again, which may have stopped between the commit and the renames)."""
    publish(store.recorded_publications(snapshot_id), lenient=True)


def remove_stale_temporaries(sealed: Iterable[SealedFiles]) -> None:
    """Removes the sinks' temporary files left in their directories once their batch's files
    were published (module docstring, step 3)."""
    for directory, pattern in {(batch.directory, batch.temporaries) for batch in sealed}:
        for name in fnmatch.filter(os.listdir(directory), pattern):
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                os.remove(os.path.join(directory, name))
