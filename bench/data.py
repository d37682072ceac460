"""The benchmarks' one text generator: Zipf-distributed words over a 20k vocabulary, fixed seed.

The vocabulary is 20,000 distinct random lowercase words of 2-9 letters, ordered by length, so
the frequent words are the short ones, as in natural language; word ranks are drawn with
weights 1/rank. That gives about 3.7 bytes per word with its separator, like real books. The
text is 12 words a line, written as UTF-8 files of equal size; the same seed always writes the
same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

import numpy as np

VOCABULARY_SIZE = 20_000
WORDS_PER_LINE = 12
SEED = 42
MAX_FILE_MEGABYTES = 25.0
"""Files are at most this big, and come in pairs: `sc.textFile` then reads one split per file
(Hadoop's local block is 32 MB), an even number of equal splits for two cores."""
_LINES_PER_BLOCK = 10_000


@cache
def vocabulary(seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """The words, most frequent first, and the probability of each (Zipf, exponent 1)."""
    rng = np.random.default_rng(seed)
    letters = rng.integers(ord("a"), ord("z") + 1, (2 * VOCABULARY_SIZE, 9), dtype=np.uint8)
    lengths = rng.integers(2, 10, 2 * VOCABULARY_SIZE)
    candidates = (bytes(row[:n]).decode("ascii") for row, n in zip(letters, lengths, strict=True))
    words = list(dict.fromkeys(candidates))[:VOCABULARY_SIZE]
    words.sort(key=len)
    weights = 1.0 / np.arange(1, VOCABULARY_SIZE + 1)
    return np.array(words), weights / weights.sum()


def _blocks(rng: np.random.Generator, words: np.ndarray, weights: np.ndarray) -> Iterator[str]:
    """Endless blocks of text, `_LINES_PER_BLOCK` lines each, every line ending in a newline."""
    while True:
        drawn = words[rng.choice(len(words), _LINES_PER_BLOCK * WORDS_PER_LINE, p=weights)]
        lines = drawn.reshape(_LINES_PER_BLOCK, WORDS_PER_LINE).tolist()
        yield "".join(" ".join(line) + "\n" for line in lines)


def write_corpus(directory: Path, megabytes: float, seed: int = SEED) -> list[Path]:
    """Writes about `megabytes` MB of text into `directory` as an even number of equal files.

    Each file ends at the first line boundary past its share; returns the files, sorted.
    """
    directory.mkdir(parents=True, exist_ok=True)
    words, weights = vocabulary(seed)
    blocks = _blocks(np.random.default_rng(seed), words, weights)
    count = 2 * max(1, int(np.ceil(megabytes / (2 * MAX_FILE_MEGABYTES))))
    share = megabytes * 1e6 / count
    files = [directory / f"part-{n:03}.txt" for n in range(count)]
    for path in files:
        written = 0
        with path.open("w", encoding="ascii") as file:
            while written < share:
                block = next(blocks)
                if written + len(block) > share:
                    block = block[: block.index("\n", int(share - written)) + 1]
                file.write(block)
                written += len(block)
    return files


def read_lines(directory: Path) -> list[str]:
    """Every line of the directory's files, in file-name order, without line ends."""
    lines: list[str] = []
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        with path.open(encoding="utf-8", errors="replace") as file:
            lines.extend(line.rstrip("\n") for line in file)
    return lines


def corpus_megabytes(directory: Path) -> float:
    """The size of the directory's files in MB."""
    return sum(p.stat().st_size for p in directory.iterdir() if p.is_file()) / 1e6


def is_ascii(directory: Path) -> bool:
    """True when every file of the directory is plain ASCII text."""
    return all(p.read_bytes().isascii() for p in directory.iterdir() if p.is_file())
