"""Word count as a pipeline (manual §4.9): the most frequent words of a directory of books,
stopwords left out.

    filesSource(BOOKS/*.txt) -> fused(flat-map, filter) -> group-and-aggregate-step1
        (accumulate, partitioned by word, local) -> group-and-aggregate-step2 (combine,
        partitioned by word, distributed) -> mapSink(counts)

Each line of the books is split into lowercase words; the stopwords are dropped; the words are
counted in two steps (counting combines: each member counts its own lines, then one combiner
per word adds the members' counts). Prints the engine and mode it ran in, the top words and the
totals.

    python examples/pipeline/word_count.py [BOOKS_DIR] [--stopwords FILE] [--glob '*.txt']
        [--top 10] [--engine local|spark] [--members N]

BOOKS_DIR defaults to ../shared/data/books beside the repository, FILE to
../shared/data/stopwords.txt (one word a line); a glob such as 'a*.txt' reads fewer books.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import runner

from jetspark.core.pipeline import Pipeline, Sinks, Sources
from jetspark.processors.aggregate import counting

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
"""../shared/data beside the repository."""
COUNTS = "counts"
_DELIMITER = re.compile(r"\W+")


def words(line: str) -> list[str]:
    """A line's lowercase words."""
    return [word for word in _DELIMITER.split(line.lower()) if word]


def read_stopwords(path: str | Path) -> frozenset[str]:
    """The words of a file of one word a line (blank lines ignored)."""
    return frozenset(line.strip() for line in Path(path).read_text().splitlines() if line.strip())


def build_pipeline(books: str | Path, glob: str, stopwords: frozenset[str]) -> Pipeline:
    """Counts the words of the files of `books` matching `glob` into the engine's map "counts",
    leaving `stopwords` out."""
    pipeline = Pipeline.create("word-count")
    (
        # one directory seen by every member: each line read once in the whole job
        pipeline.draw_from(Sources.files(str(books), glob, shared_file_system=True))
        .flat_map(words)
        .filter(lambda word: word not in stopwords)
        .grouping_key(lambda word: word)
        .aggregate(counting())
        .drain_to(Sinks.map(COUNTS))
    )
    return pipeline


def main(argv: Sequence[str] | None = None, spark: Any = None) -> dict[str, int]:
    """Counts the words, prints the top ones and returns every count."""
    options = runner.parser(__doc__.splitlines()[0], trades=None)
    options.add_argument("books", nargs="?", default=str(DATA / "books"), metavar="BOOKS_DIR")
    options.add_argument("--stopwords", default=str(DATA / "stopwords.txt"), metavar="FILE")
    options.add_argument("--glob", default="*.txt", help="which files of BOOKS_DIR to read")
    options.add_argument("--top", type=int, default=10, metavar="N")
    args = options.parse_args(argv)
    if not Path(args.books).is_dir():
        options.error(
            f"BOOKS_DIR {args.books} does not exist (the default: ../shared/data/books beside "
            "the repository); pass a directory of text files as BOOKS_DIR"
        )
    if not Path(args.stopwords).is_file():
        options.error(
            f"--stopwords {args.stopwords} does not exist (the default: "
            "../shared/data/stopwords.txt beside the repository); pass a file of one word a line"
        )
    pipeline = build_pipeline(args.books, args.glob, read_stopwords(args.stopwords))
    with runner.open_session(args, spark) as session:
        runner.run(session, pipeline, None)
        counts = dict(session.engine.get_map(COUNTS))
    top = sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[: args.top]
    print(f"{len(counts):,} distinct words, {sum(counts.values()):,} in all; the top {len(top)}:")
    runner.show([f"{word:<12} {count:>8,}" for word, count in top], args.top)
    return counts


if __name__ == "__main__":
    main()
