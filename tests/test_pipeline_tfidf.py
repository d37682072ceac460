"""examples/pipeline/tfidf_index.py: the TF-IDF index written as a pipeline is byte-identical
to the Core API job's index, on LocalEngine(2) and on SparkEngine."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "pipeline"
BOOKS = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "books"


def example() -> Any:
    sys.path.insert(0, str(EXAMPLES))  # the example imports runner, as a script does
    spec = importlib.util.spec_from_file_location(
        "pipeline_tfidf_index", EXAMPLES / "tfidf_index.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pipeline_index_is_the_core_jobs_byte_for_byte(capsys: Any) -> None:
    example().main(["--engine", "local", "--members", "2"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "tf-idf: ran on the local engine (2 members), mode local, completed"
    assert out[1] == (
        "21 words, 25 postings over 4 documents: byte-identical to the Core API job's index"
    )
    assert out[2] == "'jet fuel': jet.txt (2.77)"


@pytest.mark.skipif(not BOOKS.is_dir(), reason="the shared books are not beside the repository")
def test_the_pipeline_indexes_real_books_as_the_core_job_does(tmp_path: Path, capsys: Any) -> None:
    books = tmp_path / "books"
    books.mkdir()
    for name in sorted(p.name for p in BOOKS.iterdir())[:6]:
        (books / name).symlink_to(BOOKS / name)
    example().main(["--engine", "local", "--members", "2", str(books)])
    assert "byte-identical to the Core API job's index" in capsys.readouterr().out


@pytest.mark.spark
def test_the_pipeline_index_is_byte_identical_on_spark(spark_engine: Any, capsys: Any) -> None:
    example().main(["--engine", "spark"], spark=spark_engine.context)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("tf-idf: ran on ") and out[0].endswith("mode stages, completed")
    assert "byte-identical to the Core API job's index" in out[1]
