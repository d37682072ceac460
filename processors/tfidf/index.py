"""The saved inverted index: one msgpack file, written atomically, and its TSV export.

The file holds one msgpack map:

    {"format": "jetspark-tfidf-index", "version": 1,
     "root": "/abs/path/of/DOCS_DIR",
     "tokenizer": "ascii" | "unicode",
     "stopwords": ["a", "and", ...],                  sorted
     "documents": ["json/decoder.py", ...],           doc id = position, names relative to root
     "index": {"word": [[doc id, score], ...], ...}}  postings sorted by doc id

A score is TF * IDF as a float64 (IDF = ln(D / DF)); words in every document are kept with
score 0.0. Search reads the tokenizer and the stopwords from the file, so a query is tokenized
exactly as the documents were. The file is written to a temporary file in the target's
directory and renamed over the target, so a reader never sees a half-written index.

`--tsv FILE` writes one `word<TAB>document<TAB>score` line per posting, sorted by word and
document, the score in Python's shortest round-trip form. In a document name, backslash, tab,
newline and carriage return are written as `\\\\`, `\\t`, `\\n`, `\\r` (words never contain them).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from jetspark.core.files import write_atomically, write_atomically_with
from jetspark.processors.tfidf.errors import InputError
from jetspark.processors.tfidf.tokenize import ASCII, TOKENIZERS

FORMAT = "jetspark-tfidf-index"
VERSION = 1
DEFAULT_INDEX_PATH = "jetspark-index"
"""Where `jetspark tfidf` saves and `jetspark search` reads, relative to the working directory:
a partitioned index (a directory, `parts.py`); a path ending in SINGLE_FILE_SUFFIX is one file."""
SINGLE_FILE_SUFFIX = ".msgpack"
MANIFEST = "MANIFEST.msgpack"
"""The manifest of a partitioned index directory."""

_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


@dataclass
class TfIdfIndex:
    """An inverted index: word -> [(doc id, TF-IDF score), ...], and what it was built from."""

    documents: tuple[str, ...]
    words: Mapping[str, Sequence[tuple[int, float]]]
    stopwords: frozenset[str] = field(default_factory=frozenset)
    tokenizer: str = ASCII
    root: str = ""

    @property
    def posting_count(self) -> int:
        """The number of (word, document) pairs."""
        return sum(map(len, self.words.values()))

    @property
    def word_count(self) -> int:
        """The number of distinct words."""
        return len(self.words)

    def postings(self, word: str) -> Sequence[tuple[int, float]]:
        """The `(doc id, score)` postings of `word` (empty if absent)."""
        return self.words.get(word, ())

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the index to `path` atomically (temporary file + rename)."""
        document = {
            "format": FORMAT,
            "version": VERSION,
            "root": self.root,
            "tokenizer": self.tokenizer,
            "stopwords": sorted(self.stopwords),
            "documents": list(self.documents),
            "index": {word: sorted(postings) for word, postings in sorted(self.words.items())},
        }
        write_atomically(os.fspath(path), msgpack.packb(document, use_bin_type=True))

    def write_tsv(self, path: str | os.PathLike[str]) -> None:
        """Writes `word<TAB>document<TAB>score` lines to `path` atomically."""
        entries = ((word, self.words[word]) for word in sorted(self.words))
        write_tsv(path, self.documents, entries)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TfIdfIndex:
        """Reads an index saved by `save`; InputError for a missing or foreign file."""
        try:
            with open(path, "rb") as file:
                document = msgpack.unpackb(file.read(), raw=False, use_list=False)
        except OSError as error:
            raise InputError(
                f"cannot read the index {str(path)!r}: {error.strerror or error} "
                "(build one with `jetspark tfidf`)"
            ) from error
        except (ValueError, msgpack.UnpackException) as error:
            raise InputError(f"{str(path)!r} is not a jetspark index (not msgpack)") from error
        return cls._from_document(document, str(path))

    @classmethod
    def _from_document(cls, document: Any, path: str) -> TfIdfIndex:
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise InputError(f"{path!r} is not a jetspark TF-IDF index")
        if document.get("version") != VERSION:
            raise InputError(
                f"{path!r} is an index of version {document.get('version')!r}; this jetspark "
                f"reads version {VERSION}: rebuild it with `jetspark tfidf`"
            )
        if document.get("tokenizer") not in TOKENIZERS:
            raise InputError(f"{path!r} names an unknown tokenizer {document.get('tokenizer')!r}")
        return cls(
            tuple(document["documents"]),
            document["index"],
            frozenset(document["stopwords"]),
            document["tokenizer"],
            document["root"],
        )


def write_tsv(
    path: str | os.PathLike[str],
    documents: Sequence[str],
    entries: Iterable[tuple[str, Sequence[tuple[int, float]]]],
) -> None:
    """Writes the TSV export of `entries` (word, postings), given in word order, atomically."""
    lines = TsvLines(documents)
    blocks = (lines.of(word, postings) for word, postings in entries)
    write_atomically_with(os.fspath(path), lambda file: file.writelines(blocks))


class TsvLines:
    """The TSV export's lines, one word at a time, for an index of `documents`.

    A word's lines are sorted by document name and made one string. Documents are listed in
    name order, so unless escaping a tab, line break or backslash reorders their names,
    sorting the postings by doc id (in C) gives that order.
    """

    def __init__(self, documents: Sequence[str]) -> None:
        self._names = [name.translate(_TSV_ESCAPES) for name in documents]
        in_id_order = all(a <= b for a, b in itertools.pairwise(self._names))
        self._by_name = None if in_id_order else self._name_of

    def _name_of(self, posting: tuple[int, float]) -> str:
        return self._names[posting[0]]

    def of(self, word: str, postings: Iterable[tuple[int, float]]) -> bytes:
        """The lines of `word` and its postings, encoded as UTF-8."""
        names, prefix = self._names, f"{word}\t"
        ordered = sorted(postings, key=self._by_name)
        return "".join([f"{prefix}{names[d]}\t{score!r}\n" for d, score in ordered]).encode()


def check_writable(path: str | os.PathLike[str]) -> None:
    """Raises InputError unless a file can be written at `path` (checked before a long job)."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) and not os.path.isfile(os.path.join(path, MANIFEST)):
        raise InputError(f"cannot write {str(path)!r}: it is a directory (and not an index)")
    if not os.path.isdir(directory):
        raise InputError(f"cannot write {str(path)!r}: the directory {directory!r} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {str(path)!r}: the directory {directory!r} is read-only")
