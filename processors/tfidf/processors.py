"""The TF-IDF job's own processors (manual §8.2.3), written as a user of the Core API would.

`StopwordsP`, `TokenizeP` and `TfIdfP` are the manual's custom processors, `TfP` the manual's
tf aggregation with its results grouped by word before they cross the cluster; `DocLines` and
`DocWords` are the functions of the library's `flat_map_using_context_p` that read documents
(non-cooperative: file reads block).
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections import _count_elements  # type: ignore[attr-defined]
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.inbox import Inbox
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.core.traverser import Traverser, traverse_iterable
from jetspark.processors.emission import ResumableEmission
from jetspark.processors.functions import drain
from jetspark.processors.sources import SourceP
from jetspark.processors.tfidf.corpus import open_document
from jetspark.processors.tfidf.tokenize import ASCII, Tokenizer

DocLine = tuple[int, str]
"""(doc id, text of whole words): what doc-lines emits."""
TfEntry = tuple[tuple[int, str], int]
"""((doc id, word), term frequency): what tf counts and saves to its snapshot."""
WordPostings = tuple[str, list[int]]
"""(word, [doc id, tf, doc id, tf, ...]): what tf emits, the postings of its documents."""
IndexEntry = tuple[str, list[tuple[int, float]]]
"""(word, [(doc id, TF-IDF score), ...]): what tf-idf emits."""

_STOPWORDS = broadcast_key("stopwords")
_DOCUMENT_COUNT = broadcast_key("document_count")


class StopwordsP(SourceP):
    """stopword-source: emits the stopword set as one item, from `complete()`.

    A one-item source of the library (`SourceP`): its snapshot is its read position, so a
    restored job does not send the set twice.
    """

    def __init__(self, stopwords: Iterable[str]) -> None:
        stopword_set = frozenset(stopwords)
        super().__init__(lambda context: (stopword_set,))


class TokenizeP(AbstractProcessor):
    """tokenize: ordinal 0 is the stopword set, ordinal 1 `(doc id, line)` items, each turned
    into a `(doc id, word)` item per word that is not a stopword.

    The stopword edge must have priority -1: a line arriving before the set is an error.
    Snapshot: the stopword set, under a broadcast key (every restored processor needs it).
    """

    def __init__(self, kind: str = ASCII) -> None:
        self._tokenizer: Tokenizer | None = None
        self._kind = kind
        self._flat_mapper = self.flat_mapper(self._doc_words)

    def _doc_words(self, doc_line: DocLine) -> list[tuple[int, str]]:
        if self._tokenizer is None:
            raise RuntimeError(
                "tokenize received a line before the stopword set: the stopword edge must "
                "have a lower priority number (-1) than the lines' edge"
            )
        doc_id = doc_line[0]
        return [(doc_id, word) for word in self._tokenizer.words(doc_line[1])]

    def try_process0(self, item: Any) -> bool:
        self._tokenizer = Tokenizer(self._kind, frozenset(item))
        return True

    def try_process1(self, item: Any) -> bool:
        return self._flat_mapper.try_process(item)

    def save_to_snapshot(self) -> bool:
        if self._tokenizer is None:
            return True
        return self.try_emit_to_snapshot(_STOPWORDS, sorted(self._tokenizer.stopwords))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if key != _STOPWORDS:
            raise ValueError(f"unexpected snapshot entry {key!r}")
        self.try_process0(value)


class TfP(AbstractProcessor):
    """tf: counts its `(doc id, word)` items; on completion emits, per word, the term
    frequencies it counted as one `(word, [doc id, tf, doc id, tf, ...])` item.

    The manual's tf is a keyed counting aggregation emitting one `((doc id, word), tf)` entry
    per posting; grouping them by word here, before the distributed edge to tf-idf, sends one
    item per word and processor across the cluster instead (the first stage of a two-stage
    aggregation). Snapshot: each count under its `(doc id, word)` key, the key of the inbound
    edge's partitioning; during completion, the postings not emitted yet, in the same form.
    """

    def __init__(self) -> None:
        self._counts: dict[tuple[int, str], int] = {}
        self._unemitted: list[WordPostings] | None = None
        """Once complete() started: the words' postings not emitted yet, the next one last."""
        self._snapshot = ResumableEmission(self.emit_from_traverser_to_snapshot)

    def process(self, ordinal: int, inbox: Inbox) -> None:
        _count_elements(self._counts, drain(inbox))

    def complete(self) -> bool:
        if self._unemitted is None:
            self._unemitted = list(_group_by_word(self._counts).items())
            self._counts = {}
        unemitted, offer = self._unemitted, self.outbox.offer
        while unemitted:
            if not offer(unemitted[-1]):
                return False
            unemitted.pop()
        return True

    def save_to_snapshot(self) -> bool:
        return self._snapshot.emit(self._state)

    def _state(self) -> Iterator[TfEntry]:
        yield from self._counts.items()
        for word, postings in self._unemitted or ():
            for doc_id, tf in zip(postings[::2], postings[1::2], strict=True):
                yield (doc_id, word), tf

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        self._counts[key] = self._counts.get(key, 0) + value


def _group_by_word(counts: dict[tuple[int, str], int]) -> dict[str, list[int]]:
    """`(doc id, word) -> tf` counts as `word -> [doc id, tf, doc id, tf, ...]`."""
    by_word: dict[str, list[int]] = {}
    postings_of = by_word.get
    for (doc_id, word), tf in counts.items():
        postings = postings_of(word)
        if postings is None:
            by_word[word] = [doc_id, tf]
        else:
            postings += (doc_id, tf)
    return by_word


class TfIdfP(AbstractProcessor):
    """tf-idf: ordinal 0 is the document count D, ordinal 1 tf's `(word, [doc id, tf, ...])`
    items (a word may come from several tf processors: its postings are joined).

    On completion emits `(word, [(doc id, tf * idf), ...])` per word, in word order, with
    idf = log(D / DF) (natural log; DF = the number of documents containing the word). A word
    in every document has idf 0: it is kept, with scores 0.0, as the manual's sample does. Each
    word's postings are kept as one flat list of ints, `[doc id, tf, doc id, tf, ...]`, rather
    than a list of pairs: ints are not tracked by the garbage collector, millions of pairs would
    be, and every full collection would scan them; one list per word also takes a posting with
    a single `+=` (30% faster than two appends).
    With `stopword_fraction` f, a word in more than f * D documents is a derived stopword: it
    is left out of the index and emitted as `(word, DF)` on outbound ordinal 1 instead (the
    index entries go to ordinal 0). As IDF depends only on D and the word's own DF, this equals
    removing the same stopwords before tokenizing, without a job of its own to find them.
    Snapshot: the document count under a broadcast key, each word's flat postings list under
    the word (the partitioning key of ordinal 1).
    """

    def __init__(self, stopword_fraction: float | None = None) -> None:
        self._stopword_fraction = stopword_fraction
        self._stopwords: list[tuple[str, int]] = []
        self._index_emitted = False
        self._document_count: int | None = None
        self._postings: dict[str, list[int]] = {}
        """word -> [doc id, tf, doc id, tf, ...]"""
        self._inverted_index: Traverser | None = None
        self._snapshot: Traverser | None = None

    def try_process0(self, item: Any) -> bool:
        self._document_count = item
        return True

    def process(self, ordinal: int, inbox: Inbox) -> None:
        """Term frequencies (ordinal 1) are taken a whole inbox at a time: nothing is emitted."""
        if ordinal != 1:
            super().process(ordinal, inbox)
            return
        by_word = self._postings
        postings_of = by_word.get
        for word, doc_tfs in drain(inbox):
            postings = postings_of(word)
            if postings is None:
                by_word[word] = [*doc_tfs]  # a copy: the item is the sender's
            else:
                postings += doc_tfs

    def complete(self) -> bool:
        if self._postings and self._document_count is None:
            raise RuntimeError(
                "tf-idf received term frequencies but no document count: connect doc-count to "
                "ordinal 0 with a lower priority number than tf's edge"
            )
        if self._inverted_index is None:
            words = sorted(self._postings)
            if self._stopword_fraction is not None:
                words = self._without_stopwords(words)
            self._inverted_index = traverse_iterable(map(self._to_index_entry, words))
        if self._stopword_fraction is None:
            return self.emit_from_traverser(self._inverted_index)
        if not self._index_emitted:  # one traverser at a time: a refused item is kept for it
            self._index_emitted = self.emit_from_traverser(self._inverted_index, 0)
            if not self._index_emitted:
                return False
        return self.emit_from_traverser(self._stopwords, 1)

    def _without_stopwords(self, words: list[str]) -> list[str]:
        """`words` less the derived stopwords, which are kept in `_stopwords` with their DF."""
        assert self._stopword_fraction is not None and self._document_count is not None
        limit = self._stopword_fraction * self._document_count
        kept = []
        for word in words:
            document_frequency = len(self._postings[word]) // 2
            if document_frequency > limit:
                self._stopwords.append((word, document_frequency))
            else:
                kept.append(word)
        return kept

    def _to_index_entry(self, word: str) -> IndexEntry:
        postings = self._postings[word]
        doc_ids = postings[::2]
        assert self._document_count is not None
        idf = math.log(self._document_count) - math.log(len(doc_ids))
        return word, list(zip(doc_ids, [tf * idf for tf in postings[1::2]], strict=True))

    def save_to_snapshot(self) -> bool:
        if self._snapshot is None:
            entries: list[tuple[Any, Any]] = list(self._postings.items())
            if self._document_count is not None:
                entries.append((_DOCUMENT_COUNT, self._document_count))
            self._snapshot = traverse_iterable(entries)
        if not self.emit_from_traverser_to_snapshot(self._snapshot):
            return False
        self._snapshot = None
        return True

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if key == _DOCUMENT_COUNT:
            self._document_count = value
            return
        self._postings.setdefault(key, []).extend(value)


def processor_logger(context: Context) -> logging.Logger:
    """The context object of the document readers: their processor's logger."""
    return context.logger


PIECE_CHARS = 1 << 16
"""How much of a document is read at a time: a piece is at most about twice this long."""
_LAST_NON_WORD = re.compile(r"\W(?=\w*\Z)")


def _cut(text: str) -> int:
    """Where `text` may be cut without splitting a word: just after its last line break, else
    its last space, else its last other non-word character; 0 when it has none."""
    for mark in ("\n", " "):
        at = text.rfind(mark)
        if at >= 0:
            return at + 1
    match = _LAST_NON_WORD.search(text)
    return match.end() if match else 0


def _document_pieces(logger: logging.Logger, root: str, name: str) -> Iterator[str]:
    """The text of a document in pieces of whole words, about PIECE_CHARS each, so that memory
    stays bounded even for a document that is one long line (only a single word longer than a
    piece is read whole). A piece ends after a line break where there is one, so pieces are
    usually whole lines. A file that fails to read is logged and ends early, so one bad file
    (deleted or made unreadable after the corpus was listed) does not fail the job.
    """
    pending: list[str] = []  # text read since the last cut, which holds no place to cut
    try:
        with open_document(os.path.join(root, name)) as file:
            while chunk := file.read(PIECE_CHARS):
                cut = _cut(chunk)
                if cut == 0:
                    pending.append(chunk)
                    continue
                pending.append(chunk[:cut])
                yield "".join(pending)
                pending = [chunk[cut:]]
    except OSError as error:
        logger.warning("document %r could not be read, indexed as read so far: %s", name, error)
    if rest := "".join(pending):
        yield rest


@dataclass(frozen=True)
class DocLines:
    """doc-lines: `(doc id, name)` -> `(doc id, text)` for each piece of the document: whole
    lines, up to about PIECE_CHARS at a time, a longer line cut between words."""

    root: str

    def __call__(self, logger: logging.Logger, doc: tuple[int, str]) -> Iterator[DocLine]:
        doc_id, name = doc
        for piece in _document_pieces(logger, self.root, name):
            yield doc_id, piece


@dataclass(frozen=True)
class DocWords:
    """`(doc id, name)` -> each distinct word of the document once (for document frequencies)."""

    root: str
    kind: str = ASCII

    def __call__(self, logger: logging.Logger, doc: tuple[int, str]) -> set[str]:
        tokenizer = Tokenizer(self.kind)
        words: set[str] = set()
        for piece in _document_pieces(logger, self.root, doc[1]):
            words.update(tokenizer.words(piece))
        return words
