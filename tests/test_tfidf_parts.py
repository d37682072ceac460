"""The partitioned TF-IDF index: written by the tasks, equal to the single-file index, searched
by opening only the parts of the query's words."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from pyspark import cloudpickle
from test_tfidf_cli import BOOKS, run

from jetspark.core import JobFailedError, LocalEngine
from jetspark.partitioning import partition_id
from jetspark.processors.tfidf import (
    PartitionedIndex,
    TfIdfIndex,
    derive_stopwords,
    open_index,
    scan_corpus,
    search,
    write_index,
)
from jetspark.processors.tfidf.errors import InputError
from jetspark.processors.tfidf.index import check_writable, write_tsv
from jetspark.processors.tfidf.parts import part_name
from jetspark.processors.tfidf.tsv import write_parts_tsv

pytestmark = pytest.mark.timeout(120)
cloudpickle.register_pickle_by_value(sys.modules[__name__])

STOPWORDS = frozenset({"the", "a", "and", "of", "is"})


@pytest.fixture
def books(tmp_path: Path) -> Path:
    root = tmp_path / "books"
    for name, text in BOOKS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text * 3, encoding="utf-8")
    (root / "long-line.txt").write_text("jet fuel spark " * 50_000, encoding="utf-8")
    return root


def single_file_index(books: Path, tmp_path: Path) -> TfIdfIndex:
    path = str(tmp_path / "single.msgpack")
    write_index(LocalEngine(), scan_corpus(books), path, STOPWORDS)
    return TfIdfIndex.load(path)


@pytest.mark.parametrize("members", [1, 3])
def test_the_partitioned_index_holds_what_the_single_file_holds(books, tmp_path, members):
    expected = single_file_index(books, tmp_path)
    path = str(tmp_path / "index")
    written = write_index(LocalEngine(members=members), scan_corpus(books), path, STOPWORDS)
    index = open_index(path)
    assert isinstance(index, PartitionedIndex) and isinstance(written, PartitionedIndex)
    assert index.documents == expected.documents and index.stopwords == STOPWORDS
    assert index.word_count == expected.word_count
    assert index.posting_count == expected.posting_count
    entries = list(index.entries())
    assert [word for word, _ in entries] == sorted(expected.words)
    for word, postings in entries:
        assert list(postings) == sorted(expected.words[word])
        assert index.postings(word) == postings
    assert index.postings("absent") == ()
    index.write_tsv(tmp_path / "parts.tsv")
    expected.write_tsv(tmp_path / "single.tsv")
    assert (tmp_path / "parts.tsv").read_text() == (tmp_path / "single.tsv").read_text()
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no staging


def test_search_opens_only_the_parts_of_the_query_words(books, tmp_path):
    path = tmp_path / "index"
    write_index(LocalEngine(), scan_corpus(books), str(path), STOPWORDS)
    index = open_index(path)
    expected = search(index, "jet fuel")
    assert expected and expected[0].document == "long-line.txt"
    needed = {part_name(partition_id(word, index.partitions)) for word in ("jet", "fuel")}
    for name in os.listdir(path):
        if name.startswith("part-") and name not in needed:
            os.remove(path / name)
    assert search(open_index(path), "jet fuel") == expected


def test_a_new_index_replaces_an_old_one_but_never_a_foreign_directory(books, tmp_path):
    path = tmp_path / "index"
    write_index(LocalEngine(), scan_corpus(books), str(path), STOPWORDS)
    check_writable(path)  # an index directory may be replaced
    write_index(LocalEngine(members=2), scan_corpus(books), str(path), frozenset())
    assert open_index(path).stopwords == frozenset()
    (tmp_path / "mine").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        check_writable(tmp_path / "mine")


def test_a_failed_job_keeps_the_old_index_and_leaves_no_staging_directory(books, tmp_path):
    path = tmp_path / "index"
    write_index(LocalEngine(), scan_corpus(books), str(path), STOPWORDS)
    with pytest.raises(JobFailedError, match="unknown tokenizer"):
        write_index(LocalEngine(), scan_corpus(books), str(path), tokenizer="no such tokenizer")
    assert open_index(path).stopwords == STOPWORDS
    assert sorted(os.listdir(tmp_path)) == ["books", "index"]


@pytest.mark.spark
def test_spark_tasks_write_the_same_index_as_local_engine(books, tmp_path, capsys, spark_engine):
    local_tsv, spark_tsv = tmp_path / "local.tsv", tmp_path / "spark.tsv"
    code, _, err = run(
        capsys, "tfidf", str(books), "--engine", "local", "--index", str(tmp_path / "local"),
        "--tsv", str(local_tsv),
    )  # fmt: skip
    assert code == 0, err
    code, _, err = run(
        capsys, "tfidf", str(books), "--members", "3", "--index", str(tmp_path / "spark"),
        "--tsv", str(spark_tsv), spark=spark_engine.context,
    )  # fmt: skip
    assert code == 0, err
    assert spark_tsv.read_text() == local_tsv.read_text()
    code, out, _ = run(capsys, "search", "stream events", "--index", str(tmp_path / "spark"))
    assert out.split()[1:] == ["stream/events.txt"]


@pytest.mark.parametrize("name", ["single.msgpack", "partitioned"])
@pytest.mark.parametrize("threshold", [0.5, 0.2])
def test_stopwords_derived_in_the_index_job_equal_the_derivation_job(
    books, tmp_path, name, threshold
):
    corpus = scan_corpus(books)
    derived = derive_stopwords(LocalEngine(), corpus, threshold)
    assert derived  # the threshold leaves some words out
    two_jobs = tmp_path / f"two-{name}"
    one_job = tmp_path / f"one-{name}"
    write_index(LocalEngine(members=2), corpus, str(two_jobs), derived)
    index = write_index(
        LocalEngine(members=2), corpus, str(one_job), None, stopword_threshold=threshold
    )
    assert index.stopwords == derived
    open_index(two_jobs).write_tsv(tmp_path / "two.tsv")
    open_index(one_job).write_tsv(tmp_path / "one.tsv")
    assert (tmp_path / "one.tsv").read_text() == (tmp_path / "two.tsv").read_text()
    assert open_index(one_job).stopwords == derived


PARTS = {
    0: [("alpha", ((1, 0.5), (0, 2.0))), ("delta", ((2, 1.0 / 3),))],
    3: [("beta", ((0, 1e-17),)), ("echo", ((1, 4.0), (2, 0.1)))],
    4: [("charlie", ((2, 7.25), (0, 0.0)))],
    7: [("apple", ((0, 1.5),)), ("zulu", ((1, 2.5),))],
}
"""Parts as the sink writes them: each sorted by word, a word's postings in any order."""


@pytest.mark.parametrize("processes", [1, 2, 3, 8])
def test_the_tsv_formatted_in_processes_equals_the_tsv_formatted_in_order(tmp_path, processes):
    documents = ("a\tb", "a\\x", "plain.txt")  # escaping reorders the first two names
    merged = sorted((entry for entries in PARTS.values() for entry in entries), key=lambda e: e[0])
    write_tsv(tmp_path / "expected.tsv", documents, merged)

    write_parts_tsv(
        tmp_path / "index.tsv", documents, PARTS.__getitem__, sorted(PARTS), processes=processes
    )

    assert (tmp_path / "index.tsv").read_bytes() == (tmp_path / "expected.tsv").read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["expected.tsv", "index.tsv"]  # no scratch left
