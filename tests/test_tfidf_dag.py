"""The TF-IDF DAG has the manual's shape (§8.2.3), and its document readers block."""

from __future__ import annotations

from jetspark.partitioning import DEFAULT, HASH_CODE
from jetspark.processors.tfidf import build_dag
from jetspark.processors.tfidf.stopwords import build_stopwords_dag


def edges_of(dag) -> dict[tuple[str, int, str, int], str]:
    return {
        (e.source_name, e.source_ordinal, e.dest_name, e.dest_ordinal): e.describe()
        for e in dag.edges()
    }


def test_the_edges_are_the_manuals():
    assert edges_of(build_dag("/docs", {"the"})) == {
        ("stopword-source", 0, "tokenize", 0): "broadcast, local, priority -1",
        ("doc-lines", 0, "tokenize", 1): "unicast, local",
        ("doc-source", 0, "doc-count", 0): "broadcast, distributed",
        ("doc-source", 1, "doc-lines", 0): "unicast, local",
        ("tokenize", 0, "tf", 0): "partitioned, local",
        ("doc-count", 0, "tf-idf", 0): "broadcast, local, priority -1",
        ("tf", 0, "tf-idf", 1): "partitioned, distributed",
        ("tf-idf", 0, "sink", 0): "partitioned, local",  # a word partition on one sink
    }


def test_partitioners_parallelism_and_cooperativeness():
    dag = build_dag("/docs")
    edges = {(e.source_name, e.dest_name): e for e in dag.edges()}
    assert edges["tokenize", "tf"].partitioner is HASH_CODE  # local: Python's hash is safe
    assert type(edges["tf", "tf-idf"].partitioner) is type(DEFAULT)  # MurmurHash3 across members
    assert dag.get_vertex("doc-count").get_local_parallelism() == 1
    assert dag.get_vertex("stopword-source").get_local_parallelism() == 1
    doc_lines = dag.get_vertex("doc-lines").supplier()
    assert doc_lines.is_cooperative() is False
    assert dag.get_vertex("tokenize").supplier().is_cooperative() is True


def test_the_stopwords_dag_is_a_word_count_of_distinct_document_words():
    dag = build_stopwords_dag("/docs", document_count=10, threshold=0.5)
    assert [v.name for v in dag.vertices()] == [
        "doc-source", "doc-words", "df-accumulate", "df-combine", "frequent", "sink"
    ]  # fmt: skip
    assert edges_of(dag)[("df-accumulate", 0, "df-combine", 0)] == "partitioned, distributed"
    assert dag.get_vertex("doc-words").supplier().is_cooperative() is False
    dag.validate()
