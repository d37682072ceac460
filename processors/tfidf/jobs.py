"""Running the TF-IDF jobs on an engine: the corpus goes in through the doc-source map, the
result comes back through the sink's map, and both maps are emptied afterwards (an engine's
maps live as long as the engine, and SparkEngine ships every non-empty one into each job).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from jetspark.core.config import JobConfig
from jetspark.core.dag import DAG
from jetspark.core.job import Job
from jetspark.processors.tfidf.corpus import Corpus
from jetspark.processors.tfidf.dag import DOCID_NAME, INVERTED_INDEX, build_dag
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
    doc_names = engine.get_map(DOCID_NAME)
    result = engine.get_map(output)
    doc_names.clear()
    result.clear()
    doc_names.update(corpus.doc_names())
    try:
        wait(engine.new_job(dag, JobConfig(name=dag.name)))
        return dict(result)
    finally:
        doc_names.clear()
        result.clear()


def build_index(
    engine: Engine,
    corpus: Corpus,
    stopwords: Iterable[str] = (),
    tokenizer: str = ASCII,
    wait: Wait = join,
) -> TfIdfIndex:
    """Runs the TF-IDF DAG over `corpus` and returns the inverted index it built."""
    stopword_set = frozenset(stopwords)
    dag = build_dag(str(corpus.root), stopword_set, tokenizer)
    words = run_over_corpus(engine, corpus, dag, INVERTED_INDEX, wait)
    return TfIdfIndex(corpus.documents, words, stopword_set, tokenizer, str(corpus.root))


def write_index(
    engine: Engine,
    corpus: Corpus,
    path: str,
    stopwords: Iterable[str] = (),
    tokenizer: str = ASCII,
    wait: Wait = join,
) -> TfIdfIndex | PartitionedIndex:
    """Builds the index of `corpus` and saves it at `path`: a partitioned index directory whose
    parts the job's tasks write (nothing passes through the driver), or, for a path ending in
    `.msgpack`, the single file (the postings come back to the driver: small corpora only)."""
    stopword_set = frozenset(stopwords)
    if is_single_file(path):
        index = build_index(engine, corpus, stopword_set, tokenizer, wait)
        index.save(path)
        return index
    staging = staging_directory(path)
    try:
        dag = build_dag(str(corpus.root), stopword_set, tokenizer, WriteIndexParts(staging))
        stats = run_over_corpus(engine, corpus, dag, PART_STATS, wait)
        partitions = JobConfig().partition_count
        manifest = manifest_of(
            corpus.documents, stopword_set, tokenizer, str(corpus.root), partitions, stats
        )
        publish(staging, path, manifest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return PartitionedIndex.load(path)
