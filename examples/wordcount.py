"""Word count, the DAG of manual §8.2.1, built from the library's factories.

    source (read_map_p "lines") -> tokenize (flat_map_p)
        -> accumulate (accumulate_by_key_p, over a local partitioned edge)
        -> combine (combine_by_key_p, over a distributed partitioned edge)
        -> sink (write_map_p "counts")

Run it with `python examples/wordcount.py [--engine spark|local] [--members N]`, or on a cluster
with `spark-submit --master URL examples/wordcount.py` (Spark on spark-submit's context): it
writes some generated lines to the engine's "lines" map, runs the job (on two members by
default), and checks the counts against a plain Python count. `build_dag(source=...)` takes any
source of plain lines instead (`read_files_p(dir)`, `read_rdd_p(sc.textFile(dir))`): bench/
runs it so.
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from jetspark.core import DAG, JobConfig
from jetspark.core.cli import EngineSession, add_engine_arguments
from jetspark.edges import between
from jetspark.partitioning import HASH_CODE
from jetspark.processors import (
    accumulate_by_key_p,
    combine_by_key_p,
    entry,
    entry_key,
    flat_map_p,
    read_map_p,
    whole_item,
    write_map_p,
)
from jetspark.processors.aggregate import counting

LINES = "lines"
COUNTS = "counts"
_DELIMITER = re.compile(r"\W+")


def words(line: str) -> list[str]:
    """A line's lowercase words: what a word is, for this job and for bench/'s baselines."""
    return [word for word in _DELIMITER.split(line.lower()) if word]


def tokenize(line_entry: tuple[int, str]) -> list[str]:
    """(line number, line) -> its lowercase words."""
    return words(line_entry[1])


def build_dag(lines_map: str = LINES, counts_map: str = COUNTS, *, source: Any = None) -> DAG:
    """The word count DAG: counts the words of the lines in `lines_map` into `counts_map`.

    `source`, a vertex supplier emitting lines as plain strings, replaces `lines_map`.
    """
    dag = DAG("word-count")
    lines, split = (read_map_p(lines_map), tokenize) if source is None else (source, words)
    reader = dag.new_vertex("source", lines)
    tokenizer = dag.new_vertex("tokenize", flat_map_p(split))
    accumulate = dag.new_vertex("accumulate", accumulate_by_key_p([whole_item], counting()))
    combine = dag.new_vertex("combine", combine_by_key_p(counting(), entry))
    sink = dag.new_vertex("sink", write_map_p(counts_map))
    dag.edge(between(reader, tokenizer))
    # local partitioned edge: each member counts its own words, no network
    dag.edge(between(tokenizer, accumulate).partitioned(whole_item, HASH_CODE))
    # distributed partitioned edge: one combiner per word in the whole cluster
    dag.edge(between(accumulate, combine).distributed().partitioned(entry_key))
    dag.edge(between(combine, sink))
    return dag


def generate_lines(count: int, seed: int = 7) -> dict[int, str]:
    """`count` lines of pseudo-random words, keyed by line number."""
    vocabulary = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "jet"]
    rng = random.Random(seed)
    return {n: " ".join(rng.choices(vocabulary, k=rng.randint(3, 12))) for n in range(count)}


def main(argv: Sequence[str] | None = None, spark: Any = None) -> None:
    """Runs the word count on generated lines and checks it against a plain Python count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_engine_arguments(parser, default_engine="local", members=2, ui_default="off")
    args = parser.parse_args(argv)
    lines = generate_lines(2_000)
    with EngineSession.of(args, spark) as session:
        session.engine.get_map(LINES).update(lines)
        job = session.engine.new_job(build_dag(), JobConfig(name="word-count"))
        session.wait(job)
        counts = dict(session.engine.get_map(COUNTS))
        print(f"word-count: {session.ran(job)}")
    expected = Counter(word for n, line in lines.items() for word in tokenize((n, line)))
    assert counts == dict(expected), "the job's counts differ from a plain Python count"
    for word, count in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[:5]:
        print(f"{word:>8} {count}")
    print(f"{len(counts)} distinct words, {sum(counts.values())} in total: match Counter")


if __name__ == "__main__":
    main()
