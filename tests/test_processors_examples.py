"""The manual's DAGs in examples/ run on LocalEngine and check themselves against plain Python."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["wordcount", "stock_exchange", "tfidf_dag"])
def test_example_runs_and_matches_plain_python(name, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [name, str(tmp_path / "out")])
    load(name).main()
    assert "match" in capsys.readouterr().out


def test_example_dags_have_the_manual_shapes(tmp_path):
    word_count = load("wordcount").build_dag()
    assert [v.name for v in word_count.vertices()] == [
        "source", "tokenize", "accumulate", "combine", "sink"
    ]  # fmt: skip
    stock = load("stock_exchange").build_dag(10, str(tmp_path))
    assert [e.describe() for e in stock.edges()][1:3] == [
        "partitioned, local",
        "partitioned, distributed",
    ]
    tfidf = load("tfidf_dag").build_dag(str(tmp_path), str(tmp_path / "stopwords.txt"))
    edges = {(e.source_name, e.dest_name): e.describe() for e in tfidf.edges()}
    assert edges[("stopword-source", "tokenize")] == "broadcast, local, priority -1"
    assert edges[("doc-source", "doc-count")] == "broadcast, distributed"
    assert edges[("doc-count", "tf-idf")] == "broadcast, local, priority -1"
    assert edges[("tf", "tf-idf")] == "partitioned, distributed"
