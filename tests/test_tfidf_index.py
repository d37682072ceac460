"""The index the DAG builds equals an independent plain-Python TF-IDF (the manual's "Java
Streams" version) on a generated corpus, on LocalEngine and on SparkEngine; derived stopwords
equal a plain count; the saved index round-trips and its TSV export has the documented format.
"""

from __future__ import annotations

import math
import os
import random
import re
from collections import Counter, defaultdict
from pathlib import Path

import msgpack
import pytest

from jetspark.core import LocalEngine
from jetspark.core.files import write_atomically_with
from jetspark.processors.tfidf import (
    InputError,
    TfIdfIndex,
    build_index,
    derive_stopwords,
    scan_corpus,
)
from jetspark.processors.tfidf.index import write_tsv

STOPWORDS = frozenset({"the", "of", "and", "a"})


def write_corpus(root: Path, documents: int = 40, seed: int = 11) -> None:
    """Deterministic documents in three subdirectories: Zipf-like words in mixed case, ASCII and
    non-ASCII letters, punctuation, CRLF or LF line ends, some with a BOM, one with undecodable
    bytes, every 13th empty.
    """
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "té", "ß", "jo", "an", "the", "of", "a", "and"]
    vocabulary = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 3))) for _ in range(400)})
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    separators = [" ", ", ", ". ", " - ", "\t", "!? ", "_"]
    for n in range(documents):
        path = root / f"d{n % 3}" / f"doc{n:03}.txt"
        path.parent.mkdir(exist_ok=True)
        if n % 13 == 0:
            path.write_bytes(b"")
            continue
        lines = []
        for _ in range(rng.randint(1, 30)):
            words = rng.choices(vocabulary, weights, k=rng.randint(0, 12))
            words = [w.upper() if rng.random() < 0.1 else w for w in words]
            lines.append("".join(w + rng.choice(separators) for w in words))
        text = ("\r\n" if n % 2 else "\n").join(lines)
        data = ("\ufeff" if n % 5 == 0 else "").encode() + text.encode("utf-8")
        path.write_bytes(data + (b" \xff\xfe tail" if n == 7 else b""))


def java_streams_index(root: Path, names: list[str], stopwords: frozenset[str]) -> dict:
    """The manual's Java Streams TF-IDF, in plain Python: word -> {document: score}."""
    delimiter = re.compile(r"\W+", re.ASCII)
    doc_words = [
        (name, word)
        for name in names
        for line in (root / name).read_bytes().decode("utf-8", "replace").split("\n")
        for word in delimiter.split(line.lower())
        if word and word not in stopwords
    ]
    log_doc_count = math.log(len(names))
    tf_map = Counter(doc_words)
    by_word: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for (name, word), tf in tf_map.items():
        by_word[word].append((name, tf))
    return {
        word: {name: tf * (log_doc_count - math.log(len(entries))) for name, tf in entries}
        for word, entries in by_word.items()
    }


def as_names(index: TfIdfIndex) -> dict:
    """The index as word -> {document name: score}."""
    return {
        word: {index.documents[doc_id]: score for doc_id, score in postings}
        for word, postings in index.words.items()
    }


def assert_same_index(expected: dict, actual: dict) -> None:
    assert actual.keys() == expected.keys()
    for word, scores in expected.items():
        assert actual[word].keys() == scores.keys(), word
        for name, score in scores.items():
            assert math.isclose(actual[word][name], score, rel_tol=1e-9, abs_tol=1e-9), (word, name)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("generated-corpus")
    write_corpus(root)
    return root


def check_engine(engine: object, corpus_dir: Path) -> None:
    """The engine's index of the generated corpus equals the plain-Python one to 1e-9."""
    corpus = scan_corpus(corpus_dir)
    assert corpus.empty == 4
    index = build_index(engine, corpus, STOPWORDS)
    expected = java_streams_index(corpus_dir, list(corpus.documents), STOPWORDS)
    assert_same_index(expected, as_names(index))
    assert not STOPWORDS & index.words.keys()
    assert all(word.isascii() for word in index.words), "ASCII \\W splits at 'é' and 'ß'"
    assert index.posting_count > 1000


def test_local_engine_two_members_equals_plain_python(corpus_dir):
    check_engine(LocalEngine(members=2), corpus_dir)


@pytest.mark.spark
def test_spark_engine_equals_plain_python(spark_engine, corpus_dir):
    check_engine(spark_engine, corpus_dir)


@pytest.mark.spark
def test_spark_engine_with_three_members_equals_plain_python(spark_engine, corpus_dir):
    from jetspark.core.spark import SparkEngine

    check_engine(SparkEngine(spark=spark_engine.context, members=3), corpus_dir)


def plain_stopwords(root: Path, names: list[str], threshold: float) -> set[str]:
    """Words in more than `threshold` of the documents, counted in plain Python."""
    df = Counter(
        word
        for name in names
        for word in set(
            re.findall(r"\w+", (root / name).read_text("utf-8", "replace").lower(), re.ASCII)
        )
    )
    return {word for word, count in df.items() if count > threshold * len(names)}


@pytest.mark.parametrize("threshold", [0.2, 0.5])
def test_derived_stopwords_are_the_words_in_more_than_the_threshold_of_documents(
    corpus_dir, threshold
):
    corpus = scan_corpus(corpus_dir)
    derived = derive_stopwords(LocalEngine(members=2), corpus, threshold)
    assert derived == plain_stopwords(corpus_dir, list(corpus.documents), threshold)
    assert derived


@pytest.mark.spark
def test_derived_stopwords_on_spark(spark_engine, corpus_dir):
    corpus = scan_corpus(corpus_dir)
    expected = plain_stopwords(corpus_dir, list(corpus.documents), 0.3)
    assert derive_stopwords(spark_engine, corpus, 0.3) == expected


def test_a_word_in_every_document_is_kept_with_score_zero(tmp_path):
    for name, text in {"a.txt": "jet engine", "b.txt": "jet stream", "c.txt": "Jet"}.items():
        (tmp_path / name).write_text(text)
    index = build_index(LocalEngine(), scan_corpus(tmp_path))
    assert sorted(index.words["jet"]) == [(0, 0.0), (1, 0.0), (2, 0.0)]
    assert dict(index.words["engine"]) == {0: math.log(3)}


def small_index() -> TfIdfIndex:
    return TfIdfIndex(
        ("a.txt", "sub/b\tab\tname.txt", "c.txt"),
        {"jet": [(2, 0.5), (0, 1.25)], "spark": [(1, 2.0)], "every": [(0, 0.0), (1, 0.0)]},
        frozenset({"the", "of"}),
        "unicode",
        "/docs",
    )


def test_the_index_round_trips_through_msgpack(tmp_path):
    path = tmp_path / "index.msgpack"
    small_index().save(path)
    loaded = TfIdfIndex.load(path)
    assert loaded.documents == small_index().documents
    assert loaded.words == {
        "every": ((0, 0.0), (1, 0.0)),
        "jet": ((0, 1.25), (2, 0.5)),
        "spark": ((1, 2.0),),
    }
    assert (loaded.stopwords, loaded.tokenizer, loaded.root) == (
        frozenset({"the", "of"}),
        "unicode",
        "/docs",
    )
    assert os.listdir(tmp_path) == ["index.msgpack"]


def test_the_saved_file_has_the_documented_layout(tmp_path):
    small_index().save(tmp_path / "i")
    document = msgpack.unpackb((tmp_path / "i").read_bytes())
    assert document["format"] == "jetspark-tfidf-index" and document["version"] == 1
    assert document["stopwords"] == ["of", "the"]
    assert document["index"]["jet"] == [[0, 1.25], [2, 0.5]]


def test_tsv_lines_are_word_document_score_sorted_with_escaped_names(tmp_path):
    small_index().write_tsv(tmp_path / "index.tsv")
    assert (tmp_path / "index.tsv").read_text().splitlines() == [
        "every\ta.txt\t0.0",
        "every\tsub/b\\tab\\tname.txt\t0.0",
        "jet\ta.txt\t1.25",
        "jet\tc.txt\t0.5",
        "spark\tsub/b\\tab\\tname.txt\t2.0",
    ]


@pytest.mark.parametrize(
    ("documents", "postings", "expected_order"),
    [
        (("a.txt", "b.txt", "c.txt"), ((2, 0.5), (0, 1.5), (1, 1.0)), ["a.txt", "b.txt", "c.txt"]),
        # escaped, "a\tb" ("a\\tb") sorts after "a\\x" ("a\\\\x"): raw order no longer holds
        (("a\tb", "a\\x"), ((0, 1.0), (1, 2.0)), ["a\\\\x", "a\\tb"]),
    ],
    ids=["postings out of order", "escaping reorders names"],
)
def test_tsv_postings_follow_the_escaped_document_names(
    tmp_path, documents, postings, expected_order
):
    write_tsv(tmp_path / "index.tsv", documents, [("word", postings)])
    lines = (tmp_path / "index.tsv").read_text().splitlines()
    assert [line.split("\t")[1] for line in lines] == expected_order


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "index.msgpack"
    target.write_bytes(b"old")

    def fail(file: object) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically_with(str(target), fail)
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["index.msgpack"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read the index .*No such file"),
        (b"\xc1garbage", "not a jetspark index"),
        (msgpack.packb({"format": "other"}), "not a jetspark TF-IDF index"),
        (msgpack.packb({"format": "jetspark-tfidf-index", "version": 9}), "version 9"),
    ],
)
def test_loading_a_missing_or_foreign_file_is_an_input_error(tmp_path, content, message):
    path = tmp_path / "index.msgpack"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        TfIdfIndex.load(path)
