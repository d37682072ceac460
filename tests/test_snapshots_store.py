"""Snapshot stores: in memory, and in a directory where a half-written snapshot is never used."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from jetspark.core import (
    DirectorySnapshotStore,
    InMemorySnapshotStore,
    ProcessorSnapshot,
    Snapshot,
    SnapshotError,
)
from jetspark.core.serialization import encode_batch
from jetspark.core.snapshot_keys import broadcast_key

pytestmark = pytest.mark.timeout(30)


def snapshot(snapshot_id: int, value: object = "v") -> Snapshot:
    """Two vertices, one with a completed processor; entries hold `value`."""
    return Snapshot(
        snapshot_id,
        2,
        {"source": 1, "sink": 2},
        {
            ("source", 0): ProcessorSnapshot(encode_batch([(broadcast_key("offset"), 5)])),
            ("source", 1): ProcessorSnapshot(encode_batch([]), completed=True),
            ("sink", 0): ProcessorSnapshot(encode_batch([("k", value), ("l", [1, 2])])),
            ("sink", 1): ProcessorSnapshot(encode_batch([])),
            ("sink", 2): ProcessorSnapshot(encode_batch([])),
            ("sink", 3): ProcessorSnapshot(encode_batch([])),
        },
    )


def test_in_memory_store_keeps_the_latest_snapshot():
    store = InMemorySnapshotStore()
    assert store.latest() is None and store.next_id() == 1
    store.save(snapshot(1))
    store.save(snapshot(2))
    assert store.latest() == snapshot(2) and store.next_id() == 3
    with pytest.raises(SnapshotError, match="not newer"):
        store.save(snapshot(2))


def test_directory_store_round_trips_a_snapshot(tmp_path):
    store = DirectorySnapshotStore(tmp_path)
    assert store.latest() is None and store.next_id() == 1
    store.save(snapshot(3))
    loaded = DirectorySnapshotStore(tmp_path).latest()
    assert loaded == snapshot(3)
    assert loaded is not None
    assert loaded.processors[("sink", 0)].entries() == [("k", "v"), ("l", [1, 2])]
    assert loaded.processors[("source", 1)].completed
    assert store.next_id() == 4


def test_directory_store_keeps_only_the_latest_complete_snapshot(tmp_path):
    store = DirectorySnapshotStore(tmp_path)
    store.save(snapshot(1))
    store.save(snapshot(2))
    assert sorted(os.listdir(tmp_path)) == ["COMMITTED", "KEY", "snapshot-0000000002"]
    with pytest.raises(SnapshotError, match="newer"):
        store.save(snapshot(2))


def half_write(store: DirectorySnapshotStore, snapshot_id: int, parts: int, manifest: bool) -> None:
    """Leaves snapshot `snapshot_id` as a process that died while writing it would: the first
    `parts` of its processor parts, and its manifest if `manifest`."""
    kept = os.path.join(store.directory, "kept")
    existing = [n for n in os.listdir(store.directory) if n.startswith("snapshot-")]
    for name in existing:
        shutil.copytree(os.path.join(store.directory, name), os.path.join(kept, name))
    record = os.path.join(store.directory, "COMMITTED")
    with open(record, "rb") as file:
        recorded = file.read()
    store.save(snapshot(snapshot_id, value="newer"))
    with open(record, "wb") as file:  # the process died before recording the commit
        file.write(recorded)
    target = os.path.join(store.directory, f"snapshot-{snapshot_id:010d}")
    written = sorted(n for n in os.listdir(target) if n.startswith("part-"))
    for name in written[parts:] + ([] if manifest else ["MANIFEST"]):
        os.remove(os.path.join(target, name))
    for name in existing:
        shutil.copytree(os.path.join(kept, name), os.path.join(store.directory, name))
    shutil.rmtree(kept)


@pytest.mark.parametrize(
    ("parts", "manifest"),
    [(0, False), (1, False), (2, False)],
    ids=["empty", "one part", "no manifest"],
)
def test_a_half_written_snapshot_is_never_used(tmp_path, parts, manifest):
    store = DirectorySnapshotStore(tmp_path / "store")
    store.save(snapshot(1))
    half_write(store, 2, parts, manifest)
    assert store.latest() == snapshot(1)
    assert store.next_id() == 3, "the next snapshot never reuses the half-written one's id"
    store.save(snapshot(3, value="third"))
    assert store.latest() == snapshot(3, value="third")
    assert sorted(n for n in os.listdir(store.directory) if n.startswith("snapshot")) == [
        "snapshot-0000000003"
    ]


@pytest.mark.parametrize("damage", ["truncated manifest", "changed part", "missing part"])
def test_a_damaged_snapshot_is_refused_or_skipped_for_the_previous_one(tmp_path, damage):
    store = DirectorySnapshotStore(tmp_path)
    store.save(snapshot(1))
    half_write(store, 2, parts=2, manifest=True)
    target = tmp_path / "snapshot-0000000002"
    if damage == "truncated manifest":
        path = target / "MANIFEST"
        path.write_bytes(path.read_bytes()[:-10])
    elif damage == "changed part":
        path = sorted(target.glob("part-*"))[1]
        path.write_bytes(path.read_bytes() + b"x")
    else:
        sorted(target.glob("part-*"))[1].unlink()
    with pytest.raises(SnapshotError, match="snapshot 2, the newest, is damaged"):
        store.latest()
    assert store.latest(skip_damaged=True) == snapshot(1)


def test_a_batch_input_record_stays_as_its_first_writer_left_it_and_is_authenticated(
    tmp_path: Path,
) -> None:
    store = DirectorySnapshotStore(tmp_path)
    assert store.recorded_batch_input(3, "stage0-member1-run7") is None
    assert store.record_batch_input(3, "stage0-member1-run7", {("files", 1): 5}) == {
        ("files", 1): 5
    }
    # a second run of the task (or a concurrent one) gets the first run's record back
    assert store.record_batch_input(3, "stage0-member1-run7", {("files", 1): 9}) == {
        ("files", 1): 5
    }
    assert store.recorded_batch_input(3, "stage0-member1-run7") == {("files", 1): 5}
    [record] = (tmp_path / "snapshot-0000000003").glob("input-*.bin")
    assert [p.name for p in record.parent.iterdir() if p.name.endswith(".tmp")] == []
    record.write_bytes(record.read_bytes()[:-1] + b"\x06")
    with pytest.raises(SnapshotError, match="fails authentication"):
        store.recorded_batch_input(3, "stage0-member1-run7")
