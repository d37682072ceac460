"""Searching a saved index exactly as the manual describes it (§8.2.3).

The query is tokenized like the documents were (the index's tokenizer), its stopwords are
removed "as if they weren't entered", and each remaining distinct term is looked up; the result
is the documents that contain every term (the intersection of the terms' lists), each scored by
the sum of its TF-IDF scores for the terms, sorted by score descending (ties by name).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from jetspark.processors.tfidf.tokenize import Tokenizer


class SearchableIndex(Protocol):
    """What search needs of an index: TfIdfIndex (one file) and PartitionedIndex both have it."""

    documents: tuple[str, ...]
    stopwords: frozenset[str]
    tokenizer: str

    def postings(self, word: str) -> Sequence[tuple[int, float]]:
        """The `(doc id, score)` postings of `word`."""
        ...


@dataclass(frozen=True)
class Hit:
    """A document that contains every query term, and its score."""

    document: str
    score: float


def query_terms(index: SearchableIndex, query: str) -> list[str]:
    """The distinct words of `query` that are not stopwords, in query order."""
    words = Tokenizer(index.tokenizer, index.stopwords).words(query)
    return list(dict.fromkeys(words))


def search(index: SearchableIndex, query: str, top: int | None = 10) -> list[Hit]:
    """The `top` best documents containing every term of `query` (all of them for None)."""
    terms = query_terms(index, query)
    if not terms:
        return []
    postings = [dict(index.postings(term)) for term in terms]
    found = set.intersection(*(set(p) for p in postings))
    scores = {doc_id: sum(p[doc_id] for p in postings) for doc_id in found}
    names = index.documents
    ranked = sorted(scores.items(), key=lambda hit: (-hit[1], names[hit[0]]))
    return [Hit(names[doc_id], score) for doc_id, score in ranked[:top]]
