"""`stream_files_p`: Jet's unbounded file source (manual §5.7), replayable, following files as
a log shipper does.

Each processor owns some of the files of `directory` that match `glob` (by a hash of the file's
inode, so a renamed file stays with its reader: spread over every processor of the cluster with a
shared file system, and always on SparkEngine, whose members are tasks that may run on any
executor; otherwise each member reads the whole directory, as in Jet). It looks at the directory
every `poll_seconds` and emits every complete line (ended by a line break) appended to its files,
and the lines of new files; a line still being written is read once its line break is there. It
reads a bounded window ahead (`read_ahead_bytes` of one file at a time), however long the backlog.
The directory being deleted completes the source, as in Jet.

Jet leaves content changes other than appends undefined; this source follows each file by its
identity (`tailed_file.py`) and logs what it finds:
- a file renamed under another name the glob matches is the same file, read on where it was;
- a file renamed away or deleted (log rotation) is read to its end through its open descriptor,
  then followed, as a writer still holding it may append more, until its modification time is
  `rotated_grace_seconds` old; a new file under the old name is read from its start; a file gone
  before the source could open it is logged as lost, with its size;
- a file that appeared and was rotated between two looks (its name, now under a rotated name
  such as `a.log.1` or `a.log-20261126` of a name the glob matches, was not in the directory at
  the previous look, and that name leads to a new file too) is found by its identity and read
  as a rotated file;
- compressed files (`.gz`, `.bz2`, `.xz`, `.zst`, `.lz4`, `.zip`, `.Z`: logrotate's `compress`)
  are ignored when the glob matches them without naming them (`app.log*`), logged once; a glob
  that names them (`*.gz`) is refused, since a compressed file cannot be followed as it grows;
- a file truncated, or rewritten in place, is read again from its start;
- an incomplete last line is never emitted: a finished file's is dropped, logged with its size.

Lines are decoded in `charset` (one in which line breaks are single ASCII bytes); a line that is
not is a failure naming the file and the line's byte offset, or, with `on_bad_input="skip"`,
skipped with a warning naming them.

Beyond Jet, it is replayable: a snapshot saves, per file, its name, identity (device, inode), the
byte offset of its first line not yet emitted and the bytes just before it, so a restored job goes
on exactly after the last emitted line of the same file (found by its inode if it was renamed
meanwhile), at any parallelism, and with a transactional sink the job is exactly-once.
`only_new=True` is Jet's behaviour: only content added after the job first started is read.
"""

from __future__ import annotations

import codecs
import fnmatch
import os
import stat
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

import mmh3

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.outbox import Outbox
from jetspark.core.snapshot_keys import BroadcastKey, broadcast_key
from jetspark.core.suppliers import ProcessorFn, unbounded
from jetspark.processors.file_ranges import splits_lines_by_bytes
from jetspark.processors.tailed_file import Lines, SavedPosition, TailedFile, decode

_KEY = "stream_file"
_LISTING_KEY = "stream_file_listing"
BadInput = Literal["fail", "skip"]
READ_AHEAD_BYTES = 1 << 20
"""How much of one file a processor reads ahead of what it emitted, by default."""
ROTATED_GRACE_SECONDS = 5.0
"""How long a rotated file is followed after it last grew, by default."""
COMPRESSED_SUFFIXES = {
    ".gz": "gzip",
    ".bz2": "bzip2",
    ".xz": "xz",
    ".zst": "zstd",
    ".lz4": "lz4",
    ".zip": "zip",
    ".Z": "compress",
}
"""File name endings of compressed files (logrotate's `compress`), and their types."""
_ROTATION_SEPARATORS = ".-_"
"""What follows a log's name in the names rotation gives it: a.log.1, a.log-20261126."""


class StreamFilesP(AbstractProcessor):
    """Emits the lines appended to the files it owns (module docstring). Non-cooperative."""

    poll_seconds: float = 0.1
    """How often a processor with nothing to emit looks at the directory again."""
    clock: Callable[[], float] = staticmethod(time.time)
    """The wall clock the grace period of rotated files is measured on, against their
    modification times (tests set a clock of their own)."""

    def __init__(
        self,
        directory: str,
        glob: str,
        charset: str,
        only_new: bool,
        shared_file_system: bool,
        on_bad_input: BadInput = "fail",
        read_ahead_bytes: int = READ_AHEAD_BYTES,
        rotated_grace_seconds: float = ROTATED_GRACE_SECONDS,
    ) -> None:
        super().__init__()
        self._directory = directory
        self._glob = glob
        self._charset = charset
        self._only_new = only_new
        self._shared = shared_file_system
        self._skip_bad_input = on_bad_input == "skip"
        self._read_ahead = read_ahead_bytes
        self._grace = rotated_grace_seconds
        self._listed: dict[int, str] | None = None
        """Inode -> name of every entry of the directory at the last look (None: none yet)."""
        self._ignored: set[str] = set()
        """The compressed files' names already logged as ignored."""
        self._files: dict[int, TailedFile] = {}
        """Inode -> the file this processor follows."""
        self._queue: deque[Lines] = deque()
        """The lines read ahead (one window of one file), in order."""
        self._turn = 0
        self._all_read = False
        """True when no file had anything to read since the last look (which may change it)."""
        self._restored = False
        self._started = False
        self._next_look = 0.0
        self._snapshot: (
            list[tuple[BroadcastKey, SavedPosition | tuple[tuple[int, str], ...]]] | None
        ) = None  # each file's position, then reader 0's directory listing

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        spark = hasattr(context.stores, "rdd_input")  # SparkEngine hands tasks their input
        if self._shared or spark:
            self._readers, self._reader = context.total_parallelism, context.global_processor_index
        else:
            self._readers, self._reader = context.local_parallelism, context.local_processor_index

    def complete(self) -> bool:
        while True:
            while self._queue:
                if not self._emit(self._queue[0]):
                    return False
                self._queue.popleft()
            now = time.monotonic()
            if now >= self._next_look:
                self._next_look = now + self.poll_seconds
                if not self._look():
                    return True  # the directory was deleted: the source completes, as in Jet
            if not self._read_ahead_of_emission():
                return False

    def _emit(self, lines: Lines) -> bool:
        """Emits what is left of `lines`; True once all of them are out."""
        batch, emitted = lines.lines, lines.emitted
        while emitted < len(batch):
            if not self.try_emit(batch[emitted]):
                lines.emitted = emitted
                return False
            emitted += 1
        lines.emitted = emitted
        file = lines.file
        file.offset, file.fingerprint = lines.position_after(emitted)
        return True

    # ------------------------------------------------------------------ looking

    def _look(self) -> bool:
        """Looks at the directory: new files, and what became of the files followed; False
        when the directory is gone (after the source started)."""
        try:
            entries = list(os.scandir(self._directory))
        except (FileNotFoundError, NotADirectoryError):
            if self._started or self._restored:
                return False
            raise FileNotFoundError(
                f"{self._vertex()}: stream_files_p's directory {self._directory!r} does not "
                "exist (or is not a directory)"
            ) from None
        at_start = not self._started and not self._restored
        self._started = True
        self._all_read = False
        named = self._owned_files(entries)
        rotated_unseen = self._rotated_since_last_look(entries)
        gone = set()
        for file in sorted(self._files.values(), key=lambda f: (f.name, f.inode)):
            found = named.pop(file.inode, None)
            if found is not None:
                self._follow(file, found[0])
            else:
                gone.add(file.name)
                self._follow_retired(file, entries)
        for inode, (name, info) in sorted(named.items(), key=lambda item: item[1][0]):
            start = info.st_size if at_start and self._only_new else 0
            file = TailedFile(name, info.st_dev, inode, start, aligned=start == 0)
            if not file.open(os.path.join(self._directory, name)):
                continue  # gone, or replaced, since the listing: the next look sees it
            file.look()
            self._files[inode] = file
            if name in gone:
                self.logger.info(
                    "%s: %r is another file now (inode %d): reading it from its start",
                    self._vertex(),
                    name,
                    inode,
                )
        for inode, name in rotated_unseen:
            file = TailedFile(name, 0, inode, retired=True)
            if not file.open(os.path.join(self._directory, name)):
                continue  # gone, or replaced, since the listing
            file.look()
            self._files[inode] = file
            self.logger.info(
                "%s: %r (inode %d) appeared and was rotated since the last look: reading it",
                self._vertex(),
                name,
                inode,
            )
        return True

    def _rotated_since_last_look(self, entries: list[os.DirEntry[str]]) -> list[tuple[int, str]]:
        """(inode, name) of the files this processor owns that appeared under a name the glob
        matches and were rotated away between the last look and this one (module docstring);
        records this look's listing."""
        matched = {entry.name for entry in entries if fnmatch.fnmatch(entry.name, self._glob)}
        listed = {
            entry.inode(): entry.name
            for entry in entries
            if entry.name in matched or _rotated_from(entry.name, matched)
        }
        previous, self._listed = self._listed, listed
        if previous is None:
            return []
        renewed = {
            name
            for inode, name in listed.items()
            if name in matched and previous.get(inode) != name
        }
        found = []
        for inode, name in sorted(listed.items(), key=lambda item: item[1]):
            if (
                inode in previous
                or fnmatch.fnmatch(name, self._glob)
                or _compression(name) is not None
                or not _rotated_from(name, renewed)
            ):
                continue
            try:
                info = os.stat(os.path.join(self._directory, name))
            except OSError:
                continue  # gone since the listing
            if (
                stat.S_ISREG(info.st_mode)
                and info.st_ino not in self._files
                and self._owns(info.st_ino)
            ):
                found.append((info.st_ino, name))
        return found

    def _owned_files(self, entries: list[os.DirEntry[str]]) -> dict[int, tuple[str, Any]]:
        """Inode -> (name, stat) of the regular files the glob matches that this processor
        owns."""
        owned = {}
        for entry in entries:
            if not fnmatch.fnmatch(entry.name, self._glob):
                continue
            if (compression := _compression(entry.name)) is not None:
                if entry.name not in self._ignored:
                    self._ignored.add(entry.name)
                    self.logger.info(
                        "%s: %r is %s-compressed (a rotated log?): ignored, since only text "
                        "files can be followed",
                        self._vertex(),
                        entry.name,
                        compression,
                    )
                continue
            try:
                info = os.stat(entry.path)
            except OSError:
                continue  # gone since the listing
            if stat.S_ISREG(info.st_mode) and self._owns(info.st_ino):
                owned[info.st_ino] = (entry.name, info)
        return owned

    def _follow(self, file: TailedFile, name: str) -> None:
        """A followed file found under a name the glob matches (perhaps another one)."""
        if name != file.name:
            self.logger.info(
                "%s: %r was renamed %r: reading on where it was", self._vertex(), file.name, name
            )
            file.name = name
        file.retired = False
        if not file.is_open and not file.open(os.path.join(self._directory, name)):
            return  # replaced since the listing: the next look sees what became of it
        _, change = file.look()
        if change is not None:
            self._restart(file, change)

    def _follow_retired(self, file: TailedFile, entries: list[os.DirEntry[str]]) -> None:
        """A followed file no matching name leads to: renamed away or deleted. It is read to
        its end, then followed until it has not been written for the grace period."""
        newly = not file.retired
        file.retired = True
        if not file.is_open:  # restored: find it by its inode, under any name
            path = next((e.path for e in entries if e.inode() == file.inode), None)
            if path is None or not file.open(path):
                self._lose(file, "is gone")
                return
        known_size = file.size
        grew, change = file.look()
        if change is not None:
            file.size = known_size
            self._lose(file, f"was renamed away or deleted, then {change}")
        elif newly:
            self.logger.info(
                "%s: %r (inode %d) was renamed away or deleted: reading the rest of it, and "
                "what is appended to it until it has not been written for %g s",
                self._vertex(),
                file.name,
                file.inode,
                self._grace,
            )
        elif not (grew or file.readable or self._pending(file)) and self._quiet(file):
            self._finish(file)

    def _quiet(self, file: TailedFile) -> bool:
        """True when `file` was last modified at least the grace period ago."""
        return self.clock() - file.modified >= self._grace

    def _lose(self, file: TailedFile, what: str) -> None:
        """Stops following a file that can no longer be read, logging what it held unread."""
        self._stop_following(file)
        unread = file.size - file.offset
        if unread > 0:
            self.logger.warning(
                "%s: %r (inode %d) %s: bytes %d to %d of it were never read (%d bytes lost, as "
                "of its size when last seen)",
                self._vertex(),
                file.name,
                file.inode,
                what,
                file.offset,
                file.size,
                unread,
            )
        else:
            self.logger.info(
                "%s: %r (inode %d) %s, and was read to its end",
                self._vertex(),
                file.name,
                file.inode,
                what,
            )

    def _finish(self, file: TailedFile) -> None:
        """Stops following a renamed or deleted file that has been read to its end."""
        self._stop_following(file)
        left = file.size - file.offset
        if left:
            self.logger.warning(
                "%s: %r (inode %d, renamed away or deleted) ends with an incomplete line: its "
                "last %d bytes are dropped",
                self._vertex(),
                file.name,
                file.inode,
                left,
            )
        else:
            self.logger.info(
                "%s: %r (inode %d, renamed away or deleted) was read to its end, and has not "
                "been written for %g s",
                self._vertex(),
                file.name,
                file.inode,
                self._grace,
            )

    def _stop_following(self, file: TailedFile) -> None:
        file.close()
        del self._files[file.inode]
        self._drop_read_ahead(file)

    def _drop_read_ahead(self, file: TailedFile) -> None:
        self._queue = deque(lines for lines in self._queue if lines.file is not file)

    def _restart(self, file: TailedFile, change: str) -> None:
        """Reads `file` again from its start: `change` replaced its content in place."""
        self.logger.warning(
            "%s: %r %s: reading it again from its start", self._vertex(), file.name, change
        )
        self._drop_read_ahead(file)
        file.restart()

    def _pending(self, file: TailedFile) -> Lines | None:
        """The first lines of `file` read ahead and not all emitted yet, if any."""
        return next((lines for lines in self._queue if lines.file is file), None)

    # ------------------------------------------------------------------ reading

    def _read_ahead_of_emission(self) -> bool:
        """Reads the next window of complete lines into the queue: of a file renamed away or
        deleted first, else of the files in turn. False when no file has any to read."""
        if self._all_read:
            return False
        readable = sorted(
            (file for file in self._files.values() if file.readable),
            key=lambda f: (not f.retired, f.name, f.inode),
        )
        if not readable:
            self._all_read = True
            return False
        if readable[0].retired:
            file = readable[0]
        else:
            file = readable[self._turn % len(readable)]
            self._turn += 1
        start, before, data = file.read(self._read_ahead)
        if data:
            runs, bad_lines = decode(file, start, before, data, self._charset)
            for bad in bad_lines:
                where = (
                    f"the line at byte {bad.offset} of {os.path.join(self._directory, file.name)!r}"
                    f" ({bad.length} bytes) is not {self._charset} ({bad.error})"
                )
                if not self._skip_bad_input:
                    raise ValueError(
                        f"{self._vertex()}: {where}; stream_files_p(..., on_bad_input='skip') "
                        "skips such lines"
                    )
                self.logger.warning("%s: skipped a line: %s", self._vertex(), where)
            self._queue.extend(runs)
        return True

    def _owns(self, inode: int) -> bool:
        return file_owner(inode, self._readers) == self._reader

    def _vertex(self) -> str:
        return f"vertex '{self.context.vertex_name}'"

    # ---------------------------------------------------------------- snapshots

    def save_to_snapshot(self) -> bool:
        if self._snapshot is None:
            self._snapshot = [
                (broadcast_key((_KEY, file.name, file.inode)), self._saved(file))
                for file in sorted(self._files.values(), key=lambda f: (f.name, f.inode))
            ]
            if self._listed is not None and self._reader == 0:  # one listing per directory
                listing = tuple(sorted(self._listed.items()))
                self._snapshot.append((broadcast_key((_LISTING_KEY, self._reader)), listing))
        if not self.emit_from_traverser_to_snapshot(self._snapshot):
            return False
        self._snapshot = None
        return True

    def _saved(self, file: TailedFile) -> SavedPosition:
        """The file's position: after the last line emitted, in the read-ahead if it has
        lines of the file not all emitted yet."""
        pending = self._pending(file)
        if pending is None:
            return file.saved_position(file.offset, file.fingerprint)
        return file.saved_position(*pending.position_after(pending.emitted))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if isinstance(key, BroadcastKey) and key.key[0] == _LISTING_KEY:
            self._restored = True  # the listing of the last look, to find what rotated since
            self._listed = {**(self._listed or {}), **dict(value)}
            return
        if not isinstance(key, BroadcastKey) or key.key[0] != _KEY:
            raise ValueError(f"unexpected snapshot entry {key!r}: expected a file position")
        if len(key.key) != 3:
            raise ValueError(
                f"{self._vertex()}: the snapshot holds a stream_files_p position of an earlier "
                f"jetspark, without the file's identity ({key.key[1]!r}): it cannot be restored "
                "exactly; start the job without restore_from"
            )
        self._restored = True
        _, name, inode = key.key
        if not self._owns(inode):
            return
        file = TailedFile.restored(name, inode, value)
        known = self._files.get(inode)
        if known is None or file.offset < known.offset:  # two members' entries: lose nothing
            self._files[inode] = file

    def close(self) -> None:
        for file in self._files.values():
            file.close()


def _compression(name: str) -> str | None:
    """The compression type a file's name says it has, if any."""
    _, suffix = os.path.splitext(name)
    return COMPRESSED_SUFFIXES.get(suffix) or COMPRESSED_SUFFIXES.get(suffix.lower())


def _rotated_from(name: str, bases: set[str]) -> bool:
    """True when `name` is a name rotation gives a file named one of `bases`: that name, a
    separator, more (a.log.1 of a.log)."""
    return any(
        character in _ROTATION_SEPARATORS and name[:at] in bases
        for at, character in enumerate(name[:-1])
    )


def file_owner(inode: int, readers: int) -> int:
    """The index, among `readers` processors, of the one that reads the file with `inode`:
    MurmurHash3 of the inode, so a file keeps its reader when it is renamed."""
    return mmh3.hash(inode.to_bytes(8, "little"), signed=False) % readers


def stream_files_p(
    directory: str,
    glob: str = "*",
    charset: str = "utf-8",
    *,
    only_new: bool = False,
    shared_file_system: bool = False,
    on_bad_input: BadInput = "fail",
    read_ahead_bytes: int = READ_AHEAD_BYTES,
    rotated_grace_seconds: float = ROTATED_GRACE_SECONDS,
) -> ProcessorFn:
    """Jet's `streamFiles`: the lines of the files of `directory` matching `glob`, then every
    line appended to them or to new files, until the directory is deleted; replayable from
    snapshots; files followed through rotation and truncation (module docstring).

    `on_bad_input`: "fail" (a line that is not `charset` fails the job, naming the file and
    the line's byte offset) or "skip" (it is skipped with a warning naming them).
    `read_ahead_bytes`: how much of a file is read ahead of what was emitted.
    `rotated_grace_seconds`: how long a file renamed away or deleted is followed after it last
    grew (a writer may still hold it). A glob naming compressed files is refused."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise NotADirectoryError(f"stream_files_p: {directory!r} is not a directory")
    try:
        codecs.lookup(charset)
    except LookupError:
        raise ValueError(f"stream_files_p: unknown charset {charset!r}") from None
    if not splits_lines_by_bytes(charset):
        raise ValueError(
            f"stream_files_p reads files by byte offsets, so it needs a charset whose line "
            f"breaks are single ASCII bytes (UTF-8, ASCII, ISO-8859-*...): {charset!r} is not one"
        )
    if on_bad_input not in ("fail", "skip"):
        raise ValueError(f"stream_files_p: on_bad_input is 'fail' or 'skip', got {on_bad_input!r}")
    if not isinstance(read_ahead_bytes, int) or read_ahead_bytes < 1:
        raise ValueError(f"stream_files_p: read_ahead_bytes must be >= 1, got {read_ahead_bytes!r}")
    if isinstance(rotated_grace_seconds, bool) or not (
        isinstance(rotated_grace_seconds, int | float) and rotated_grace_seconds >= 0
    ):
        raise ValueError(
            "stream_files_p: rotated_grace_seconds must be a number of seconds >= 0, "
            f"got {rotated_grace_seconds!r}"
        )
    if (compression := _compression(glob.rstrip("*?]"))) is not None:
        raise ValueError(
            f"stream_files_p: the glob {glob!r} names {compression}-compressed files, which "
            "cannot be followed as they grow; it follows text files (read compressed ones "
            "decompressed by a source of your own, or name only the uncompressed logs)"
        )
    return unbounded(
        lambda: StreamFilesP(
            directory,
            glob,
            charset,
            only_new,
            shared_file_system,
            on_bad_input,
            read_ahead_bytes,
            rotated_grace_seconds,
        )
    )
