"""The TF-IDF inverted index of manual §8.2.3 as a product: the DAG, its processors, the
corpus, stopwords, the saved index and search (the `jetspark tfidf` / `search` commands).

Modules: `tokenize` (the one tokenizer), `corpus` (listing and reading documents),
`processors` (StopwordsP, TokenizeP, TfP, TfIdfP and the document readers), `dag` (the
manual's DAG), `stopwords` (the stopword file or the derivation job), `jobs` (running them on
an engine), `index` (the single msgpack file and TSV export), `parts` (the partitioned index
the tasks write), `search` (the manual's search).
"""

from __future__ import annotations

from jetspark.processors.tfidf.corpus import (
    Corpus,
    SkippedFile,
    default_corpus,
    default_corpus_dir,
    describe_skipped,
    scan_corpus,
)
from jetspark.processors.tfidf.dag import DOCID_NAME, INVERTED_INDEX, build_dag
from jetspark.processors.tfidf.errors import InputError
from jetspark.processors.tfidf.index import DEFAULT_INDEX_PATH, TfIdfIndex
from jetspark.processors.tfidf.jobs import Engine, build_index, write_index
from jetspark.processors.tfidf.parts import PartitionedIndex, open_index
from jetspark.processors.tfidf.processors import StopwordsP, TfIdfP, TfP, TokenizeP
from jetspark.processors.tfidf.search import Hit, search
from jetspark.processors.tfidf.stopwords import (
    DEFAULT_THRESHOLD,
    build_stopwords_dag,
    derive_stopwords,
    load_stopwords,
)
from jetspark.processors.tfidf.tokenize import ASCII, TOKENIZERS, UNICODE, Tokenizer

__all__ = [
    "ASCII",
    "DEFAULT_INDEX_PATH",
    "DEFAULT_THRESHOLD",
    "DOCID_NAME",
    "INVERTED_INDEX",
    "TOKENIZERS",
    "UNICODE",
    "Corpus",
    "Engine",
    "Hit",
    "InputError",
    "PartitionedIndex",
    "SkippedFile",
    "StopwordsP",
    "TfIdfIndex",
    "TfIdfP",
    "TfP",
    "TokenizeP",
    "Tokenizer",
    "build_dag",
    "build_index",
    "build_stopwords_dag",
    "default_corpus",
    "default_corpus_dir",
    "derive_stopwords",
    "describe_skipped",
    "load_stopwords",
    "open_index",
    "scan_corpus",
    "search",
    "write_index",
]
