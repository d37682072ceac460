"""The inverted TF-IDF index, the advanced batch DAG of manual §8.2.3, on a few small books.

The job itself is the product package `jetspark.processors.tfidf` (its DAG, TokenizeP, TfIdfP,
the saved index and search; `jetspark tfidf` and `jetspark search` on the command line). This
example calls it as a program would: it writes four small books to a temporary directory,
builds the index with a fixed stop list, and searches it.

Run it with `python examples/tfidf_dag.py [--engine local|spark] [--members N]` (local by
default), or under
`spark-submit --master URL examples/tfidf_dag.py` (Spark on spark-submit's context).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jetspark.core import Job
from jetspark.core.cli import EngineSession, add_engine_arguments
from jetspark.processors.tfidf import build_index, scan_corpus, search

BOOKS = {
    "jet.txt": "The jet engine burns fuel.\nA jet flies fast and the jet is loud.",
    "spark.txt": "A spark lights the fuel.\nSpark clusters process data fast.",
    "stream.txt": "A stream of events flows.\nThe jet processes the stream of events.",
    "batch.txt": "A batch job reads data.\nThe batch ends and the data rests.",
}
STOPWORDS = ("the", "a", "of", "and", "is")
QUERIES = ("jet fuel", "data", "stream of events")


def write_books(directory: Path) -> None:
    """Writes BOOKS into `directory`."""
    for name, text in BOOKS.items():
        (directory / name).write_text(text + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None, spark: Any = None) -> None:
    """Builds the index of BOOKS and prints the answers to QUERIES."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_engine_arguments(parser, default_engine="local", ui_default="off")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tfidf-") as books_dir:
        write_books(Path(books_dir))
        with EngineSession.of(args, spark) as session:
            jobs: list[Job] = []

            def wait(job: Job) -> None:
                jobs.append(job)
                session.wait(job)

            index = build_index(session.engine, scan_corpus(books_dir), STOPWORDS, wait=wait)
            print(f"tf-idf: {session.ran(jobs[-1])}")
    for query in QUERIES:
        hits = ", ".join(f"{hit.document} ({hit.score:.2f})" for hit in search(index, query))
        print(f"{query!r}: {hits or 'no document'}")
    print(f"{len(index.words)} words indexed over {len(index.documents)} documents")


if __name__ == "__main__":
    main()
