"""A partitioned index's TSV export with its lines formatted in parallel: forked processes each
format some of the index's parts into a scratch file beside the TSV, and the driver merges the
parts' words in order, copying each word's lines from where they were formatted.

Formatting the lines (the scores' `repr` above all) is nearly all the export's time: 1.2 of
1.4 s for 1.76 M postings. The merge copies bytes only. Where processes cannot be forked, or
one would do, the parts are merged and formatted in this process (`index.write_tsv`).
"""

from __future__ import annotations

import heapq
import multiprocessing
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from operator import itemgetter
from typing import IO

from jetspark.core.files import write_atomically_with
from jetspark.processors.tfidf.index import TsvLines, write_tsv

MAX_PROCESSES = 4
"""Formatting processes at most (each takes a core; the merge is one more reader)."""

Entries = Iterable[tuple[str, Sequence[tuple[int, float]]]]
PartEntries = Callable[[int], Entries]
"""A part's `(word, postings)` entries in word order, by partition."""
Layout = list[list[tuple[str, int]]]
"""Per part formatted, its words in order with the length of each word's lines."""


def write_parts_tsv(
    path: str | os.PathLike[str],
    documents: Sequence[str],
    part_entries: PartEntries,
    partitions: Sequence[int],
    processes: int | None = None,
) -> None:
    """Writes the TSV export of the parts `partitions` (each sorted by word, `part_entries`
    reads one) atomically at `path`, as `index.write_tsv` would write their merged entries.
    `processes`: how many format the lines (default: the usable cores, at most MAX_PROCESSES).
    """
    path = os.fspath(path)
    count = min(processes or usable_cores(), MAX_PROCESSES, len(partitions))
    if count <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        merged = heapq.merge(*map(part_entries, partitions), key=itemgetter(0))
        write_tsv(path, documents, merged)
        return
    shares = [list(partitions[n::count]) for n in range(count)]
    scratch = os.path.dirname(os.path.abspath(path))
    with tempfile.TemporaryDirectory(prefix=".jetspark-tsv-", dir=scratch) as directory:
        files = [os.path.join(directory, f"share-{n}") for n in range(count)]
        # forked, the workers start with the driver's modules imported; spawned ones would
        # import them again and run the driver's __main__ module
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(count, mp_context=context) as pool:
            layouts = list(
                pool.map(format_share, files, shares, [documents] * count, [part_entries] * count)
            )
        write_atomically_with(path, lambda out: _copy_merged(out, files, layouts))


def usable_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def format_share(
    file: str, partitions: Sequence[int], documents: Sequence[str], part_entries: PartEntries
) -> Layout:
    """Writes the lines of each of `partitions` in turn into `file`; returns the layout."""
    lines = TsvLines(documents)
    layout: Layout = []
    with open(file, "wb") as out:
        for partition in partitions:
            words = []
            for word, postings in part_entries(partition):
                block = lines.of(word, postings)
                out.write(block)
                words.append((word, len(block)))
            layout.append(words)
    return layout


def _copy_merged(out: IO[bytes], files: Sequence[str], layouts: Sequence[Layout]) -> None:
    """Copies every word's lines into `out`, all parts' words merged in order."""
    descriptors = [os.open(file, os.O_RDONLY) for file in files]
    try:
        streams = [
            _placed(descriptor, layout)
            for descriptor, layout in zip(descriptors, layouts, strict=True)
        ]
        parts = [part for stream in streams for part in stream]
        for _, descriptor, offset, length in heapq.merge(*parts, key=itemgetter(0)):
            out.write(os.pread(descriptor, length, offset))
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def _placed(descriptor: int, layout: Layout) -> list[Iterator[tuple[str, int, int, int]]]:
    """Per part of a share's file, its words as (word, file, offset, length)."""
    parts, offset = [], 0
    for words in layout:
        parts.append(_words_at(descriptor, offset, words))
        offset += sum(length for _, length in words)
    return parts


def _words_at(
    descriptor: int, offset: int, words: Sequence[tuple[str, int]]
) -> Iterator[tuple[str, int, int, int]]:
    for word, length in words:
        yield word, descriptor, offset, length
        offset += length
