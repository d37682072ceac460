"""The TF-IDF DAG in the manual's shape (§8.2.3).

    doc-source (read_map_p DOCID_NAME: doc id -> name)
        --distributed broadcast--> doc-count (aggregate_p counting, local parallelism 1)
            --local broadcast, priority -1--> tf-idf:0
        --local--> doc-lines (flat_map_using_context_p, non-cooperative file reads)
            --> tokenize:1 (TokenizeP)
    stopword-source (StopwordsP) --local broadcast, priority -1--> tokenize:0
    tokenize --local partitioned by (doc id, word)--> tf (TfP: counting by (doc id, word))
        --distributed partitioned by word (MurmurHash3)--> tf-idf:1 (TfIdfP)
        --local partitioned by word--> sink (write_map_p INVERTED_INDEX: word -> [(doc id,
        score), ...], or the part files of a partitioned index)

doc-count sees every document on every member (distributed broadcast in, one processor per
member) and hands D to the member's tf-idf processors (local broadcast out). tf needs only local
data because doc-source partitions the documents by doc id and a document's lines stay on its
member; tf-idf groups the term frequencies of each word, cluster-wide, by word. One change
from the manual: tf sends its counts grouped by word, `(word, [doc id, tf, ...])`, so one item
per word and tf processor crosses the cluster rather than one per posting.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

from jetspark.core.dag import DAG
from jetspark.edges import between, from_
from jetspark.partitioning import HASH_CODE
from jetspark.processors import (
    ContextFactory,
    aggregate_p,
    entry_key,
    flat_map_using_context_p,
    read_map_p,
    whole_item,
    write_map_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.sources import SourceFn
from jetspark.processors.tfidf.processors import (
    DocLines,
    StopwordsP,
    TfIdfP,
    TfP,
    TokenizeP,
    WordPostings,
    processor_logger,
)
from jetspark.processors.tfidf.tokenize import ASCII

DOCID_NAME = "docId_name"
"""The engine map doc-source reads: doc id -> document name (relative to the corpus root)."""
INVERTED_INDEX = "inverted-index"
"""The engine map the sink fills: word -> [(doc id, TF-IDF score), ...]."""
DERIVED_STOPWORDS = "tfidf-derived-stopwords"
"""The engine map the stopword sink fills when tf-idf derives them: word -> document frequency."""

FILE_READER = ContextFactory(processor_logger).non_cooperative()
"""The context of the document readers: the processor's logger; blocking reads, own thread."""


def word_of(word_postings: WordPostings) -> str:
    """The word of tf's `(word, [doc id, tf, ...])` items: tf-idf's partitioning key."""
    return word_postings[0]


def build_dag(
    docs_dir: str,
    stopwords: Iterable[str] = (),
    tokenizer: str = ASCII,
    sink: Any = None,
    stopword_fraction: float | None = None,
) -> DAG:
    """The TF-IDF DAG over the documents named in the DOCID_NAME map, files under `docs_dir`.

    `sink` supplies the sink vertex (default: `write_map_p(INVERTED_INDEX)`); its edge from
    tf-idf is partitioned by word, so a word partition stays on one sink processor. With
    `stopword_fraction`, tf-idf also derives the stopwords (words in more than that fraction of
    the documents), leaves them out, and a second sink puts them into the DERIVED_STOPWORDS map
    (word -> document frequency).
    """
    stopword_set = frozenset(stopwords)
    dag = DAG("tf-idf")
    stopword_source = dag.new_vertex(
        "stopword-source", SourceFn(partial(StopwordsP, stopword_set)), local_parallelism=1
    )
    doc_source = dag.new_vertex("doc-source", read_map_p(DOCID_NAME))
    doc_count = dag.new_vertex("doc-count", aggregate_p(counting()), local_parallelism=1)
    doc_lines = dag.new_vertex(
        "doc-lines", flat_map_using_context_p(FILE_READER, DocLines(str(docs_dir)))
    )
    tokenize = dag.new_vertex("tokenize", lambda: TokenizeP(tokenizer))
    tf = dag.new_vertex("tf", TfP)
    tf_idf = dag.new_vertex("tf-idf", partial(TfIdfP, stopword_fraction))
    sink = dag.new_vertex("sink", sink or write_map_p(INVERTED_INDEX))
    dag.edge(between(stopword_source, tokenize).broadcast().priority(-1))
    dag.edge(from_(doc_lines).to(tokenize, 1))
    dag.edge(between(doc_source, doc_count).distributed().broadcast())
    dag.edge(from_(doc_source, 1).to(doc_lines))
    dag.edge(between(tokenize, tf).partitioned(whole_item, HASH_CODE))
    dag.edge(between(doc_count, tf_idf).broadcast().priority(-1))
    dag.edge(from_(tf).to(tf_idf, 1).distributed().partitioned(word_of))
    dag.edge(between(tf_idf, sink).partitioned(entry_key))
    if stopword_fraction is not None:
        stopword_sink = dag.new_vertex("stopword-sink", write_map_p(DERIVED_STOPWORDS), 1)
        dag.edge(from_(tf_idf, 1).to(stopword_sink))
    return dag
