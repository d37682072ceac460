"""The whole-process PySpark baseline of `jetspark tfidf DIR --tsv FILE`: the script a PySpark
user would write for the same TSV, run as its own process (JVM start included).

    python bench/rdd_tfidf_script.py DOCS_DIR OUT.tsv [--master local[2]] [--threshold 0.5]

The same index as jetspark's: documents are the directory's files (sorted names, read as UTF-8
with errors replaced), words are the ASCII `\\w+` runs of the lowercased text, stopwords are
the words in more than `threshold` of the documents (left out), score = tf * (ln D - ln DF).
One pass: a Counter per document, posting lists grouped by word per partition, one shuffle by
word, the scores and the stopword test after it; the TSV is written on the driver from the
sorted RDD, one partition at a time.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("docs_dir")
    parser.add_argument("tsv")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--threshold", type=float, default=0.5)
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext

    conf = (
        SparkConf()
        .setMaster(args.master)
        .setAppName("rdd-tfidf")
        .set("spark.ui.enabled", "false")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.ui.showConsoleProgress", "false")
    )
    context = SparkContext(conf=conf)
    context.setLogLevel("ERROR")
    try:
        write_tsv(context, args.docs_dir, args.tsv, args.threshold)
    finally:
        context.stop()


def write_tsv(context: Any, root: str, tsv: str, threshold: float) -> None:
    """Builds the index of the files under `root` and writes it as sorted TSV lines."""
    names = sorted(
        os.path.relpath(os.path.join(directory, file), root)
        for directory, _, files in os.walk(root)
        for file in files
        if not file.startswith(".")
    )
    documents, partitions = len(names), context.defaultParallelism
    log_documents, limit = math.log(documents), threshold * documents

    def postings(docs: Iterator[tuple[int, str]]) -> Iterator[tuple[str, list[tuple[int, int]]]]:
        words = re.compile(r"\w+", re.ASCII)
        by_word: dict[str, list[tuple[int, int]]] = {}
        for doc_id, name in docs:
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as file:
                counts = Counter(words.findall(file.read().lower()))
            for word, tf in counts.items():
                by_word.setdefault(word, []).append((doc_id, tf))
        return iter(by_word.items())

    def scores(shuffled: Iterator[tuple[str, list[tuple[int, int]]]]) -> Iterator[Any]:
        by_word: dict[str, list[tuple[int, int]]] = {}
        for word, doc_tfs in shuffled:
            by_word.setdefault(word, []).extend(doc_tfs)
        for word, doc_tfs in by_word.items():
            if len(doc_tfs) <= limit:
                idf = log_documents - math.log(len(doc_tfs))
                yield word, sorted((doc_id, tf * idf) for doc_id, tf in doc_tfs)

    index = (
        context.parallelize(list(enumerate(names)), partitions)
        .mapPartitions(postings)
        .partitionBy(partitions)
        .mapPartitions(scores)
        .sortByKey(numPartitions=partitions)
    )
    shown = [name.translate(_TSV_ESCAPES) for name in names]
    with open(tsv, "w", encoding="utf-8") as out:
        for word, doc_scores in index.toLocalIterator():
            out.writelines(f"{word}\t{shown[d]}\t{score!r}\n" for d, score in doc_scores)


if __name__ == "__main__":
    main()
