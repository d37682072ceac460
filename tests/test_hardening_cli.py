"""The command line's bad input (issue 17, "Clear errors"): an empty query, broken and damaged
indexes, a binary stopwords file, an index path that cannot be written, a non-numeric
--members; each exits 2 with a message, before any job runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import pytest
from test_tfidf_cli import books, run  # noqa: F401 (books is a fixture)

from jetspark.core.cli import main
from jetspark.processors.tfidf.index import FORMAT, VERSION

pytestmark = pytest.mark.timeout(60)


def index_file(path: Path, **changes: Any) -> Path:
    document = {
        "format": FORMAT,
        "version": VERSION,
        "root": "/books",
        "tokenizer": "ascii",
        "stopwords": ["the"],
        "documents": ["a.txt", "b.txt"],
        "index": {"jet": [(0, 0.5), (1, 0.25)], "fuel": [(1, 0.75)]},
    }
    document.update(changes)
    for key in [k for k, v in document.items() if v is None]:
        del document[key]
    path.write_bytes(msgpack.packb(document, use_bin_type=True))
    return path


def test_a_good_index_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "search", "jet", "--index", str(index_file(tmp_path / "i")))
    assert code == 0 and out.split() == ["0.5000", "a.txt", "0.2500", "b.txt"]


@pytest.mark.parametrize("query", ["", "   ", "!!! ---"])
def test_a_query_without_words_is_not_blamed_on_stopwords(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], query: str
) -> None:
    code, out, err = run(capsys, "search", query, "--index", str(index_file(tmp_path / "i")))
    assert code == 2 and "has no words to search for" in err and "stopwords" not in out + err


def test_a_query_of_stopwords_still_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "search", "the", "--index", str(index_file(tmp_path / "i")))
    assert code == 0 and "all its words are stopwords" in out


@pytest.mark.parametrize(
    "changes",
    [
        {"documents": None},
        {"index": {"jet": [(5, 0.5)]}},
        {"index": {"jet": "not postings"}},
        {"index": ["jet"]},
        {"stopwords": 3},
    ],
    ids=[
        "no documents",
        "posting of a missing document",
        "postings not pairs",
        "index a list",
        "stopwords a number",
    ],
)
def test_a_structurally_broken_index_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any]
) -> None:
    path = index_file(tmp_path / "i", **changes)
    code, _, err = run(capsys, "search", "jet", "--index", str(path))
    assert code == 2 and "is a damaged jetspark index" in err and "Traceback" not in err


@pytest.mark.parametrize("score", [float("nan"), float("inf")])
def test_a_damaged_score_is_reported_not_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], score: float
) -> None:
    path = index_file(tmp_path / "i", index={"jet": [(0, score)]})
    code, out, err = run(capsys, "search", "jet", "--index", str(path))
    assert code == 2 and "is a damaged jetspark index: 'a.txt' scores" in err
    assert "nan" not in out and "inf" not in out


def test_a_binary_stopwords_file_is_refused_before_the_job(
    books: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stop = tmp_path / "stop.bin"
    stop.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00the\n")
    code, _, err = run(capsys, "tfidf", str(books), "--engine", "local", "--stopwords", str(stop))
    assert code == 2 and "is a binary file, not text" in err and "reading" not in err
    stop.write_bytes(b"caf\xe9\n")
    code, _, err = run(capsys, "tfidf", str(books), "--engine", "local", "--stopwords", str(stop))
    assert code == 2 and "is not UTF-8 text" in err


def test_an_index_path_that_cannot_be_created_fails_before_the_job(
    books: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = "/proc/x" if Path("/proc/self").exists() else str(tmp_path / "missing" / "x")
    code, _, err = run(capsys, "tfidf", str(books), "--engine", "local", "--index", target)
    assert code == 2 and "cannot write" in err and "reading" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tfidf", "--members", "abc"], "argument --members: expected a whole number, got 'abc'"),
        (["search", "x", "--top", "1.5"], "argument --top: expected a whole number, got '1.5'"),
        (["tfidf", "--stopword-threshold", "half"], "expected a number, got 'half'"),
        (["tfidf", "--stopword-threshold", "nan"], "must be between 0 and 1, got nan"),
    ],
)
def test_bad_numbers_are_named_in_plain_words(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "_positive_int" not in err and "_fraction" not in err
