"""Search as the manual describes it: stopwords removed, documents with all terms, score = sum
of TF-IDF, sorted descending."""

from __future__ import annotations

import pytest

from jetspark.processors.tfidf import Hit, TfIdfIndex, search
from jetspark.processors.tfidf.search import query_terms

INDEX = TfIdfIndex(
    ("a.txt", "b.txt", "c.txt", "d.txt"),
    {
        "man": [(0, 1.0), (1, 2.0), (2, 0.5)],
        "suit": [(0, 3.0), (2, 0.25), (3, 9.0)],
        "king": [(1, 4.0), (2, 1.0)],
        "tie": [(0, 1.0), (1, 1.0)],
        "zero": [(0, 0.0), (1, 0.0), (2, 0.0), (3, 0.0)],
    },
    frozenset({"the", "in"}),
)


def test_only_documents_with_every_term_scored_by_the_sum_best_first():
    assert search(INDEX, "man suit") == [Hit("a.txt", 4.0), Hit("c.txt", 0.75)]
    assert search(INDEX, "man suit king") == [Hit("c.txt", 1.75)]


def test_stopwords_are_removed_from_the_query_as_if_not_entered():
    assert search(INDEX, "The man in the suit") == search(INDEX, "man suit")
    assert query_terms(INDEX, "The man in the SUIT") == ["man", "suit"]


def test_a_term_no_document_contains_empties_the_result():
    assert search(INDEX, "man murdered") == []


def test_a_query_of_stopwords_only_has_no_terms_and_no_result():
    assert query_terms(INDEX, "the in") == []
    assert search(INDEX, "the in") == []


def test_a_repeated_term_counts_once():
    assert search(INDEX, "suit suit") == search(INDEX, "suit")


def test_ties_are_ordered_by_document_name_and_top_limits():
    assert search(INDEX, "tie") == [Hit("a.txt", 1.0), Hit("b.txt", 1.0)]
    assert search(INDEX, "suit", top=2) == [Hit("d.txt", 9.0), Hit("a.txt", 3.0)]
    assert len(search(INDEX, "zero", top=None)) == 4


def test_an_idf_zero_word_filters_nothing_and_adds_nothing():
    assert search(INDEX, "man zero") == search(INDEX, "man")


@pytest.mark.parametrize("query", ["", "   ", "!!!"])
def test_an_empty_query_has_no_result(query):
    assert search(INDEX, query) == []
