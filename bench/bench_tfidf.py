"""TF-IDF index on SparkEngine (the manual's DAG) vs a hand-written PySpark RDD TF-IDF.

Both run in the same SparkContext over the same documents with the same stopwords (derived
first by jetspark's stopwords job, untimed; it also starts the Python workers) and both bring
the index to the driver as word -> [(doc id, score)]; the two indexes are checked equal to 1e-9.
The ratio is jetspark's time over the RDD baseline's. Goal (issue 7): <= 1.5 at >= 50 MB.

    python bench/bench_tfidf.py                   # 50 MB of generated Zipf text, seed 42
    python bench/bench_tfidf.py --corpus DIR      # e.g. ../shared/data/books
    python bench/bench_tfidf.py --smoke           # 1 MB, for CI
    pytest bench/bench_tfidf.py                   # the smoke run, on the spark_engine fixture

The generated corpus: a 50,000-word vocabulary of random lowercase words, word ranks drawn with
Zipf weights 1/rank, 12 words a line, documents of about 100 KB.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jetspark.processors.tfidf import Corpus, build_index, derive_stopwords, scan_corpus

VOCABULARY = 50_000
WORDS_PER_LINE = 12
DOCUMENT_BYTES = 100_000
SMOKE_MEGABYTES = 1.0


def generate_corpus(directory: Path, megabytes: float, seed: int = 42) -> None:
    """Writes about `megabytes` MB of Zipf-distributed words as documents of ~100 KB."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 11, VOCABULARY)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = np.array(["".join(rng.choice(letters, n)) for n in lengths])
    weights = 1.0 / np.arange(1, VOCABULARY + 1)
    weights /= weights.sum()
    mean_word = float((weights * (lengths + 1)).sum())
    words_per_document = int(DOCUMENT_BYTES / mean_word) // WORDS_PER_LINE * WORDS_PER_LINE
    documents = max(1, round(megabytes * 1e6 / DOCUMENT_BYTES))
    for n in range(documents):
        words = vocabulary[rng.choice(VOCABULARY, words_per_document, p=weights)]
        lines = words.reshape(-1, WORDS_PER_LINE)
        text = "\n".join(" ".join(line) for line in lines)
        (directory / f"doc{n:05}.txt").write_text(text + "\n", encoding="utf-8")


def rdd_tf_idf(
    context: Any, corpus: Corpus, stopwords: frozenset[str], partitions: int
) -> dict[str, list[tuple[int, float]]]:
    """The best hand-written RDD TF-IDF we found: a Counter per document, posting lists grouped
    by word per partition, one shuffle of those lists by word (`partitionBy`, no map-side
    combine: the keys are already unique per partition), scores computed after the shuffle.
    (`reduceByKey(operator.add)` instead of `partitionBy` measured 20-40% slower.)
    """
    root, log_documents = str(corpus.root), math.log(len(corpus.documents))
    shared_stopwords = context.broadcast(stopwords)

    def postings(docs: Iterator[tuple[int, str]]) -> Iterator[tuple[str, list[tuple[int, int]]]]:
        words = re.compile(r"\w+", re.ASCII)
        stop = shared_stopwords.value
        by_word: dict[str, list[tuple[int, int]]] = {}
        for doc_id, name in docs:
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as file:
                counts = Counter(words.findall(file.read().lower()))
            for word in stop & counts.keys():
                del counts[word]
            for word, tf in counts.items():
                postings = by_word.get(word)
                if postings is None:
                    by_word[word] = [(doc_id, tf)]
                else:
                    postings.append((doc_id, tf))
        return iter(by_word.items())

    def scores(shuffled: Iterator[tuple[str, list[tuple[int, int]]]]) -> Iterator[Any]:
        by_word: dict[str, list[tuple[int, int]]] = {}
        for word, doc_tfs in shuffled:
            postings = by_word.get(word)
            if postings is None:
                by_word[word] = doc_tfs
            else:
                postings.extend(doc_tfs)
        for word, doc_tfs in by_word.items():
            idf = log_documents - math.log(len(doc_tfs))
            yield word, [(doc_id, tf * idf) for doc_id, tf in doc_tfs]

    return dict(
        context.parallelize(list(enumerate(corpus.documents)), partitions)
        .mapPartitions(postings)
        .partitionBy(partitions)
        .mapPartitions(scores)
        .collect()
    )


def assert_same(expected: dict[str, list], actual: dict[str, Any]) -> None:
    """The two indexes hold the same postings, scores equal to 1e-9."""
    assert expected.keys() == actual.keys(), "the indexes differ in their words"
    for word, postings in expected.items():
        want, got = dict(postings), dict(actual[word])
        assert want.keys() == got.keys(), f"documents of {word!r} differ"
        assert all(math.isclose(want[d], got[d], rel_tol=1e-9, abs_tol=1e-9) for d in want), word


def measure(engine: Any, corpus: Corpus) -> dict[str, float]:
    """Times both TF-IDF builds once each over `corpus` on `engine`'s SparkContext."""
    stopwords = derive_stopwords(engine, corpus)
    started = time.perf_counter()
    baseline = rdd_tf_idf(engine.context, corpus, stopwords, engine.members)
    rdd_seconds = time.perf_counter() - started
    started = time.perf_counter()
    index = build_index(engine, corpus, stopwords)
    jetspark_seconds = time.perf_counter() - started
    assert_same(baseline, index.words)
    return {
        "megabytes": corpus.size / 1e6,
        "documents": len(corpus.documents),
        "words": len(index.words),
        "postings": index.posting_count,
        "rdd_seconds": rdd_seconds,
        "jetspark_seconds": jetspark_seconds,
        "ratio": jetspark_seconds / rdd_seconds,
    }


def report(result: dict[str, float], members: int) -> str:
    """The measurement in a few lines."""
    return (
        f"corpus: {result['megabytes']:.1f} MB, {result['documents']:,} documents, "
        f"{result['words']:,} distinct words, {result['postings']:,} postings; "
        f"{members} members\n"
        f"RDD baseline:   {result['rdd_seconds']:.2f} s\n"
        f"jetspark (DAG): {result['jetspark_seconds']:.2f} s\n"
        f"ratio jetspark / RDD: {result['ratio']:.2f} (goal <= 1.5)"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Generates (or takes) the corpus, starts Spark, measures, prints the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", metavar="DIR", help="documents to index instead")
    parser.add_argument("--megabytes", type=float, default=50.0)
    parser.add_argument("--members", type=int, help="default: Spark's default parallelism")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_MEGABYTES} MB, for CI")
    args = parser.parse_args(argv)
    from jetspark.core.spark import SparkEngine
    from jetspark.core.spark.session import create_context

    with tempfile.TemporaryDirectory(prefix="bench-tfidf-") as workdir:
        if args.corpus:
            corpus = scan_corpus(args.corpus)
        else:
            megabytes = SMOKE_MEGABYTES if args.smoke else args.megabytes
            generate_corpus(Path(workdir), megabytes)
            corpus = scan_corpus(workdir)
        context = create_context(args.master, "bench-tfidf")
        try:
            engine = SparkEngine(spark=context, members=args.members)
            print(report(measure(engine, corpus), engine.members))
        finally:
            context.stop()


@pytest.mark.spark
def test_smoke(spark_engine: Any, tmp_path: Path, benchmark: Any) -> None:
    """The smoke run: 1 MB, both builds once, indexes equal; the ratio goes to extra_info."""
    generate_corpus(tmp_path, SMOKE_MEGABYTES)
    corpus = scan_corpus(tmp_path)
    result = benchmark.pedantic(measure, args=(spark_engine, corpus), rounds=1, iterations=1)
    benchmark.extra_info.update(result)


if __name__ == "__main__":
    main()
