"""Temporary files nobody can steer (issue 17, item 14): the transactional sink and the atomic
writer create their temporary files exclusively under random names, follow no planted link,
and leave no temporary file behind when a write fails."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from jetspark.core import DAG, JobConfig, LocalEngine, ProcessingGuarantee
from jetspark.core import files as files_module
from jetspark.core.files import create_exclusive, write_atomically
from jetspark.edges import between
from jetspark.processors import generate_p, write_file_transactional_p

pytestmark = pytest.mark.timeout(30)


def plant_links(out: Path, victim: Path, names: list[str]) -> None:
    out.mkdir()
    for name in names:
        os.symlink(victim, out / name)


@pytest.mark.parametrize("guarantee", [ProcessingGuarantee.NONE, ProcessingGuarantee.EXACTLY_ONCE])
def test_links_planted_at_the_sinks_old_temporary_names_are_never_written_through(
    tmp_path: Path, guarantee: ProcessingGuarantee
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    plant_links(out, victim, [f".part-0000{i}-0000000{e}.tmp" for i in range(2) for e in range(3)])
    dag = DAG()
    source = dag.new_vertex("numbers", generate_p(100), 2)
    dag.edge(between(source, dag.new_vertex("sink", write_file_transactional_p(str(out)), 2)))
    LocalEngine().new_job(dag, JobConfig(processing_guarantee=guarantee)).join(timeout=20)
    assert victim.read_text() == "precious\n"
    published = sorted(out.glob("part-*"))
    assert published and not any(path.is_symlink() for path in published)
    lines = [line for path in published for line in path.read_text().splitlines()]
    assert sorted(lines, key=int) == [str(n) for n in range(100)]


def test_a_planted_name_is_skipped_never_opened(tmp_path: Path, monkeypatch: Any) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    guesses = iter(["a" * 32, "b" * 32])
    monkeypatch.setattr(files_module.secrets, "token_hex", lambda n: next(guesses))
    os.symlink(victim, tmp_path / f".x.{'a' * 32}.tmp")
    path, file = create_exclusive(str(tmp_path), ".x")
    with file:
        file.write(b"new")
    assert path == str(tmp_path / f".x.{'b' * 32}.tmp")
    assert victim.read_text() == "precious\n"


def test_temporary_files_are_private_when_asked(tmp_path: Path) -> None:
    write_atomically(str(tmp_path / "secret"), b"x", mode=0o600)
    assert (tmp_path / "secret").stat().st_mode & 0o777 == 0o600


def test_a_failed_atomic_write_leaves_neither_temporary_file_nor_target(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        write_atomically(str(tmp_path / "target"), "not bytes")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []
