"""The partitioned inverted index: a directory of part files written by the job's tasks.

The single msgpack file (`index.py`) passes every posting through the driver; this layout
never does. The TF-IDF job's sink writes, in each task, one part file per word partition it
owns (`partition_id(word, P)` with the job's partition count P: the same function that routes
words to tf-idf, so each part has exactly one writer). The driver then writes the manifest:

    DIR/MANIFEST.msgpack  {"format": "jetspark-tfidf-index", "version": 4, "root", "tokenizer",
                           "stopwords", "documents", "partitions": P,
                           "words": count, "postings": count,
                           "parts": [[partition, bytes, CRC-32], ...],
                           "checksum": SHA-256 (hex) of the map before it, packed}
    DIR/part-00042.msgpack  a stream of msgpack arrays [word, [[doc id, score], ...]], sorted
                           by word, postings sorted by doc id

The manifest lists every part written (a partition no word falls into has none), with its size
and CRC-32, so a part that is missing or damaged is an error naming it, never a word that
seems absent; the manifest itself carries a checksum, so an edited or damaged manifest (a
changed partition count would send every word to the wrong part) is named as such too.

A part is written to a hidden temporary file (opened exclusively, never through a symlink) and
renamed when its task completes, so a retried task replaces it whole. The job writes into a
staging directory beside DIR, which replaces DIR only when the job has succeeded. `search`
opens only the parts that hold the query's words; the TSV export merges the sorted parts, so
neither holds more than one part's word at a time. On a cluster, DIR must be on a file system
every executor writes to at the same path.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import shutil
import socket
import uuid
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import msgpack

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.files import create_exclusive
from jetspark.core.outbox import Outbox
from jetspark.partitioning import partition_id
from jetspark.processors.tfidf.errors import InputError
from jetspark.processors.tfidf.index import (
    FORMAT,
    MANIFEST,
    SINGLE_FILE_SUFFIX,
    TfIdfIndex,
)
from jetspark.processors.tfidf.tokenize import ASCII, TOKENIZERS
from jetspark.processors.tfidf.tsv import write_parts_tsv

VERSION = 4
PART_STATS = "tfidf-index-parts"
"""The engine map the sink fills: partition -> (words, postings, bytes, CRC-32) of the part
it wrote."""

Postings = Sequence[tuple[int, float]]


def part_name(partition: int) -> str:
    """The file name of a partition's part."""
    return f"part-{partition:05d}.msgpack"


def open_exclusive(path: str) -> IO[bytes]:
    """A new file at `path` for writing: refused if anything (a symlink too) is there already."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    return os.fdopen(os.open(path, flags, 0o644), "wb")


@dataclass
class _Part:
    file: IO[bytes]
    temp_path: str
    words: int = 0
    postings: int = 0
    size: int = 0
    crc: int = 0


class WriteIndexPartsP(AbstractProcessor):
    """The sink of the partitioned index: `(word, postings)` items into their partition's part
    file under `directory`; on completion publishes the parts and records each one's counts in
    the engine map PART_STATS. Its inbound edge must keep a partition on one processor (a
    partitioned edge by word) and deliver each partition's words in sorted order (TfIdfP does).
    """

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._parts: dict[int, _Part] = {}
        self._packer = msgpack.Packer(use_bin_type=True)

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        if not os.path.isdir(self._directory):
            raise FileNotFoundError(
                f"the index directory {self._directory!r} is not on {socket.gethostname()}: "
                "the sink's tasks write the index's parts there, so on a cluster it must be a "
                "directory every executor reaches at the same path (shared storage)"
            )

    def try_process0(self, item: Any) -> bool:
        word, postings = item
        partition = partition_id(word, self.context.partition_count)
        part = self._parts.get(partition)
        if part is None:
            part = self._parts[partition] = self._open(partition)
        data = self._packer.pack((word, sorted(postings)))
        part.file.write(data)
        part.size += len(data)
        part.crc = zlib.crc32(data, part.crc)
        part.words += 1
        part.postings += len(postings)
        return True

    def _open(self, partition: int) -> _Part:
        temp, file = create_exclusive(self._directory, f".{part_name(partition)}", 0o644)
        return _Part(file, temp)

    def complete(self) -> bool:
        stats = self.context.stores.get_map(PART_STATS)
        for partition, part in sorted(self._parts.items()):
            part.file.close()
            os.replace(part.temp_path, os.path.join(self._directory, part_name(partition)))
            stats[partition] = (part.words, part.postings, part.size, part.crc)
        self._parts.clear()
        return True

    def close(self) -> None:
        for part in self._parts.values():  # the job failed before complete(): nothing published
            part.file.close()
            if os.path.exists(part.temp_path):
                os.unlink(part.temp_path)


@dataclass(frozen=True)
class WriteIndexParts:
    """The processor factory of the sink (picklable into Spark tasks)."""

    directory: str

    def __call__(self) -> WriteIndexPartsP:
        return WriteIndexPartsP(self.directory)


def staging_directory(path: str) -> str:
    """A new, empty directory beside `path` for a job to write its parts into."""
    parent, name = os.path.split(os.path.abspath(path))
    staging = os.path.join(parent, f".{name}.{uuid.uuid4().hex}.tmp")
    os.mkdir(staging, 0o755)
    return staging


def publish(staging: str, path: str, manifest: dict[str, Any]) -> None:
    """Writes the manifest into `staging` and puts `staging` in the place of `path`."""
    content = {"format": FORMAT, "version": VERSION, **manifest}
    with open_exclusive(os.path.join(staging, MANIFEST)) as file:
        file.write(msgpack.packb({**content, "checksum": _checksum(content)}))
        file.flush()
        os.fsync(file.fileno())
    old = None
    if os.path.isdir(path):
        old = f"{staging}.old"
        os.rename(path, old)
    os.rename(staging, path)
    if old is not None:
        shutil.rmtree(old)


def is_single_file(path: str | os.PathLike[str]) -> bool:
    """True when an index at `path` is (to be) the single msgpack file, not a directory."""
    return os.fspath(path).endswith(SINGLE_FILE_SUFFIX) and not os.path.isdir(path)


def open_index(path: str | os.PathLike[str]) -> TfIdfIndex | PartitionedIndex:
    """The index at `path`: a partitioned index directory or a single file."""
    if os.path.isdir(path):
        return PartitionedIndex.load(path)
    return TfIdfIndex.load(path)


@dataclass
class PartitionedIndex:
    """A partitioned index on disk; postings are read part by part, on demand."""

    path: str
    documents: tuple[str, ...]
    stopwords: frozenset[str] = field(default_factory=frozenset)
    tokenizer: str = ASCII
    root: str = ""
    partitions: int = 271
    word_count: int = 0
    posting_count: int = 0
    parts: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Partition -> (bytes, CRC-32) of its part, for every part the job wrote."""

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PartitionedIndex:
        """Reads the manifest of the index in directory `path`; InputError if it is not one."""
        try:
            with open(os.path.join(path, MANIFEST), "rb") as file:
                manifest = msgpack.unpackb(file.read(), strict_map_key=False, use_list=False)
        except OSError as error:
            raise InputError(
                f"cannot read the index {str(path)!r}: {error.strerror or error}"
            ) from error
        except (ValueError, msgpack.UnpackException) as error:
            raise _damaged(path, f"its {MANIFEST} is not msgpack ({error})") from error
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise InputError(f"{str(path)!r} is not a jetspark TF-IDF index")
        if manifest.get("version") != VERSION:
            raise InputError(
                f"{str(path)!r} is an index of version {manifest.get('version')!r}, and this "
                f"jetspark reads version {VERSION}: rebuild it with `jetspark tfidf`"
            )
        checksum = manifest.pop("checksum", None)
        if checksum != _checksum(manifest):
            raise _damaged(path, f"its {MANIFEST} does not match its checksum (edited, or damaged)")
        if manifest.get("tokenizer") not in TOKENIZERS:
            raise InputError(
                f"{str(path)!r} is an index this jetspark cannot read (tokenizer "
                f"{manifest.get('tokenizer')!r}): rebuild it with `jetspark tfidf`"
            )
        return cls(
            os.fspath(path),
            tuple(manifest["documents"]),
            frozenset(manifest["stopwords"]),
            manifest["tokenizer"],
            manifest["root"],
            manifest["partitions"],
            manifest["words"],
            manifest["postings"],
            {partition: (size, crc) for partition, size, crc in manifest["parts"]},
        )

    def postings(self, word: str) -> Postings:
        """The `(doc id, score)` postings of `word`, sorted by doc id (empty if absent): reads
        only the word's part."""
        for entry_word, postings in self._part_entries(partition_id(word, self.partitions)):
            if entry_word == word:
                return postings
            if entry_word > word:
                break
        return ()

    def entries(self) -> Iterator[tuple[str, Postings]]:
        """Every `(word, postings)` in word order, merged from the sorted parts."""
        parts = [self._part_entries(p) for p in range(self.partitions)]
        return heapq.merge(*parts, key=lambda entry: entry[0])

    def write_tsv(self, path: str | os.PathLike[str]) -> None:
        """Writes `word<TAB>document<TAB>score` lines to `path` atomically, the parts' lines
        formatted in parallel (`tsv.write_parts_tsv`)."""
        write_parts_tsv(path, self.documents, self._part_entries, sorted(self.parts))

    def _part_entries(self, partition: int) -> Iterator[tuple[str, Postings]]:
        """The entries of a partition's part, once its size and CRC-32 are found to match the
        manifest (the file is read twice, a block at a time: never held whole)."""
        if partition not in self.parts:  # no word of the corpus falls into this partition
            return
        name = part_name(partition)
        path = os.path.join(self.path, name)
        size, crc = self.parts[partition]
        try:
            file = open(path, "rb")  # noqa: SIM115 (closed below, around a generator's yields)
        except OSError as error:
            raise _damaged(
                self.path, f"its part {name} cannot be read ({error.strerror})"
            ) from error
        with file:
            found_size, found_crc = 0, 0
            while block := file.read(1 << 20):
                found_size += len(block)
                found_crc = zlib.crc32(block, found_crc)
            if (found_size, found_crc) != (size, crc):
                raise _damaged(
                    self.path,
                    f"its part {name} holds {found_size} bytes of CRC-32 {found_crc:08x}, where "
                    f"the manifest lists {size} bytes of CRC-32 {crc:08x}",
                )
            file.seek(0)
            try:
                yield from msgpack.Unpacker(file, use_list=False, strict_map_key=False)
            except (ValueError, msgpack.UnpackException) as error:
                raise _damaged(self.path, f"its part {name} is not msgpack ({error})") from error


def _damaged(path: str | os.PathLike[str], problem: str) -> InputError:
    """The error saying the index at `path` is damaged: `problem`."""
    return InputError(
        f"the index {os.fspath(path)!r} is damaged: {problem}; rebuild the index with "
        "`jetspark tfidf`"
    )


def _checksum(manifest: dict[str, Any]) -> str:
    """The SHA-256, in hex, of the manifest's map packed (without its checksum)."""
    return hashlib.sha256(msgpack.packb(manifest)).hexdigest()


def manifest_of(
    documents: Iterable[str],
    stopwords: Iterable[str],
    tokenizer: str,
    root: str,
    partitions: int,
    stats: dict[int, tuple[int, int, int, int]],
) -> dict[str, Any]:
    """The manifest's content for a job's parts (`stats`: partition -> (words, postings, bytes,
    CRC-32))."""
    return {
        "root": root,
        "tokenizer": tokenizer,
        "stopwords": sorted(stopwords),
        "documents": list(documents),
        "partitions": partitions,
        "words": sum(words for words, _, _, _ in stats.values()),
        "postings": sum(postings for _, postings, _, _ in stats.values()),
        "parts": [[partition, size, crc] for partition, (_, _, size, crc) in sorted(stats.items())],
    }
