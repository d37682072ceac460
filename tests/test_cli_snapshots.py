"""`jetspark snapshots DIR [ID]` (issue #26): a store's snapshots and a snapshot's vertices,
read from a DirectorySnapshotStore a job wrote, without changing it and without Spark."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import fault_tolerance_jobs as jobs
import pytest
from test_job_upgrades import FIRST, guaranteed, run_until_read, upgraded_dag

from jetspark.core import DirectorySnapshotStore, ProcessorSnapshot, Snapshot
from jetspark.core.cli import main
from jetspark.core.serialization import CHUNK_ITEMS, encode_batch

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Snapshot]:
    """A store a LocalEngine job wrote (source, count, tally on 2 members), and its snapshot."""
    directory = tmp_path_factory.mktemp("store") / "snapshots"
    store = DirectorySnapshotStore(directory)
    engine = jobs.engine(2)
    engine.get_list("words").extend(FIRST)
    job = engine.new_job(upgraded_dag("count", "tally"), guaranteed(), snapshot_store=store)
    return directory, run_until_read(job, len(FIRST))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    """(exit code, stdout lines, stderr) of `jetspark snapshots argv...`."""
    code = main(["snapshots", *argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def columns(line: str) -> list[str]:
    return line.split("  ")


def utc_of(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_list_shows_each_snapshot_with_its_time_size_and_vertices(
    written: tuple[Path, Snapshot], capsys: pytest.CaptureFixture[str]
) -> None:
    directory, snapshot = written
    folder = directory / f"snapshot-{snapshot.snapshot_id:010d}"
    size = sum(path.stat().st_size for path in folder.iterdir())
    code, lines, err = run(capsys, str(directory))
    assert code == 0, err
    assert lines[0] == f"{directory}: 1 snapshot, 1 committed"
    assert lines[1].split() == ["ID", "TIME", "(UTC)", "COMMITTED", "SIZE", "VERTICES"]
    cells = [cell.strip() for cell in columns(lines[2]) if cell.strip()]
    human = f"({size / 1024:.1f} KiB)"
    assert cells == [
        str(snapshot.snapshot_id),
        utc_of(folder / "MANIFEST"),
        "yes",
        f"{size:,} B {human}",
        "count, source, tally",
    ]
    assert len(lines) == 3


def test_a_snapshot_without_a_valid_manifest_is_listed_as_not_committed_or_damaged(
    written: tuple[Path, Snapshot], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, snapshot = written
    store = DirectorySnapshotStore(tmp_path / "store")
    store.save(snapshot)
    parts = {("count", 0): ProcessorSnapshot(encode_batch([("w1", 5)]))}
    dying = store.next_id()
    store.write_part(dying, "member-0", parts)  # a process died before the manifest
    planted = dying + 1
    store.write_part(planted, "member-0", parts)
    (tmp_path / "store" / f"snapshot-{planted:010d}" / "MANIFEST").write_bytes(b"\0" * 40)
    code, lines, err = run(capsys, str(tmp_path / "store"))
    assert code == 0, err
    assert lines[0].endswith(": 3 snapshots, 1 committed, 1 damaged")
    rows = {int(line.split()[0]): line for line in lines[2:]}
    assert set(rows) == {snapshot.snapshot_id, dying, planted}
    assert " yes " in rows[snapshot.snapshot_id]
    assert " no: no manifest " in rows[dying] and rows[dying].endswith(" -")
    assert " damaged: MANIFEST fails authentication" in rows[planted]


def test_show_gives_each_vertex_its_processors_entries_and_bytes(
    written: tuple[Path, Snapshot], capsys: pytest.CaptureFixture[str]
) -> None:
    directory, snapshot = written
    code, lines, err = run(capsys, str(directory), str(snapshot.snapshot_id))
    assert code == 0, err
    assert lines[0].startswith(f"snapshot {snapshot.snapshot_id}: committed 20")
    assert ", 2 members, " in lines[0] and lines[0].endswith(" on disk")
    assert lines[1].split() == [
        "VERTEX",
        "LOCAL",
        "PARALLELISM",
        "PROCESSORS",
        "COMPLETED",
        "ENTRIES",
        "BYTES",
    ]
    shown = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    expected = {}
    for name, lp in snapshot.local_parallelism.items():
        saved = snapshot.of_vertex(name).values()
        entries = sum(len(state.entries()) for state in saved)
        size = sum(len(state.data) for state in saved)
        expected[name] = [str(lp), str(len(saved)), "0", f"{entries:,}", f"{size:,}", "B"]
    assert shown == expected
    assert shown["count"][3] == shown["tally"][3] == str(len(set(FIRST)))
    assert shown["source"][:2] == ["2", "4"]


COUNTED = CHUNK_ITEMS + 1_500
"""Entries of the state with a class gone: a batch pickled in two chunks."""


def test_show_counts_entries_of_classes_the_command_cannot_import(tmp_path: Path) -> None:
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "gone_later.py").write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass

            @dataclass
            class Position:
                offset: int
                history: list
            """
        )
    )
    sys.path.insert(0, str(modules))
    try:
        import gone_later  # type: ignore[import-not-found]

        entries = [(f"k{i}", gone_later.Position(i, [i] * 3)) for i in range(COUNTED)]
        state = ProcessorSnapshot(encode_batch(entries))
    finally:
        sys.path.remove(str(modules))
        sys.modules.pop("gone_later", None)
    store = DirectorySnapshotStore(tmp_path / "store")
    store.save(Snapshot(4, 1, {"positions": 1}, {("positions", 0): state}))
    result = command_in_child(tmp_path / "store", "4")
    assert result.returncode == 0, result.stderr
    assert ", 1 member, " in result.stdout.splitlines()[0]
    row = result.stdout.splitlines()[2].split()
    assert row[:5] == ["positions", "1", "1", "0", f"{COUNTED:,}"]
    assert row[5] == f"{len(state.data):,}"


def command_in_child(*argv: object) -> subprocess.CompletedProcess[str]:
    """`jetspark snapshots argv...` in a fresh interpreter, which must not import pyspark."""
    script = (
        "import sys\n"
        "from jetspark.core.cli import main\n"
        "code = main(['snapshots', *sys.argv[1:]])\n"
        "assert 'pyspark' not in sys.modules and 'py4j' not in sys.modules, 'Spark imported'\n"
        "sys.exit(code)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_listing_needs_no_spark_and_changes_nothing(written: tuple[Path, Snapshot]) -> None:
    directory, _ = written
    before = sorted((path, path.stat().st_mtime_ns) for path in directory.rglob("*"))
    result = command_in_child(directory)
    assert result.returncode == 0, result.stderr
    assert "count, source, tally" in result.stdout
    assert sorted((path, path.stat().st_mtime_ns) for path in directory.rglob("*")) == before


def test_a_missing_directory_or_key_is_an_error_that_creates_neither(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, str(tmp_path / "nowhere"))
    assert code == 2 and "no snapshot store at" in err and "no such directory" in err
    assert not (tmp_path / "nowhere").exists()
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    code, _, err = run(capsys, str(empty), "1")
    assert code == 2 and "is not a snapshot store: it has no KEY file" in err
    assert os.listdir(empty) == []


def test_an_unknown_or_uncommitted_id_is_an_error(
    written: tuple[Path, Snapshot], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    directory, snapshot = written
    code, _, err = run(capsys, str(directory), "999999")
    assert code == 2, err
    assert f"has no snapshot 999999 (it holds: {snapshot.snapshot_id})" in err
    store = DirectorySnapshotStore(tmp_path / "store")
    store.write_part(7, "member-0", {})
    code, _, err = run(capsys, str(tmp_path / "store"), "7")
    assert code == 2 and "snapshot 7 is not committed: no manifest" in err
    code, _, err = run(capsys, str(tmp_path / "store"), "seven")
    assert code == 2 and "invalid int value: 'seven'" in err
