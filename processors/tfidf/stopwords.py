"""Stopwords: read from a file, or derived from the corpus by a small job of our own.

A derived stopword is a word whose document frequency exceeds a threshold: it occurs in more
than `threshold` (a fraction) of the documents. Such words filter out almost nothing at search
time and carry the longest document lists, which is why the manual's sample removes its stop
list before indexing. The derivation is a jetspark DAG in the shape of word count:

    doc-source (read_map_p DOCID_NAME) --> doc-words (each distinct word of a document once;
        non-cooperative file reads) --local partitioned--> df-accumulate (accumulate_by_key_p)
        --distributed partitioned--> df-combine (combine_by_key_p) --> frequent (filter_p)
        --> sink (write_map_p STOPWORDS: word -> document frequency)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from jetspark.core.dag import DAG
from jetspark.edges import between
from jetspark.partitioning import HASH_CODE
from jetspark.processors import (
    accumulate_by_key_p,
    combine_by_key_p,
    entry,
    entry_key,
    filter_p,
    flat_map_using_context_p,
    read_map_p,
    whole_item,
    write_map_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.tfidf.corpus import Corpus
from jetspark.processors.tfidf.dag import DOCID_NAME, FILE_READER
from jetspark.processors.tfidf.errors import InputError
from jetspark.processors.tfidf.jobs import DEFAULT_THRESHOLD, Engine, Wait, join, run_over_corpus
from jetspark.processors.tfidf.processors import DocWords
from jetspark.processors.tfidf.tokenize import ASCII

STOPWORDS = "derived-stopwords"
"""The engine map the derivation's sink fills: stopword -> document frequency."""


@dataclass(frozen=True)
class MoreFrequentThan:
    """Keeps the `(word, document frequency)` entries whose frequency exceeds `limit`."""

    limit: float

    def __call__(self, word_df: tuple[str, int]) -> bool:
        return word_df[1] > self.limit


def build_stopwords_dag(
    docs_dir: str, document_count: int, threshold: float = DEFAULT_THRESHOLD, tokenizer: str = ASCII
) -> DAG:
    """The DAG deriving the stopwords of the DOCID_NAME documents under `docs_dir`."""
    dag = DAG("stopwords")
    doc_source = dag.new_vertex("doc-source", read_map_p(DOCID_NAME))
    doc_words = dag.new_vertex(
        "doc-words", flat_map_using_context_p(FILE_READER, DocWords(str(docs_dir), tokenizer))
    )
    accumulate = dag.new_vertex("df-accumulate", accumulate_by_key_p([whole_item], counting()))
    combine = dag.new_vertex("df-combine", combine_by_key_p(counting(), entry))
    frequent = dag.new_vertex("frequent", filter_p(MoreFrequentThan(threshold * document_count)))
    sink = dag.new_vertex("sink", write_map_p(STOPWORDS))
    dag.edge(between(doc_source, doc_words))
    dag.edge(between(doc_words, accumulate).partitioned(whole_item, HASH_CODE))
    dag.edge(between(accumulate, combine).distributed().partitioned(entry_key))
    dag.edge(between(combine, frequent))
    dag.edge(between(frequent, sink))
    return dag


def derive_stopwords(
    engine: Engine,
    corpus: Corpus,
    threshold: float = DEFAULT_THRESHOLD,
    tokenizer: str = ASCII,
    wait: Wait = join,
) -> frozenset[str]:
    """The words occurring in more than `threshold` of the documents of `corpus`."""
    if not 0 <= threshold <= 1:
        raise InputError(f"the stopword threshold must be between 0 and 1, got {threshold}")
    dag = build_stopwords_dag(str(corpus.root), len(corpus.documents), threshold, tokenizer)
    return frozenset(run_over_corpus(engine, corpus, dag, STOPWORDS, wait))


def load_stopwords(path: str | os.PathLike[str]) -> frozenset[str]:
    """The stopwords of a UTF-8 file, one a line (blank lines ignored, lowercased as tokens are)."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as file:
            return frozenset(word for line in file if (word := line.strip().lower()))
    except OSError as error:
        raise InputError(
            f"cannot read the stopwords file {str(path)!r}: {error.strerror or error}"
        ) from error
