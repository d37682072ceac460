"""Line-aligned byte ranges of files: how a set of files is split among readers, and the reader
of one range (shared by the batch file source and a streaming one).

Hadoop's rule decides which range a line belongs to: a range `[start, end)` owns the lines
whose first byte lies inside it. The line that crosses `end` is read to its end by the range
where it starts; the next range skips it. So every line is read exactly once, whatever the cut
points, and a cut may fall anywhere (inside a `\\r\\n`, inside a multi-byte character).

A line ends at `\\n`, `\\r\\n` or a lone `\\r` (Python's universal newlines, Java's
`readLine`); the end is not part of the line. A last line without a line end is a line.
Splitting works on bytes, so it needs a charset in which these two characters are the single
bytes of ASCII and no other character's bytes include them (ASCII, UTF-8, the ISO-8859 family,
Shift-JIS, GBK...). Files in any other charset (UTF-16, UTF-32, or a charset whose encoder adds
a byte-order mark) are read whole, as text.
"""

from __future__ import annotations

import heapq
import io
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

BLOCK_BYTES = 1 << 20
"""How much a range reader reads at a time; its lines are decoded and returned as one batch."""
MIN_SPLIT_BYTES = 1 << 20
"""Files up to this size are never split (a range is at least this long)."""
_SPLITS_PER_READER = 2
"""Ranges are about total size / (readers * this), so that uneven files still balance."""


@dataclass(frozen=True, order=True)
class FileRange:
    """Bytes `[start, end)` of the file `name` (relative to the directory read)."""

    name: str
    start: int
    end: int

    @property
    def size(self) -> int:
        """The range's length in bytes."""
        return self.end - self.start


def splits_lines_by_bytes(charset: str) -> bool:
    """True when files in `charset` can be cut into byte ranges (see the module docstring)."""
    return "\n\ra".encode(charset) == b"\n\ra" and "".encode(charset) == b""


def plan_ranges(
    sizes: Sequence[tuple[str, int]], readers: int, min_split: int, splittable: bool = True
) -> list[list[FileRange]]:
    """Each reader's ranges of the files `sizes` (name, size), sorted by (name, start).

    A file up to the split size is one range; a larger one is cut into equal ranges no longer
    than the split size, which is `max(min_split, total / (readers * 2))` (with `splittable`
    False every file is one range). Ranges go to readers largest first, each to the reader
    with the fewest bytes so far (ties: the lowest index): every reader that computes the plan
    from the same sizes gets the same answer.
    """
    total = sum(size for _, size in sizes)
    split = max(min_split, math.ceil(total / (readers * _SPLITS_PER_READER)), 1)
    ranges: list[FileRange] = []
    for name, size in sizes:
        pieces = max(1, math.ceil(size / split)) if splittable else 1
        cuts = [size * i // pieces for i in range(pieces + 1)]
        ranges += [FileRange(name, cuts[i], cuts[i + 1]) for i in range(pieces)]
    ranges.sort(key=lambda r: (-r.size, r.name, r.start))
    loads = [(0, reader) for reader in range(readers)]
    assigned: list[list[FileRange]] = [[] for _ in range(readers)]
    for file_range in ranges:
        load, reader = heapq.heappop(loads)
        assigned[reader].append(file_range)
        heapq.heappush(loads, (load + file_range.size, reader))
    return [sorted(own) for own in assigned]


class RangeLineReader:
    """Reads the lines a byte range of a file owns, in batches (one per block read).

    `batches()` yields `(position, lines)`: `position` is the byte offset where the batch's
    first line starts. Reading again from a position (`start=position, aligned=True`) resumes
    exactly there; `aligned` says `start` is known to be a line start (otherwise, unless it is
    0, the line in progress at `start` belongs to the range before and is skipped).
    `end=None` reads to the end of the file as it is now. With `complete_last_line=False` a
    last line without a line end is not returned (a file still being written): `position`
    then stays at its start, to read it again once it is complete.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        start: int,
        end: int | None,
        charset: str,
        *,
        aligned: bool = False,
        complete_last_line: bool = True,
        block_bytes: int | None = None,
    ) -> None:
        self.path = path
        self.position = start
        """The offset of the next line not yet returned (after `batches()` ends: where it
        stopped)."""
        self._aligned = aligned or start == 0
        self._end = end
        self._charset = charset
        self._complete_last_line = complete_last_line
        self._block_bytes = block_bytes or BLOCK_BYTES

    def batches(self) -> Iterator[tuple[int, list[str]]]:
        """The range's lines, a block at a time, as `(position of the first, lines)`."""
        end = math.inf if self._end is None else self._end
        with open(self.path, "rb") as file:
            if not self._aligned:
                self.position = _next_line_start(file, self.position)
            file.seek(self.position)
            carry = bytearray()  # the start of a line whose end is not read yet
            while self.position < end:
                data = file.read(self._block_bytes)
                if data.endswith(b"\r"):  # is it a \r\n? read one byte more to know
                    data += file.read(1)
                if not data:
                    if carry and self._complete_last_line:
                        yield self.position, [carry.decode(self._charset)]
                        self.position += len(carry)
                    return
                if max(data.rfind(b"\n"), data.rfind(b"\r")) < 0:  # a line longer than a block
                    carry += data
                    continue
                block = bytes(carry) + data if carry else data
                cut = max(block.rfind(b"\n"), block.rfind(b"\r"))
                limit = end - self.position
                if cut >= limit - 1:  # the block reaches the first line start past `end`
                    cut = _line_end(block, int(limit) - 1)
                    yield self.position, decode_lines(block[: cut + 1], self._charset)
                    self.position += cut + 1
                    return
                yield self.position, decode_lines(block[: cut + 1], self._charset)
                self.position += cut + 1
                carry = bytearray(block[cut + 1 :])


def decode_lines(data: bytes, charset: str) -> list[str]:
    """The lines of `data`, which ends with a line end: decoded at once, split as bytes (on
    `\\n`, `\\r\\n` and `\\r` only); UnicodeDecodeError when some bytes are not `charset`."""
    text = data.decode(charset)
    lines = text.splitlines()
    line_ends = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    if len(lines) == line_ends:
        return lines
    # the text holds a character str.splitlines() also splits on (\v, \f, \x1c-\x1e,
    # \x85, \u2028, \u2029): split the bytes instead, on line ends only
    return [line.decode(charset) for line in data.splitlines()]


def _line_end(block: bytes, index: int) -> int:
    """The index of the last byte of the first line end at or after `index` in `block`."""
    found = [i for i in (block.find(b"\n", index), block.find(b"\r", index)) if i >= 0]
    cut = min(found)
    if block[cut : cut + 2] == b"\r\n":
        cut += 1
    return cut


def _next_line_start(file: io.BufferedReader, offset: int) -> int:
    """The first line start at or after `offset` (> 0): past the line in progress there."""
    file.seek(offset - 1)
    position = offset - 1
    while True:
        block = file.read(BLOCK_BYTES)
        if block.endswith(b"\r"):
            block += file.read(1)
        if not block:
            return position
        ends = [i for i in (block.find(b"\n"), block.find(b"\r")) if i >= 0]
        if ends:
            return position + _line_end(block, min(ends)) + 1
        position += len(block)


def text_file_batches(
    path: str | os.PathLike[str], charset: str, skip_lines: int = 0, batch_lines: int = 4096
) -> Iterator[tuple[int, list[str]]]:
    """A whole file in a charset that cannot be split by bytes, as `(line number of the first,
    lines)` batches from line `skip_lines` on (universal newlines, line ends removed)."""
    with open(path, encoding=charset, newline=None) as file:
        number = 0
        batch: list[str] = []
        for line in file:
            if number >= skip_lines:
                batch.append(line[:-1] if line.endswith("\n") else line)
                if len(batch) == batch_lines:
                    yield number - len(batch) + 1, batch
                    batch = []
            number += 1
        if batch:
            yield number - len(batch), batch
