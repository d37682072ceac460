"""Listing a corpus: names, order, the default stdlib corpus, and every kind of bad input."""

from __future__ import annotations

import os

import pytest

from jetspark.processors.tfidf import InputError, default_corpus, describe_skipped, scan_corpus
from jetspark.processors.tfidf.corpus import SkippedFile, open_document


def test_documents_are_relative_posix_names_sorted_hidden_ones_left_out(tmp_path):
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("a")
    (tmp_path / ".hidden.txt").write_text("h")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("c")
    corpus = scan_corpus(tmp_path)
    assert corpus.documents == ("b.txt", "sub/a.txt")
    assert corpus.doc_names() == {0: "b.txt", 1: "sub/a.txt"}
    assert corpus.root == tmp_path.resolve()
    assert corpus.size == 2


def test_pattern_and_excluded_directories(tmp_path):
    for name in ("m.py", "notes.txt", "tests/t.py", "pkg/n.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x")
    assert scan_corpus(tmp_path, "*.py", frozenset({"tests"})).documents == ("m.py", "pkg/n.py")


def test_binary_and_unreadable_files_are_skipped_empty_ones_kept(tmp_path):
    (tmp_path / "text.txt").write_text("words")
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "broken").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "pipe")
    corpus = scan_corpus(tmp_path)
    assert corpus.documents == ("empty.txt", "text.txt")
    assert corpus.empty == 1
    assert corpus.skipped == (
        SkippedFile("broken", "unreadable: No such file or directory"),
        SkippedFile("image.png", "binary (NUL bytes)"),
        SkippedFile("pipe", "not a regular file"),
    )


def test_a_nul_byte_after_the_first_kilobyte_is_text(tmp_path):
    (tmp_path / "late.txt").write_bytes(b"x" * 1024 + b"\x00")
    assert scan_corpus(tmp_path).documents == ("late.txt",)


def test_a_file_without_read_permission_is_skipped(tmp_path, monkeypatch):
    (tmp_path / "ok.txt").write_text("ok")
    secret = tmp_path / "secret.txt"
    secret.write_text("s")
    real_open = open

    def open_denying_secret(path, *args, **kwargs):
        """Root reads any file, so a chmod(0) would not be refused: refuse it here instead."""
        if os.fspath(path) == os.fspath(secret):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", open_denying_secret)
    assert scan_corpus(tmp_path).skipped == (
        SkippedFile("secret.txt", "unreadable: Permission denied"),
    )


def test_a_missing_directory_a_file_and_an_empty_directory_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        scan_corpus(tmp_path / "missing")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(InputError, match="is not a directory"):
        scan_corpus(tmp_path / "f.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no document in"):
        scan_corpus(tmp_path / "empty")


def test_a_directory_of_binary_files_only_names_them(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\x00")
    with pytest.raises(InputError, match=r"no readable text document .*a\.bin \(binary"):
        scan_corpus(tmp_path)


def test_describe_skipped_shows_the_first_few():
    skipped = [SkippedFile(f"f{i}", "binary (NUL bytes)") for i in range(7)]
    assert describe_skipped(skipped, shown=2) == (
        "skipped 7 files: f0 (binary (NUL bytes)), f1 (binary (NUL bytes)) and 5 more"
    )
    assert describe_skipped(skipped[:1]) == "skipped 1 file: f0 (binary (NUL bytes))"


def test_documents_are_read_as_utf8_with_undecodable_bytes_replaced(tmp_path):
    (tmp_path / "d").write_bytes(b"\xef\xbb\xbfok\r\nbad\xfe\xffend\n\nlast")
    with open_document(tmp_path / "d") as file:
        assert file.read().split("\n") == ["\ufeffok", "bad\ufffd\ufffdend", "", "last"]


def test_the_default_corpus_is_the_stdlib_modules_without_tests_or_packages():
    corpus = default_corpus()
    assert "json/decoder.py" in corpus.documents
    assert all(name.endswith(".py") for name in corpus.documents)
    parts = {part for name in corpus.documents for part in name.split("/")[:-1]}
    assert not parts & {"site-packages", "test", "tests", "idle_test", "__pycache__"}
