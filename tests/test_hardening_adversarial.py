"""Adversarial cases of issue #36 on LocalEngine and SparkEngine: stores that must not lie
about their state, and the other cases named in each section below."""

from __future__ import annotations

import errno
import hmac
import os
import shutil
from pathlib import Path
from typing import Any

import fault_tolerance_jobs as jobs
import msgpack
import pytest

from jetspark.core import (
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    ProcessingGuarantee,
    SnapshotError,
)
from jetspark.core.cli import main

pytestmark = pytest.mark.timeout(300)


# --- snapshot stores: empty is not lost (cases 4 and 6) -----------------------------------------


def _identity(item: Any) -> Any:
    return item


def _guaranteed(mode: ExecutionMode | None = None) -> JobConfig:
    settings: dict[str, Any] = {} if mode is None else {"execution_mode": mode}
    return JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=3,
        **settings,
    )


def _engine(kind: str, spark_engine: Any) -> Any:
    if kind == "local":
        engine = jobs.engine(2)
    else:
        from jetspark.core.spark import SparkEngine

        engine = SparkEngine(spark_engine.context, members=2, batch_items=100)
    engine.get_list("words").extend(jobs.words(600, 7))
    return engine


ENGINES = [
    pytest.param("local", None, id="local"),
    pytest.param("spark", ExecutionMode.MICRO_BATCH, id="micro-batch", marks=pytest.mark.spark),
    pytest.param("spark", ExecutionMode.CONTINUOUS, id="continuous", marks=pytest.mark.spark),
]


def _written_store(kind: str, mode: ExecutionMode | None, spark: Any, path: Path) -> Path:
    """A store a job of `kind` wrote to completion, its last snapshot committed."""
    engine = _engine(kind, spark)
    store = DirectorySnapshotStore(path)
    engine.new_job(jobs.counting_dag(_identity), _guaranteed(mode), snapshot_store=store).join(120)
    assert store.latest() is not None
    return path


def _last_snapshot_directory(path: Path) -> Path:
    """The directory of the store's last committed snapshot (a newer one may be uncommitted)."""
    latest = DirectorySnapshotStore.open_existing(path).latest()
    assert latest is not None
    return path / f"snapshot-{latest.snapshot_id:010d}"


@pytest.mark.parametrize(("kind", "mode"), ENGINES)
@pytest.mark.parametrize("lost", ["MANIFEST", "directory"])
def test_a_store_that_lost_its_last_snapshot_says_so_instead_of_starting_afresh(
    kind: str, mode: ExecutionMode | None, lost: str, tmp_path: Path, request: Any
) -> None:
    spark = request.getfixturevalue("spark_engine") if kind == "spark" else None
    path = _written_store(kind, mode, spark, tmp_path / "store")
    last = _last_snapshot_directory(path)
    if lost == "MANIFEST":
        (last / "MANIFEST").unlink()
    else:
        shutil.rmtree(last)
    for store in (DirectorySnapshotStore(path), DirectorySnapshotStore.open_existing(path)):
        with pytest.raises(SnapshotError, match="the newest, is damaged") as raised:
            store.latest()
        named = "its MANIFEST is missing" if lost == "MANIFEST" else f"directory {last.name}"
        assert named in str(raised.value)
        assert "skip_damaged" not in str(raised.value), "no older snapshot is there to take"
        assert store.next_id() > int(last.name.split("-")[1])
    assert DirectorySnapshotStore(tmp_path / "empty").latest() is None


def test_a_store_that_lost_its_key_refuses_to_make_a_new_one(tmp_path: Path) -> None:
    path = _written_store("local", None, None, tmp_path / "store")
    (path / "KEY").unlink()
    for open_store in (DirectorySnapshotStore, DirectorySnapshotStore.open_existing):
        with pytest.raises(SnapshotError, match="lost its KEY file: it holds snapshots"):
            open_store(path)
    assert not (path / "KEY").exists()
    code = main(["snapshots", str(path)])
    assert code == 2


def _rewrite_manifest(path: Path, change: Any) -> Path:
    """Rewrites the last snapshot's manifest as `change(fields)` says, tagged with the key."""
    key = (path / "KEY").read_bytes()
    manifest = _last_snapshot_directory(path) / "MANIFEST"
    fields = list(msgpack.unpackb(manifest.read_bytes()[32:], raw=False, use_list=False))
    body = msgpack.packb(change(fields), use_bin_type=True)
    manifest.write_bytes(hmac.digest(key, body, "sha256") + body)
    return manifest


def test_a_manifest_of_a_newer_format_is_not_called_damaged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _written_store("local", None, None, tmp_path / "store")
    _rewrite_manifest(path, lambda fields: ["jetspark-snapshot-3", *fields[1:], "more"])
    for skip_damaged in (False, True):
        with pytest.raises(
            SnapshotError, match="jetspark-snapshot-3, written by a newer"
        ) as raised:
            DirectorySnapshotStore(path).latest(skip_damaged=skip_damaged)
        assert "damaged (" not in str(raised.value)
    assert main(["snapshots", str(path)]) == 0
    assert "jetspark-snapshot-3, written by a newer version" in capsys.readouterr().out


def _truncate_a_part(path: Path) -> None:
    part = max(_last_snapshot_directory(path).glob("part-*"))
    part.write_bytes(part.read_bytes()[:-5])


def _edit_the_manifest(path: Path) -> None:
    manifest = _last_snapshot_directory(path) / "MANIFEST"
    data = bytearray(manifest.read_bytes())
    data[-1] ^= 1
    manifest.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    [
        _truncate_a_part,
        lambda path: (_last_snapshot_directory(path) / "MANIFEST").unlink(),
        _edit_the_manifest,
    ],
    ids=["truncated part", "lost manifest", "edited manifest"],
)
def test_the_command_and_the_store_agree_on_a_damaged_snapshot(
    damage: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _written_store("local", None, None, tmp_path / "store")
    snapshot_id = int(_last_snapshot_directory(path).name.split("-")[1])
    damage(path)
    with pytest.raises(SnapshotError, match=f"snapshot {snapshot_id}, the newest, is damaged"):
        DirectorySnapshotStore(path).latest()
    assert main(["snapshots", str(path)]) == 0
    out = capsys.readouterr().out
    assert ", 0 committed, 1 damaged" in out.splitlines()[0]
    [row] = [line for line in out.splitlines()[2:] if line.split()[0] == str(snapshot_id)]
    assert " damaged: " in row and " yes " not in row
    assert main(["snapshots", str(path), str(snapshot_id)]) == 2
    assert f"snapshot {snapshot_id} is damaged: " in capsys.readouterr().err


@pytest.mark.parametrize("error", [errno.EACCES, errno.EROFS])
def test_a_read_only_store_on_local_engine_is_a_snapshot_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: int
) -> None:
    store = DirectorySnapshotStore(tmp_path / "store")
    real_open = os.open

    def read_only(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT and os.fspath(path).startswith(store.directory):
            raise OSError(error, os.strerror(error), path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    engine = _engine("local", None)
    with pytest.raises(SnapshotError, match="cannot be written") as raised:
        engine.new_job(jobs.counting_dag(_identity), _guaranteed(), snapshot_store=store)
    assert store.directory in str(raised.value) and os.strerror(error) in str(raised.value)
