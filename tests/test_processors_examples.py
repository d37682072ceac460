"""The manual's DAGs in examples/ run in one command on both engines and check themselves
against plain Python (the TF-IDF example prints its searches)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = ["wordcount", "stock_exchange", "tfidf_dag"]


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def arguments(name: str, tmp_path: Path) -> list[str]:
    """The stock exchange writes its files into a directory of the test's own."""
    return [str(tmp_path / "out")] if name == "stock_exchange" else []


def check_output(name: str, out: str, tmp_path: Path) -> None:
    if name == "tfidf_dag":
        assert "'jet fuel': jet.txt" in out and "over 4 documents" in out
    else:
        assert "match" in out
    if name == "stock_exchange":
        files = sorted(p.name for p in (tmp_path / "out").iterdir())
        assert files == ["0", "1"]  # one per sink processor, both committed


@pytest.mark.parametrize("name", NAMES)
def test_example_runs_on_the_local_engine(name, tmp_path, capsys):
    load(name).main([*arguments(name, tmp_path), "--engine", "local", "--members", "2"])
    check_output(name, capsys.readouterr().out, tmp_path)


@pytest.mark.spark
@pytest.mark.parametrize("name", NAMES)
def test_example_runs_on_spark(name, tmp_path, capsys, spark_engine):
    load(name).main([*arguments(name, tmp_path), "--engine", "spark"], spark=spark_engine.context)
    check_output(name, capsys.readouterr().out, tmp_path)


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
