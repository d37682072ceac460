"""Word count on LocalEngine against the same counting in one plain Python dict loop: row 3 of
`python -m bench` as a pytest-benchmark suite.

Run by explicit path: ``python -m pytest bench/bench_local_engine.py --benchmark-only``. The text
is bench/data.py's (Zipf words over a 20k vocabulary, fixed seed), ``JETSPARK_BENCH_MB``
megabytes of it (default 2, small enough for a CI smoke run; the goal is stated for 20). The
DAG is the manual's word count (examples/wordcount.py) reading the files with `read_files_p`,
on one member and on two (a distributed edge serialized between them). Goal: one member's mean
time at most 2x the dict loop's. Every engine run's counts must equal the loop's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bench.data import write_corpus
from bench.wordcount import count_on_local_engine, count_plainly

MEGABYTES = float(os.environ.get("JETSPARK_BENCH_MB", "2"))
GROUP = f"word count {MEGABYTES:g} MB"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("text")
    write_corpus(directory, MEGABYTES)
    return directory


@pytest.fixture(scope="module")
def expected(corpus: Path) -> dict[str, int]:
    return count_plainly(corpus)


def test_plain_dict_loop(benchmark: Any, corpus: Path, expected: dict[str, int]) -> None:
    benchmark.group = GROUP
    assert benchmark(count_plainly, corpus) == expected


@pytest.mark.parametrize("members", [1, 2])
def test_local_engine(benchmark: Any, corpus: Path, expected: dict[str, int], members: int) -> None:
    benchmark.group = GROUP
    assert benchmark(count_on_local_engine, corpus, members) == expected
