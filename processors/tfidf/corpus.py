"""The documents of a TF-IDF job: listing a directory, the default corpus, reading a document.

A document is one regular file; its name is its path relative to the corpus directory, with `/`
separators, and its id is its position in the sorted list of names. Listing happens once, on
the driver, before any job runs: it also opens every file and reads its first KB, so files
that cannot be indexed are known (and reported) before the document count is fixed:

- a file with a NUL byte in its first KB is binary: skipped;
- a file (or subdirectory) that cannot be opened, e.g. permission denied: skipped;
- an empty file is a document without words: indexed, so it counts in D (as in Jet's sample);
- bytes that are not UTF-8 are read as U+FFFD (errors replaced), a non-word character.

The default corpus is the installed Python standard library's own source: every `*.py` file
under `sysconfig.get_paths()["stdlib"]`, leaving out installed packages (`site-packages`,
`dist-packages`), the test suites (`test`, `tests`, `idle_test`) and `__pycache__`, so the
documents are the library's modules, not third-party code or tests about them. Hidden files
and directories (a leading ".") are left out of every corpus.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from jetspark.processors.tfidf.errors import InputError

BINARY_PROBE_BYTES = 1024
"""How much of each file is read to tell text from binary."""

DEFAULT_EXCLUDED_DIRS = frozenset(
    {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}
)


@dataclass(frozen=True)
class SkippedFile:
    """A file left out of the corpus, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class Corpus:
    """The documents of one job: `documents[doc_id]` is a name relative to `root`."""

    root: Path
    documents: tuple[str, ...]
    skipped: tuple[SkippedFile, ...] = ()
    empty: int = 0
    """How many documents are empty files."""
    size: int = 0
    """The documents' total size in bytes."""

    def doc_names(self) -> dict[int, str]:
        """Doc id -> name: the content of the job's doc-source map."""
        return dict(enumerate(self.documents))


def default_corpus_dir() -> Path:
    """The installed Python standard library's directory."""
    return Path(sysconfig.get_paths()["stdlib"])


def default_corpus() -> Corpus:
    """The standard library's `*.py` modules (see the module docstring for what is left out)."""
    return scan_corpus(default_corpus_dir(), "*.py", DEFAULT_EXCLUDED_DIRS)


def scan_corpus(
    root: str | os.PathLike[str],
    pattern: str = "*",
    excluded_dirs: frozenset[str] = frozenset(),
) -> Corpus:
    """Lists the documents under `root` whose file name matches `pattern`, recursively.

    Raises InputError when `root` is not a readable directory or holds no indexable document.
    """
    directory = Path(root)
    if not directory.exists():
        raise InputError(f"the directory {str(directory)!r} does not exist")
    if not directory.is_dir():
        raise InputError(f"{str(directory)!r} is not a directory")
    if not os.access(directory, os.R_OK | os.X_OK):
        raise InputError(f"the directory {str(directory)!r} cannot be read (permission denied)")
    directory = directory.resolve()
    documents: list[str] = []
    skipped: list[SkippedFile] = []
    empty = size = 0
    for name, problem in _walk(directory, pattern, excluded_dirs):
        if problem is None:
            problem, file_size = _probe(directory / name)
        if problem is not None:
            skipped.append(SkippedFile(name, problem))
            continue
        documents.append(name)
        empty += file_size == 0
        size += file_size
    documents.sort()
    skipped.sort(key=lambda s: s.name)
    if not documents:
        what = "no readable text document" if skipped else "no document"
        raise InputError(
            f"{what} in {str(directory)!r}"
            + (f" (matching {pattern!r})" if pattern != "*" else "")
            + (f"; {describe_skipped(skipped)}" if skipped else "")
        )
    return Corpus(directory, tuple(documents), tuple(skipped), empty, size)


def _walk(
    root: Path, pattern: str, excluded_dirs: frozenset[str]
) -> Iterator[tuple[str, str | None]]:
    """(relative name, None) for each candidate file; (name, reason) for unreadable directories."""
    failures: list[OSError] = []
    for directory, dirs, files in os.walk(root, onerror=failures.append):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in excluded_dirs]
        base = Path(directory).relative_to(root)
        for file in files:
            if not file.startswith(".") and fnmatch.fnmatch(file, pattern):
                yield (base / file).as_posix(), None
    for failure in failures:
        name = Path(str(failure.filename)).relative_to(root).as_posix() + "/"
        yield name, f"unreadable directory: {failure.strerror}"


def _probe(path: Path) -> tuple[str | None, int]:
    """(None, size) for an indexable file; (reason, 0) for one to skip."""
    try:
        status = os.stat(path)
        if not stat.S_ISREG(status.st_mode):
            return "not a regular file", 0
        with open(path, "rb") as file:
            head = file.read(BINARY_PROBE_BYTES)
    except OSError as error:
        return f"unreadable: {error.strerror or error}", 0
    if b"\0" in head:
        return "binary (NUL bytes)", 0
    return None, status.st_size


def open_document(path: str | os.PathLike[str]) -> TextIO:
    """Opens a document for reading its lines: UTF-8, undecodable bytes replaced by U+FFFD."""
    return open(path, encoding="utf-8", errors="replace")


def describe_skipped(skipped: tuple[SkippedFile, ...] | list[SkippedFile], shown: int = 5) -> str:
    """ "skipped N files: a (reason), b (reason), ... and K more" for reports."""
    if not skipped:
        return "skipped no file"
    names = ", ".join(f"{s.name} ({s.reason})" for s in skipped[:shown])
    more = f" and {len(skipped) - shown} more" if len(skipped) > shown else ""
    noun = "file" if len(skipped) == 1 else "files"
    return f"skipped {len(skipped)} {noun}: {names}{more}"
