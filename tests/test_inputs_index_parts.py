"""`jetspark search` over a partitioned index whose part files went missing or were damaged
(issue 28 item 3): an error naming the part and saying to rebuild, exit code non-zero, never an
answer that the words are in no document."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tfidf_cli import run

from jetspark.partitioning import partition_id
from jetspark.processors.tfidf import open_index
from jetspark.processors.tfidf.parts import part_name

pytestmark = pytest.mark.timeout(120)

DOCUMENTS = {f"d{n}.txt": f"alpha{n} beta{n % 2} gamma{n}\nshared words here\n" for n in range(8)}


@pytest.fixture
def index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A partitioned index of DOCUMENTS, built on LocalEngine."""
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for name, text in DOCUMENTS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    path = tmp_path / "index"
    code, _, err = run(capsys, "tfidf", str(corpus), "--engine", "local", "--index", str(path))
    assert code == 0, err
    code, out, _ = run(capsys, "search", "gamma5", "--index", str(path))
    assert (code, out.split()) == (0, ["2.0794", "d5.txt"])
    return path


def part_of(index: Path, word: str) -> Path:
    return index / part_name(partition_id(word, open_index(index).partitions))


def test_an_index_missing_its_parts_is_an_error_naming_one(
    index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for part in index.glob("part-*"):
        part.unlink()
    code, out, err = run(capsys, "search", "gamma5", "--index", str(index))
    assert code != 0 and out == ""
    assert f"its part {part_of(index, 'gamma5').name} cannot be read" in err
    assert "rebuild the index with `jetspark tfidf`" in err


@pytest.mark.parametrize("damage", ["truncated", "one byte changed", "extended"])
def test_a_damaged_part_is_an_error_naming_it(
    index: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    part = part_of(index, "gamma5")
    data = part.read_bytes()
    damaged = {
        "truncated": data[: len(data) // 2],
        "one byte changed": data[:-1] + bytes([data[-1] ^ 1]),
        "extended": data + b"\xc1",
    }[damage]
    part.write_bytes(damaged)
    code, out, err = run(capsys, "search", "gamma5", "--index", str(index))
    assert code != 0 and out == ""
    assert f"is damaged: its part {part.name} holds {len(damaged)} bytes" in err
    assert f"where the manifest lists {len(data)} bytes" in err and "rebuild the index" in err


def test_the_tsv_export_of_an_index_missing_a_part_fails_naming_it(
    index: Path, tmp_path: Path
) -> None:
    part_of(index, "alpha3").unlink()
    with pytest.raises(Exception, match=f"its part {part_of(index, 'alpha3').name} cannot be"):
        open_index(index).write_tsv(tmp_path / "index.tsv")
    assert not (tmp_path / "index.tsv").exists()
