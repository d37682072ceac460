"""Running the TF-IDF jobs on an engine: the corpus goes in through the doc-source map, the
result comes back through the sink's map, and both maps are emptied afterwards (an engine's
maps live as long as the engine, and SparkEngine ships every non-empty one into each job).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from jetspark.core.config import JobConfig
from jetspark.core.dag import DAG
from jetspark.core.job import Job
from jetspark.processors.tfidf.corpus import Corpus
from jetspark.processors.tfidf.dag import DERIVED_STOPWORDS, DOCID_NAME, INVERTED_INDEX, build_dag
from jetspark.processors.tfidf.errors import InputError
from jetspark.processors.tfidf.index import TfIdfIndex
from jetspark.processors.tfidf.parts import (
    PART_STATS,
    PartitionedIndex,
    WriteIndexParts,
    is_single_file,
    manifest_of,
    publish,
    staging_directory,
)
from jetspark.processors.tfidf.tokenize import ASCII

DEFAULT_THRESHOLD = 0.5
"""Words in more than half of the documents are stopwords by default."""


class Engine(Protocol):
    """What the jobs need of an engine: LocalEngine and SparkEngine both qualify."""

    def new_job(self, dag: DAG, config: JobConfig | None = None) -> Job:
        """Starts `dag`; returns its job handle."""
        ...

    def get_map(self, name: str) -> dict[Any, Any]:
        """The engine's named map."""
        ...


Wait = Callable[[Job], None]
"""Waits for a started job to end, raising its error (a command line may show progress)."""


def join(job: Job) -> None:
    """The plain Wait: `job.join()`."""
    job.join()


def run_over_corpus(
    engine: Engine, corpus: Corpus, dag: DAG, output: str, wait: Wait = join
) -> dict[Any, Any]:
    """Runs `dag` over the documents of `corpus`; returns (and removes) the `output` map."""
    return run_collecting(engine, corpus, dag, (output,), wait)[0]


def run_collecting(
    engine: Engine, corpus: Corpus, dag: DAG, outputs: Sequence[str], wait: Wait = join
) -> list[dict[Any, Any]]:
    """Runs `dag` over the documents of `corpus`; returns (and removes) the `outputs` maps."""
    doc_names = engine.get_map(DOCID_NAME)
    results = [engine.get_map(output) for output in outputs]
    for store in (doc_names, *results):
        store.clear()
    doc_names.update(corpus.doc_names())
    try:
        wait(engine.new_job(dag, JobConfig(name=dag.name)))
        return [dict(result) for result in results]
    finally:
        for store in (doc_names, *results):
            store.clear()


def build_index(
    engine: Engine,
    corpus: Corpus,
    stopwords: Iterable[str] = (),
    tokenizer: str = ASCII,
    wait: Wait = join,
) -> TfIdfIndex:
    """Runs the TF-IDF DAG over `corpus` and returns the inverted index it built."""
    return _build_index(engine, corpus, frozenset(stopwords), tokenizer, wait, None)


def _build_index(
    engine: Engine,
    corpus: Corpus,
    stopwords: frozenset[str],
    tokenizer: str,
    wait: Wait,
    stopword_fraction: float | None,
) -> TfIdfIndex:
    """The index collected on the driver; stopwords derived in the job with a fraction."""
    dag = build_dag(str(corpus.root), stopwords, tokenizer, None, stopword_fraction)
    outputs = (INVERTED_INDEX, DERIVED_STOPWORDS)
    words, derived = run_collecting(engine, corpus, dag, outputs, wait)
    stopword_set = stopwords | derived.keys()
    return TfIdfIndex(corpus.documents, words, stopword_set, tokenizer, str(corpus.root))


def write_index(
    engine: Engine,
    corpus: Corpus,
    path: str,
    stopwords: Iterable[str] | None = (),
    tokenizer: str = ASCII,
    wait: Wait = join,
    stopword_threshold: float = DEFAULT_THRESHOLD,
) -> TfIdfIndex | PartitionedIndex:
    """Builds the index of `corpus` and saves it at `path`: a partitioned index directory whose
    parts the job's tasks write (nothing passes through the driver), or, for a path ending in
    `.msgpack`, the single file (the postings come back to the driver: small corpora only).

    With `stopwords` None they are derived in the same job: the words in more than
    `stopword_threshold` of the documents (the result `derive_stopwords` would give).
    """
    if stopwords is None and not 0 <= stopword_threshold <= 1:
        raise InputError(
            f"the stopword threshold must be between 0 and 1, got {stopword_threshold}"
        )
    fraction = stopword_threshold if stopwords is None else None
    stopword_set = frozenset(stopwords or ())
    if is_single_file(path):
        index = _build_index(engine, corpus, stopword_set, tokenizer, wait, fraction)
        index.save(path)
        return index
    staging = staging_directory(path)
    try:
        sink = WriteIndexParts(staging)
        dag = build_dag(str(corpus.root), stopword_set, tokenizer, sink, fraction)
        stats, derived = run_collecting(engine, corpus, dag, (PART_STATS, DERIVED_STOPWORDS), wait)
        stopword_set |= derived.keys()
        partitions = JobConfig().partition_count
        manifest = manifest_of(
            corpus.documents, stopword_set, tokenizer, str(corpus.root), partitions, stats
        )
        publish(staging, path, manifest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return PartitionedIndex.load(path)
