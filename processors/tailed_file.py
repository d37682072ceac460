"""A file followed as it grows, by its identity: what `stream_files_p` keeps per file.

A followed file is the file (device, inode) the source first found under a name, not the name:
renamed, it is still that file (log rotation renames `a.log` to `a.log.1` and creates a new
`a.log`, another inode), and it is read through its open descriptor even once deleted. The
position saved is the byte offset of the first line not yet emitted, with the up to
FINGERPRINT_BYTES bytes before it: if those bytes change, or the file becomes shorter than the
position, the content was replaced in place (truncated, rewritten) and the file is read again
from its start.

Reading is bounded: `read(window)` returns the complete lines of about `window` bytes from
where the last read stopped (more only for a single longer line), never an incomplete last line
(a line is complete once its line end is there: `\\n`, `\\r\\n`, or `\\r` followed by another
byte). A `\\r` at the end of the file waits, since a `\\n` may follow.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from jetspark.processors.file_ranges import decode_lines

FINGERPRINT_BYTES = 64
"""How many bytes before the position identify the content read so far."""
_LINE_END = re.compile(rb"\r\n|\r|\n")
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)

SavedPosition = tuple[int, int, bytes, int, bool, bool]
"""(device, offset, fingerprint, size at the last look, aligned, retired): a snapshot entry."""


class TailedFile:
    """One followed file (module docstring). `offset` is the first byte not yet emitted; bytes
    `[offset, read_to)` were read ahead and are being emitted."""

    def __init__(
        self,
        name: str,
        device: int,
        inode: int,
        offset: int = 0,
        fingerprint: bytes = b"",
        size: int = 0,
        *,
        aligned: bool = True,
        retired: bool = False,
    ) -> None:
        self.name = name
        """The name it had when last seen under a name the source's glob matches."""
        self.device = device
        self.inode = inode
        self.offset = offset
        self.fingerprint = fingerprint
        """The up to FINGERPRINT_BYTES bytes before `offset`."""
        self.size = size
        """The size at the last look."""
        self.aligned = aligned
        """False while `offset` may be inside a line (an `only_new` start at the file's end)."""
        self.retired = retired
        """True once no name the glob matches leads to it (renamed away, or deleted)."""
        self.modified = 0.0
        """The file's modification time at the last look (seconds since the epoch)."""
        self.read_to = offset
        self._read_fingerprint = fingerprint
        self._stalled_at = -1
        """The size at which only an incomplete line was left to read."""
        self._descriptor: int | None = None

    @classmethod
    def restored(cls, name: str, inode: int, saved: SavedPosition) -> TailedFile:
        """The file as a snapshot saved it (`saved_position`), not opened yet."""
        device, offset, fingerprint, size, aligned, retired = saved
        return cls(name, device, inode, offset, fingerprint, size, aligned=aligned, retired=retired)

    def saved_position(self, offset: int, fingerprint: bytes) -> SavedPosition:
        """What a snapshot keeps of the file, emitted up to `offset`."""
        return (self.device, offset, fingerprint, self.size, self.aligned, self.retired)

    @property
    def is_open(self) -> bool:
        return self._descriptor is not None

    @property
    def readable(self) -> bool:
        """True when bytes beyond `read_to` may hold a complete line (as of the last look)."""
        return self.is_open and self.size > self.read_to and self.size != self._stalled_at

    def open(self, path: str) -> bool:
        """Opens the file at `path` if it is this file (same inode); False when it is not (or
        is gone). `look()` then tells what became of it."""
        try:
            descriptor = os.open(path, _OPEN_FLAGS)
        except OSError:
            return False
        info = os.fstat(descriptor)
        if info.st_ino != self.inode:
            os.close(descriptor)
            return False
        self._descriptor = descriptor
        self.device = info.st_dev
        return True

    def close(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None

    def look(self) -> tuple[bool, str | None]:
        """Looks at the open file again: (whether its size changed since the last look, or
        since the snapshot it was restored from; what replaced the content read so far in
        place, if anything: a description for the log)."""
        assert self._descriptor is not None
        info = os.fstat(self._descriptor)
        size, self.modified = info.st_size, info.st_mtime
        grew, self.size = size != self.size, size
        if size < self.read_to:
            return grew, f"was truncated to {size} bytes, below the {self.read_to} read"
        if not self._same_bytes_before(self.read_to, self._read_fingerprint):
            return grew, f"was rewritten: the bytes before byte {self.read_to} changed"
        return grew, None

    def _same_bytes_before(self, position: int, fingerprint: bytes) -> bool:
        assert self._descriptor is not None
        start = position - len(fingerprint)
        return not fingerprint or os.pread(self._descriptor, len(fingerprint), start) == fingerprint

    def restart(self) -> None:
        """Reads the file again from its start (its content was replaced in place)."""
        self.offset = self.read_to = 0
        self.fingerprint = self._read_fingerprint = b""
        self.aligned = True
        self._stalled_at = -1

    def read(self, window: int) -> tuple[int, bytes, bytes]:
        """The complete lines after `read_to`, about `window` bytes of them, as (their start
        offset, the fingerprint before it, their bytes); b"" when only an incomplete line (or
        nothing) is there, until the file's size changes. Advances `read_to` past them."""
        assert self._descriptor is not None
        if not self.aligned and not self._align():
            self._stalled_at = self.size
            return self.read_to, self._read_fingerprint, b""
        start, before = self.read_to, self._read_fingerprint
        data = b""
        while block := os.pread(self._descriptor, window, start + len(data)):
            data += block
            cut = _complete_length(data)
            if cut == len(data) and data.endswith(b"\r"):  # \r\n, or a \r line end?
                following = os.pread(self._descriptor, 1, start + len(data))
                if following == b"\n":
                    data, cut = data + following, cut + 1
                elif not following:
                    cut = _complete_length(data[:-1])  # the end of the file: wait and see
            if cut:
                data = data[:cut]
                self.read_to = start + cut
                self._read_fingerprint = (before + data)[-FINGERPRINT_BYTES:]
                return start, before, data
        self._stalled_at = self.size
        return start, before, b""

    def _align(self) -> bool:
        """Moves past the line in progress at an `only_new` start: True once `read_to` is at a
        line start, False while that line has no line end yet."""
        assert self._descriptor is not None
        position = self.read_to - 1  # a line end just before the start: already at a line start
        while position >= 0 and (block := os.pread(self._descriptor, 1 << 16, position)):
            match = _LINE_END.search(block)
            if match is None:
                position += len(block)
                continue
            end = position + match.end()
            if match.group() == b"\r" and match.end() == len(block):
                following = os.pread(self._descriptor, 1, end)
                if not following:
                    return False  # a \r at the end of the file: a \n may follow
                end += following == b"\n"
            known = min(end, FINGERPRINT_BYTES)
            self.offset = self.read_to = end
            self.fingerprint = self._read_fingerprint = os.pread(
                self._descriptor, known, end - known
            )
            position = -1
        self.aligned = position < 0
        return self.aligned


def _complete_length(data: bytes) -> int:
    """The length of the complete lines at the start of `data` (0: none)."""
    return max(data.rfind(b"\n"), data.rfind(b"\r")) + 1


@dataclass
class Lines:
    """Complete lines read from `file` and not yet all emitted: `data` is their bytes, from
    byte `start` of the file; `before` is the fingerprint of `start`."""

    file: TailedFile
    start: int
    before: bytes
    data: bytes
    lines: list[str]
    emitted: int = 0

    @property
    def end(self) -> int:
        return self.start + len(self.data)

    def position_after(self, count: int) -> tuple[int, bytes]:
        """The offset of the line after the first `count` lines, and its fingerprint."""
        if count == 0:
            return self.start, self.before
        if count == len(self.lines):
            return self.end, (self.before + self.data)[-FINGERPRINT_BYTES:]
        length = len(self.data) - len(_LINE_END.split(self.data, count)[-1])
        return self.start + length, (self.before + self.data[:length])[-FINGERPRINT_BYTES:]


@dataclass(frozen=True)
class BadLine:
    """A line whose bytes are not text in the charset."""

    offset: int
    length: int
    error: UnicodeDecodeError


def decode(
    file: TailedFile, start: int, before: bytes, data: bytes, charset: str
) -> tuple[list[Lines], list[BadLine]]:
    """The lines of `data` (read from `file` at `start`) as runs of decodable lines, and the
    lines in between that are not; the last run ends where `data` ends (it may hold no lines),
    so that emitting the runs passes the bad lines too."""
    try:
        return [Lines(file, start, before, data, decode_lines(data, charset))], []
    except UnicodeDecodeError:
        pass
    runs: list[Lines] = []
    bad: list[BadLine] = []
    run_start, position = 0, 0
    for raw in data.splitlines(keepends=True):
        try:
            raw.decode(charset)
        except UnicodeDecodeError as error:
            if position > run_start:
                runs.append(_run(file, start, before, data, run_start, position, charset))
            bad.append(BadLine(start + position, len(raw), error))
            run_start = position + len(raw)
        position += len(raw)
    runs.append(_run(file, start, before, data, run_start, position, charset))
    return runs, bad


def _run(
    file: TailedFile, start: int, before: bytes, data: bytes, first: int, end: int, charset: str
) -> Lines:
    """The decodable lines `data[first:end]`."""
    fingerprint = (before + data[:first])[-FINGERPRINT_BYTES:]
    part = data[first:end]
    return Lines(file, start + first, fingerprint, part, decode_lines(part, charset))
