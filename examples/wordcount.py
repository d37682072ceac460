"""Word count, the DAG of manual §8.2.1, built from the library's factories.

    source (read_map_p "lines") -> tokenize (flat_map_p)
        -> accumulate (accumulate_by_key_p, over a local partitioned edge)
        -> combine (combine_by_key_p, over a distributed partitioned edge)
        -> sink (write_map_p "counts")

Run it with `python examples/wordcount.py [--engine spark|local] [--members N]`: it writes
some generated lines to the engine's "lines" map, runs the job (on two members by default), and
checks the counts against a plain Python count.
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


def tokenize(line_entry: tuple[int, str]) -> list[str]:
    """(line number, line) -> its lowercase words."""
    return [word for word in _DELIMITER.split(line_entry[1].lower()) if word]


def build_dag(lines_map: str = LINES, counts_map: str = COUNTS) -> DAG:
    """The word count DAG: counts the words of the lines in `lines_map` into `counts_map`."""
    dag = DAG("word-count")
    source = dag.new_vertex("source", read_map_p(lines_map))
    tokenizer = dag.new_vertex("tokenize", flat_map_p(tokenize))
    accumulate = dag.new_vertex("accumulate", accumulate_by_key_p([whole_item], counting()))
    combine = dag.new_vertex("combine", combine_by_key_p(counting(), entry))
    sink = dag.new_vertex("sink", write_map_p(counts_map))
    dag.edge(between(source, tokenizer))
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
    add_engine_arguments(parser)
    parser.set_defaults(members=2)
    args = parser.parse_args(argv)
    lines = generate_lines(2_000)
    with EngineSession.of(args, spark) as session:
        session.engine.get_map(LINES).update(lines)
        session.engine.new_job(build_dag(), JobConfig(name="word-count")).join()
        counts = dict(session.engine.get_map(COUNTS))
    expected = Counter(word for n, line in lines.items() for word in tokenize((n, line)))
    assert counts == dict(expected), "the job's counts differ from a plain Python count"
    for word, count in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[:5]:
        print(f"{word:>8} {count}")
    print(f"{len(counts)} distinct words, {sum(counts.values())} in total: match Counter")


if __name__ == "__main__":
    main()
