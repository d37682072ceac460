"""Word count on LocalEngine(members=1) against the same counting in one plain Python loop.

Run by explicit path: ``pytest bench/bench_local_engine.py --benchmark-only``. The text is
generated from a fixed seed (Zipf-like word frequencies over a 20k-word vocabulary); its size
is ``JETSPARK_BENCH_MB`` megabytes (default 2, small enough for a CI smoke run; the goal is
stated for 20). Goal: the engine's mean time at most 2x the plain loop's. The DAG is the
manual's (§8.2.1): source -> tokenize -> accumulate (local partitioned, HASH_CODE) -> combine
(distributed partitioned) -> sink, with local parallelism 1 (LocalEngine's default) and 2.
Each engine run also asserts its counts equal the loop's.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import Any

import pytest

from jetspark.core import DAG, Context, Inbox, JobConfig, LocalEngine, Outbox, Processor
from jetspark.edges import between
from jetspark.partitioning import HASH_CODE

MEGABYTES = float(os.environ.get("JETSPARK_BENCH_MB", "2"))
VOCABULARY = 20_000
WORDS_PER_LINE = 12


def generate_lines(megabytes: float, seed: int = 42) -> list[str]:
    """Deterministic text of about `megabytes` MB, one list item per line."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = [
        "".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(VOCABULARY)
    ]
    weights = [1 / (rank + 1) for rank in range(VOCABULARY)]
    lines: list[str] = []
    size = 0
    target = megabytes * 1_000_000
    while size < target:
        words = rng.choices(vocabulary, weights, k=WORDS_PER_LINE * 1000)
        for start in range(0, len(words), WORDS_PER_LINE):
            line = " ".join(words[start : start + WORDS_PER_LINE])
            lines.append(line)
            size += len(line) + 1
    return lines


LINES = generate_lines(MEGABYTES)


def count_words_plainly(lines: list[str]) -> dict[str, int]:
    """The baseline: one dict loop."""
    counts: dict[str, int] = {}
    for line in lines:
        for word in line.split():
            counts[word] = counts.get(word, 0) + 1
    return counts


class _LineSource(Processor):
    """Emits its share of the engine list "lines"."""

    def init(self, outbox: Outbox, context: Context) -> None:
        self._offer = outbox.offer
        lines = context.stores.get_list("lines")
        self._lines = lines[context.global_processor_index :: context.total_parallelism]
        self._next = 0

    def complete(self) -> bool:
        offer, lines, i = self._offer, self._lines, self._next
        end = len(lines)
        while i < end and offer(lines[i]):
            i += 1
        self._next = i
        return i == end


class _Tokenize(Processor):
    """Splits each line into words; a line leaves the inbox once all its words went out."""

    def init(self, outbox: Outbox, context: Context) -> None:
        self._offer = outbox.offer
        self._words: Iterator[str] | None = None
        self._held: str | None = None

    def process(self, ordinal: int, inbox: Inbox) -> None:
        lines = inbox.queue  # type: ignore[attr-defined]
        offer = self._offer
        words, held = self._words, self._held
        while lines:
            if words is None:
                words = iter(lines[0].split())
            elif held is not None and not offer(held):
                return
            for word in words:
                if not offer(word):
                    self._words, self._held = words, word
                    return
            words = self._held = None
            lines.popleft()
        self._words = None


class _Count(Processor):
    """Adds `value` per key: accumulate counts words (value 1), combine sums (word, count)."""

    def __init__(self, combine: bool) -> None:
        self._combine = combine

    def init(self, outbox: Outbox, context: Context) -> None:
        self._offer = outbox.offer
        self._counts: dict[Any, int] = {}
        self._out: Iterator[Any] | None = None
        self._held: Any = None

    def process(self, ordinal: int, inbox: Inbox) -> None:
        counts = self._counts
        items = inbox.queue  # type: ignore[attr-defined]
        if self._combine:
            for word, count in items:
                counts[word] = counts.get(word, 0) + count
        else:
            for word in items:
                counts[word] = counts.get(word, 0) + 1
        items.clear()

    def complete(self) -> bool:
        offer = self._offer
        if self._out is None:
            self._out = iter(self._counts.items())
        elif not offer(self._held):
            return False
        for entry in self._out:
            if not offer(entry):
                self._held = entry
                return False
        return True


class _MapSink(Processor):
    """Puts the `(word, count)` items into the engine dict "counts"."""

    def init(self, outbox: Outbox, context: Context) -> None:
        self._counts = context.stores.get_map("counts")

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self._counts.update(inbox.queue)  # type: ignore[attr-defined]
        inbox.queue.clear()  # type: ignore[attr-defined]


def word_count_dag(local_parallelism: int) -> DAG:
    """The manual's word count DAG over the processors above."""
    dag = DAG("word count")
    source = dag.new_vertex("source", _LineSource, 1)
    tokenize = dag.new_vertex("tokenize", _Tokenize, local_parallelism)
    accumulate = dag.new_vertex("accumulate", lambda: _Count(False), local_parallelism)
    combine = dag.new_vertex("combine", lambda: _Count(True), local_parallelism)
    sink = dag.new_vertex("sink", _MapSink, 1)
    dag.edge(between(source, tokenize))
    dag.edge(between(tokenize, accumulate).partitioned(lambda word: word, HASH_CODE))
    dag.edge(between(accumulate, combine).distributed().partitioned(lambda entry: entry[0]))
    dag.edge(between(combine, sink))
    return dag


def count_words_on_engine(lines: list[str], local_parallelism: int) -> dict[str, int]:
    """Runs the word count DAG on a fresh LocalEngine(members=1) and returns the counts."""
    engine = LocalEngine(members=1)
    engine.get_list("lines").extend(lines)
    engine.new_job(word_count_dag(local_parallelism), JobConfig()).join()
    return engine.get_map("counts")


@pytest.fixture(scope="module")
def expected() -> dict[str, int]:
    return count_words_plainly(LINES)


def test_plain_dict_loop(benchmark: Any, expected: dict[str, int]) -> None:
    benchmark.group = f"word count {MEGABYTES:g} MB"
    assert benchmark(count_words_plainly, LINES) == expected


@pytest.mark.parametrize("local_parallelism", [1, 2])
def test_local_engine(benchmark: Any, expected: dict[str, int], local_parallelism: int) -> None:
    benchmark.group = f"word count {MEGABYTES:g} MB"
    assert benchmark(count_words_on_engine, LINES, local_parallelism) == expected
