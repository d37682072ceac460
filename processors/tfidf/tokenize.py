"""The one tokenizer of the TF-IDF job, shared by indexing, stopword derivation and search.

As Jet's sample does it: lowercase the text, split it on `\\W+`, drop empty tokens (and the
stopwords). The default, ASCII, takes `\\W` in Java's sense (anything but `[A-Za-z0-9_]`), so
results equal Jet's on the same books; UNICODE takes Python's Unicode `\\w`, for text in other
languages. Splitting on `\\W+` and dropping empty tokens gives exactly the runs of `\\w`, which is
what `findall` returns. A byte-order mark, U+FFFD (an undecodable byte) and all punctuation are
non-word characters in both modes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ASCII = "ascii"
UNICODE = "unicode"
TOKENIZERS = (ASCII, UNICODE)
"""The tokenizer names `--tokenizer` accepts."""

_WORD_RUNS = {ASCII: re.compile(r"\w+", re.ASCII), UNICODE: re.compile(r"\w+")}


@dataclass(frozen=True)
class Tokenizer:
    """Turns text into its lowercase words; `stopwords` are left out."""

    kind: str = ASCII
    stopwords: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.kind not in _WORD_RUNS:
            raise ValueError(f"unknown tokenizer {self.kind!r}: choose one of {TOKENIZERS}")

    def words(self, text: str) -> list[str]:
        """The words of `text` in order, lowercased, stopwords removed."""
        words = _WORD_RUNS[self.kind].findall(text.lower())
        if not self.stopwords:
            return words
        stopwords = self.stopwords
        return [word for word in words if word not in stopwords]
