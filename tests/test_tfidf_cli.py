"""The `jetspark` command line end to end: tfidf, search, stopwords, explain, bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jetspark.core.cli import main

BOOKS = {
    "jet.txt": "The jet engine burns fuel.\nA jet flies fast and the jet is loud.\n",
    "spark.txt": "A spark lights the fuel.\nSpark clusters process data fast.\n",
    "stream/events.txt": "A stream of events flows.\nThe jet processes the stream of events.\n",
    "batch.txt": "A batch job reads data.\nThe batch ends and the data rests.\n",
}


@pytest.fixture
def books(tmp_path: Path) -> Path:
    root = tmp_path / "books"
    for name, text in BOOKS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str, spark: object = None) -> tuple:
    """(exit code, stdout, stderr) of `jetspark argv...`."""
    code = main(list(argv), spark=spark)
    out, err = capsys.readouterr()
    return code, out, err


def test_tfidf_then_search_on_the_local_engine(books, tmp_path, capsys):
    index, tsv = tmp_path / "books.msgpack", tmp_path / "books.tsv"
    code, out, err = run(
        capsys, "tfidf", str(books), "--engine", "local", "--index", str(index), "--tsv", str(tsv)
    )
    assert code == 0, err
    assert f"reading 4 documents (0.0 MB) from {books}" in err
    assert "deriving the stopwords in the index job" in err
    assert "documents:      4 (0 empty)" in out
    assert f"index:          {index}" in out and "elapsed:" in out and "distinct words:" in out
    assert "jet\tjet.txt\t" in tsv.read_text()
    code, out, _ = run(capsys, "search", "the jet fuel", "--index", str(index))
    assert code == 0
    assert [line.split()[1] for line in out.splitlines()] == ["jet.txt"]
    code, out, _ = run(capsys, "search", "jet", "--index", str(index), "--top", "1")
    assert out.split()[1:] == ["jet.txt"]


def test_stopwords_derived_and_from_a_file(books, tmp_path, capsys):
    code, out, _ = run(capsys, "stopwords", str(books), "--engine", "local")
    assert code == 0
    assert out.split() == ["a", "the"]  # in all four books; "jet", "fuel", "data" in two
    (tmp_path / "stop.txt").write_text("\ufeffThe\n\nA\nof\n", encoding="utf-8")
    index = tmp_path / "i.msgpack"
    code, out, err = run(
        capsys, "tfidf", str(books), "--engine", "local", "--members", "2",
        "--stopwords", str(tmp_path / "stop.txt"), "--index", str(index),
    )  # fmt: skip
    assert code == 0 and "using 3 stopwords from" in err and "(3 stopwords left out)" in out
    code, out, _ = run(capsys, "search", "of", "--index", str(index))
    assert "all its words are stopwords" in out


def test_bad_and_unusual_files_are_reported_not_fatal(books, tmp_path, capsys):
    (books / "blob.bin").write_bytes(b"\x7fELF\x00\x01binary")
    (books / "empty.txt").write_bytes(b"")
    (books / "latin1.txt").write_bytes("café au lait, jet".encode("latin-1"))
    (books / "dangling.txt").symlink_to(books / "nowhere")
    index = tmp_path / "i.msgpack"
    code, out, err = run(capsys, "tfidf", str(books), "--engine", "local", "--index", str(index))
    assert code == 0, err
    assert "documents:      6 (1 empty)" in out
    assert (
        "skipped 2 files: blob.bin (binary (NUL bytes)), "
        "dangling.txt (unreadable: No such file or directory)"
    ) in out
    code, out, _ = run(capsys, "search", "lait", "--index", str(index))
    assert out.split()[1:] == ["latin1.txt"]


def test_a_corpus_that_cannot_be_indexed_exits_2(tmp_path, capsys):
    code, out, err = run(capsys, "tfidf", str(tmp_path / "missing"), "--engine", "local")
    assert (code, out) == (2, "")
    assert f"jetspark tfidf: error: the directory '{tmp_path / 'missing'}' does not exist" in err
    assert run(capsys, "tfidf", str(tmp_path), "--engine", "local")[2].startswith(
        "jetspark tfidf: error: no document in"
    )
    (tmp_path / "x.bin").write_bytes(b"\0")
    code, _, err = run(capsys, "tfidf", str(tmp_path), "--engine", "local")
    assert code == 2 and "no readable text document" in err and "x.bin (binary" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "jet", "--index", "/nonexistent/i.msgpack"], "cannot read the index"),
        (["tfidf", "--stopwords", "/nonexistent/s.txt"], "cannot read the stopwords file"),
        (["tfidf", "--index", "/nonexistent/i"], "directory '/nonexistent' does not exist"),
        (["tfidf", "--tsv", "/"], "cannot write '/': it is a directory"),
        (["tfidf", "--engine", "local", "--master", "local[2]"], "--master applies to"),
        (["tfidf", "--members", "0"], "must be at least 1"),
        (["tfidf", "--stopword-threshold", "2"], "must be between 0 and 1"),
        (["search", "jet", "--top", "0"], "must be at least 1"),
        (["index"], "invalid choice: 'index'"),
        ([], "required: COMMAND"),
    ],
)
def test_usage_and_input_errors_exit_2_with_a_message(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err


def test_a_foreign_index_file_exits_2(tmp_path, capsys):
    (tmp_path / "i").write_text("not an index")
    code, _, err = run(capsys, "search", "x", "--index", str(tmp_path / "i"))
    assert code == 2 and "is not a jetspark" in err


def test_the_default_index_path_is_in_the_working_directory(books, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "tfidf", str(books), "--engine", "local")[0] == 0
    assert (tmp_path / "jetspark-index" / "MANIFEST.msgpack").is_file()  # partitioned
    code, out, _ = run(capsys, "search", "spark data")
    assert code == 0 and out.split()[1:] == ["spark.txt"]


def test_the_stdlib_default_corpus_ranks_a_json_module_first_for_parse_json(tmp_path, capsys):
    index = tmp_path / "stdlib.msgpack"
    code, out, err = run(capsys, "tfidf", "--engine", "local", "--index", str(index))
    assert code == 0, err
    code, out, _ = run(capsys, "search", "parse json", "--index", str(index))
    assert code == 0
    assert out.split()[1].startswith("json/"), out


def test_python_dash_m_runs_the_command_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "jetspark.core", "search", "x", "--index", str(tmp_path / "no")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "cannot read the index" in result.stderr


@pytest.mark.spark
def test_tfidf_on_spark_with_an_injected_context(books, tmp_path, capsys, spark_engine):
    index = tmp_path / "i.msgpack"
    code, out, err = run(
        capsys, "tfidf", str(books), "--members", "3", "--index", str(index),
        spark=spark_engine.context,
    )  # fmt: skip
    assert code == 0, err
    assert "building the index on Spark local[2] (3 members)" in err
    assert "Spark stage" in err and "finished" in err
    code, out, _ = run(capsys, "search", "stream events", "--index", str(index))
    assert out.split()[1:] == ["stream/events.txt"]


@pytest.mark.spark
def test_explain_prints_the_spark_plan_of_the_manual_dag(capsys, spark_engine):
    code, out, _ = run(capsys, "explain", "tfidf", "--members", "3", spark=spark_engine.context)
    assert code == 0
    assert "DAG 'tf-idf' on Spark: 3 members, 2 stages" in out
    assert "in  shuffle from stage 0: tf:0 -> tf-idf:1  partitioned by word_of" in out
    assert "local edge  doc-count:0 -> tf-idf:0  broadcast, priority -1" in out


@pytest.mark.spark
@pytest.mark.parametrize("document", ["docs/design.md", "docs/tfidf.md"])
def test_the_plan_the_docs_show_is_the_one_explain_prints(capsys, spark_engine, document):
    text = (Path(__file__).resolve().parent.parent / document).read_text(encoding="utf-8")
    shown = next(
        block
        for block in text.split("```")
        if block.lstrip("\n").startswith("DAG 'tf-idf' on Spark: 2 members")
    )
    code, out, _ = run(capsys, "explain", "tfidf", "--members", "2", spark=spark_engine.context)
    assert code == 0
    assert out.strip() == shown.strip()
