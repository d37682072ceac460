"""The inverted TF-IDF index, the advanced batch DAG of manual §8.2.3.

    doc-source (read_map_p: doc id -> file name) --0--> doc-count (aggregate_p, distributed
        broadcast in, local broadcast out, priority -1 into tf-idf)
    doc-source --1--> doc-lines (flat_map_using_context_p, non-cooperative file reads)
    stopword-source (StopwordsP) --broadcast, priority -1--> tokenize:0
    doc-lines --> tokenize:1 (TokenizeP) --local partitioned--> tf (aggregate_by_key_p)
    tf --distributed partitioned by word--> tf-idf:1 (TfIdfP) --> sink (write_map_p)

The sink's map holds, per word, the list of (doc id, TF-IDF score) of the documents that
contain it. Run it with `python examples/tfidf_dag.py`: it writes a few small books and a
stopword file to a temporary directory, builds the index and searches it.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jetspark.core import DAG, AbstractProcessor, JobConfig, LocalEngine
from jetspark.core.traversers import lazy
from jetspark.edges import between, from_
from jetspark.partitioning import HASH_CODE
from jetspark.processors import (
    ContextFactory,
    aggregate_by_key_p,
    aggregate_p,
    entry,
    flat_map_using_context_p,
    read_map_p,
    whole_item,
    write_map_p,
)
from jetspark.processors.aggregate import counting

DOCID_NAME = "docId_name"
INVERTED_INDEX = "inverted-index"
_DELIMITER = re.compile(r"\W+")


def tokens(line: str) -> Iterator[str]:
    """The lowercase words of a line."""
    return (word for word in _DELIMITER.split(line.lower()) if word)


def read_lines(path: Path) -> list[str]:
    """The lines of a text file."""
    return path.read_text(encoding="utf-8").splitlines()


class StopwordsP(AbstractProcessor):
    """A source emitting one item: the set of words in the stopwords file."""

    def __init__(self, stopwords_file: str) -> None:
        self._stopwords_file = stopwords_file

    def complete(self) -> bool:
        return self.try_emit(frozenset(read_lines(Path(self._stopwords_file))))


class TokenizeP(AbstractProcessor):
    """Ordinal 0: the stopword set; ordinal 1: (doc id, line) -> (doc id, word) per word."""

    def __init__(self) -> None:
        self._stopwords: frozenset[str] = frozenset()
        self._flat_mapper = self.flat_mapper(
            lambda doc_line: (
                (doc_line[0], word) for word in tokens(doc_line[1]) if word not in self._stopwords
            )
        )

    def try_process0(self, item: Any) -> bool:
        self._stopwords = item
        return True

    def try_process1(self, item: Any) -> bool:
        return self._flat_mapper.try_process(item)


class TfIdfP(AbstractProcessor):
    """Ordinal 0: the document count; ordinal 1: ((doc id, word), tf) entries. On completion
    emits (word, [(doc id, tf * idf), ...]) with idf = log(document count / document frequency).
    """

    def __init__(self) -> None:
        self._log_doc_count = 0.0
        self._word_doc_tf: dict[str, list[tuple[int, int]]] = {}
        self._inverted_index = lazy(lambda: map(self._to_index_entry, self._word_doc_tf.items()))

    def try_process0(self, item: Any) -> bool:
        self._log_doc_count = math.log(item)
        return True

    def try_process1(self, item: Any) -> bool:
        (doc_id, word), tf = item
        self._word_doc_tf.setdefault(word, []).append((doc_id, tf))
        return True

    def complete(self) -> bool:
        return self.emit_from_traverser(self._inverted_index)

    def _to_index_entry(
        self, word_doc_tfs: tuple[str, list[tuple[int, int]]]
    ) -> tuple[str, list[tuple[int, float]]]:
        word, doc_tfs = word_doc_tfs
        idf = self._log_doc_count - math.log(len(doc_tfs))
        return word, [(doc_id, tf * idf) for doc_id, tf in doc_tfs]


def open_nothing(context: object) -> None:
    """doc-lines needs no context object: the factory only makes its processors non-cooperative."""


class DocLines:
    """(doc id, file name) -> (doc id, line) for each line of the file in `books_dir`."""

    def __init__(self, books_dir: str) -> None:
        self.books_dir = books_dir

    def __call__(self, context: None, doc: tuple[int, str]) -> Iterator[tuple[int, str]]:
        doc_id, name = doc
        return ((doc_id, line) for line in read_lines(Path(self.books_dir) / name))


def word_of(tf_entry: tuple[tuple[int, str], int]) -> str:
    """The word of a ((doc id, word), tf) entry: tf-idf's partitioning key."""
    return tf_entry[0][1]


def build_dag(books_dir: str, stopwords_file: str) -> DAG:
    """The TF-IDF DAG over the documents named in the DOCID_NAME map, files in `books_dir`."""
    dag = DAG("tf-idf")
    stopword_source = dag.new_vertex("stopword-source", lambda: StopwordsP(stopwords_file))
    doc_source = dag.new_vertex("doc-source", read_map_p(DOCID_NAME))
    doc_count = dag.new_vertex("doc-count", aggregate_p(counting()), local_parallelism=1)
    doc_lines = dag.new_vertex(
        "doc-lines",
        flat_map_using_context_p(
            ContextFactory(open_nothing).non_cooperative(), DocLines(books_dir)
        ),
    )
    tokenize = dag.new_vertex("tokenize", TokenizeP)
    tf = dag.new_vertex("tf", aggregate_by_key_p([whole_item], counting(), entry))
    tf_idf = dag.new_vertex("tf-idf", TfIdfP)
    sink = dag.new_vertex("sink", write_map_p(INVERTED_INDEX))
    dag.edge(between(stopword_source, tokenize).broadcast().priority(-1))
    dag.edge(between(doc_source, doc_count).distributed().broadcast())
    dag.edge(from_(doc_source, 1).to(doc_lines))
    dag.edge(from_(doc_lines).to(tokenize, 1))
    dag.edge(between(tokenize, tf).partitioned(whole_item, HASH_CODE))
    dag.edge(between(doc_count, tf_idf).broadcast().priority(-1))
    dag.edge(from_(tf).to(tf_idf, 1).distributed().partitioned(word_of))
    dag.edge(between(tf_idf, sink))
    return dag


BOOKS = {
    "jet.txt": "The jet engine burns fuel.\nA jet flies fast and the jet is loud.",
    "spark.txt": "A spark lights the fuel.\nSpark clusters process data fast.",
    "stream.txt": "A stream of events flows.\nThe jet processes the stream of events.",
    "batch.txt": "A batch job reads data.\nThe batch ends and the data rests.",
}
STOPWORDS = ["the", "a", "of", "and", "is"]


def write_corpus(directory: Path) -> tuple[dict[int, str], Path]:
    """Writes BOOKS and the stopword file; returns the doc id -> file name map and its path."""
    for name, text in BOOKS.items():
        (directory / name).write_text(text + "\n", encoding="utf-8")
    stopwords_file = directory / "stopwords.txt"
    stopwords_file.write_text("\n".join(STOPWORDS) + "\n", encoding="utf-8")
    return dict(enumerate(sorted(BOOKS))), stopwords_file


def expected_index(
    doc_names: dict[int, str], books_dir: Path
) -> dict[str, list[tuple[int, float]]]:
    """The inverted index computed in plain Python (the manual's Java Streams version)."""
    tf: dict[tuple[int, str], int] = {}
    for doc_id, name in doc_names.items():
        for line in read_lines(books_dir / name):
            for word in tokens(line):
                if word not in STOPWORDS:
                    tf[doc_id, word] = tf.get((doc_id, word), 0) + 1
    by_word: dict[str, list[tuple[int, int]]] = {}
    for (doc_id, word), count in tf.items():
        by_word.setdefault(word, []).append((doc_id, count))
    log_doc_count = math.log(len(doc_names))
    return {
        word: sorted((d, n * (log_doc_count - math.log(len(docs)))) for d, n in docs)
        for word, docs in by_word.items()
    }


def search(index: dict[str, list[tuple[int, float]]], phrase: str) -> list[tuple[int, float]]:
    """The documents containing every word of `phrase` (stopwords ignored), best score first."""
    words = [word for word in tokens(phrase) if word not in STOPWORDS]
    scores: dict[int, float] = {}
    for position, word in enumerate(words):
        doc_scores = dict(index.get(word, []))
        if position:
            scores = {d: s + doc_scores[d] for d, s in scores.items() if d in doc_scores}
        else:
            scores = doc_scores
    return sorted(scores.items(), key=lambda ds: -ds[1])


def main() -> None:
    """Builds the index of a small generated corpus on a two-member LocalEngine and searches it."""
    with tempfile.TemporaryDirectory(prefix="tfidf-") as books_dir:
        doc_names, stopwords_file = write_corpus(Path(books_dir))
        engine = LocalEngine(members=2, default_local_parallelism=2)
        engine.get_map(DOCID_NAME).update(doc_names)
        dag = build_dag(books_dir, str(stopwords_file))
        engine.new_job(dag, JobConfig(name="tf-idf")).join()
        expected = expected_index(doc_names, Path(books_dir))
    index = engine.get_map(INVERTED_INDEX)
    actual = {word: sorted(doc_scores) for word, doc_scores in index.items()}
    assert actual == expected, "the index differs from a plain Python computation"
    for phrase in ("jet fuel", "data", "stream of events"):
        hits = ", ".join(f"{doc_names[d]} ({s:.2f})" for d, s in search(index, phrase))
        print(f"{phrase!r}: {hits or 'no document'}")
    print(f"{len(index)} words indexed over {len(doc_names)} documents: match plain Python")


if __name__ == "__main__":
    main()
