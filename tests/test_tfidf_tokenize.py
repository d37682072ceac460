"""The one tokenizer: Java's ASCII `\\W` by default, Unicode on request, BOM, case, stopwords."""

from __future__ import annotations

import re

import pytest

from jetspark.processors.tfidf import ASCII, UNICODE, Tokenizer


def java_split(line: str) -> list[str]:
    """Jet's sample: lowercase, split on ASCII `\\W+`, empty tokens dropped."""
    return [t for t in re.split(r"\W+", line.lower(), flags=re.ASCII) if t]


@pytest.mark.parametrize(
    "line",
    [
        "The quick brown fox",
        "  leading, trailing!  ",
        "snake_case and CamelCase, x2 = y_3",
        "café naïve Größe",
        "\ufeffbom at the start",
        "tabs\tand\x0bvertical\x0ctabs",
        "",
        "---",
    ],
)
def test_ascii_equals_splitting_on_java_ascii_non_word_chars(line):
    assert Tokenizer(ASCII).words(line) == java_split(line)


def test_ascii_splits_words_at_non_ascii_letters():
    assert Tokenizer(ASCII).words("Café Größe") == ["caf", "gr", "e"]


def test_unicode_keeps_letters_of_any_script():
    assert Tokenizer(UNICODE).words("Café Größe Ελληνικά 東京") == [
        "café",
        "größe",
        "ελληνικά",
        "東京",
    ]


@pytest.mark.parametrize("kind", [ASCII, UNICODE])
def test_a_bom_and_replacement_characters_are_non_word_characters(kind):
    assert Tokenizer(kind).words("\ufeffjet\ufffdspark") == ["jet", "spark"]


@pytest.mark.parametrize("kind", [ASCII, UNICODE])
def test_words_are_lowercased_and_underscores_and_digits_are_word_characters(kind):
    assert Tokenizer(kind).words("JSON parse_JSON HTTP2") == ["json", "parse_json", "http2"]


def test_stopwords_are_left_out_after_lowercasing():
    tokenizer = Tokenizer(ASCII, frozenset({"the", "of"}))
    assert tokenizer.words("The Man of THE hour") == ["man", "hour"]


def test_an_unknown_tokenizer_is_refused():
    with pytest.raises(ValueError, match="unknown tokenizer 'latin'"):
        Tokenizer("latin")
