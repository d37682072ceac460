"""DirectorySnapshotStore against planted files (issue 17, item 13): nothing found in the
directory is decoded before it is authenticated with the store's key, the manifest is msgpack
only, the store refuses a directory others can write, its files and directories are private,
and snapshot ids beyond 10 digits count."""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path
from typing import Any

import msgpack
import pytest
from test_snapshots_store import snapshot

from jetspark.core import DirectorySnapshotStore, ProcessorSnapshot, Snapshot, SnapshotError
from jetspark.core.serialization import encode_batch
from jetspark.core.snapshot_store import held_by

pytestmark = pytest.mark.timeout(30)


class RunsCode:
    """Unpickling it creates the file `marker`: what a planted pickle could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def plant(store_dir: Path, name: str, files: dict[str, bytes]) -> None:
    target = store_dir / name
    target.mkdir(mode=0o700)
    for filename, data in files.items():
        (target / filename).write_bytes(data)


def test_a_planted_pickle_manifest_is_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    store = DirectorySnapshotStore(tmp_path / "store")
    store.save(snapshot(1))
    evil = b"P" + pickle.dumps([RunsCode(marker)], protocol=5)
    plant(Path(store.directory), "snapshot-9999999999", {"MANIFEST": evil})
    with pytest.raises(SnapshotError, match="snapshot 9999999999, the newest, is damaged"):
        store.latest()
    assert store.latest(skip_damaged=True) == snapshot(1)
    assert not marker.exists()


def test_a_planted_part_behind_a_forged_manifest_is_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    store = DirectorySnapshotStore(tmp_path / "store")
    state = encode_batch([("key", RunsCode(marker))])
    body = msgpack.packb(["jetspark-snapshot-2", 5, 1, [("v", 1)], [("member-0", b"x" * 32)]])
    part = msgpack.packb(["jetspark-snapshot-part-2", 5, "member-0", [("v", 0, False, state)]])
    plant(
        Path(store.directory),
        "snapshot-0000000005",
        {"MANIFEST": b"\0" * 32 + body, "part-member-0.bin": b"\0" * 32 + part},
    )
    with pytest.raises(SnapshotError, match="fails authentication"):
        store.latest()
    assert store.latest(skip_damaged=True) is None
    with pytest.raises(SnapshotError, match="fails authentication"):
        store.read_part(5, "member-0")
    assert not marker.exists()


def test_a_snapshot_of_another_store_is_not_authentic_here(tmp_path: Path) -> None:
    other = DirectorySnapshotStore(tmp_path / "other")
    other.save(snapshot(4))
    store = DirectorySnapshotStore(tmp_path / "store")
    os.replace(other.directory + "/snapshot-0000000004", store.directory + "/snapshot-0000000004")
    with pytest.raises(SnapshotError, match="MANIFEST fails authentication"):
        store.latest()
    assert store.latest(skip_damaged=True) is None


def test_a_part_renamed_to_another_part_is_refused(tmp_path: Path) -> None:
    store = DirectorySnapshotStore(tmp_path)
    store.write_part(1, "a", {("v", 0): ProcessorSnapshot(encode_batch([("k", 0)]))})
    tag = store.write_part(1, "b", {("v", 1): ProcessorSnapshot(encode_batch([("k", 1)]))})
    target = tmp_path / "snapshot-0000000001"
    os.replace(target / "part-b.bin", target / "part-a.bin")
    for expected_tag in (None, tag):  # authentic, but written as part "b"
        with pytest.raises(SnapshotError, match=r"part-a\.bin is not part 'a' of snapshot 1"):
            store.read_part(1, "a", expected_tag)
    with pytest.raises(SnapshotError, match="not the part the manifest names"):
        store.read_part(1, "a", b"\1" * 32)


def test_parts_written_by_several_writers_then_committed_make_a_snapshot(tmp_path: Path) -> None:
    store = DirectorySnapshotStore(tmp_path)
    expected = snapshot(7)
    tags = {}
    for member in range(expected.member_count):  # as Spark tasks would, one store object each
        mine = {k: v for k, v in expected.processors.items() if k[1] % 2 == member}
        writer = DirectorySnapshotStore(tmp_path)
        tags[f"task-{member}"] = (writer.write_part(7, f"task-{member}", mine), held_by(mine))
    assert store.latest() is None  # no manifest yet
    store.commit(7, expected.member_count, expected.local_parallelism, tags)
    assert store.latest() == expected
    with pytest.raises(ValueError, match="a part name is letters"):
        store.write_part(8, "../escape", {})


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_store_directory_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    directory = tmp_path / "shared"
    directory.mkdir()
    directory.chmod(mode)
    with pytest.raises(SnapshotError, match=f"writable by other users \\(mode {mode:o}\\)"):
        DirectorySnapshotStore(directory)


def test_a_key_others_can_read_is_refused(tmp_path: Path) -> None:
    DirectorySnapshotStore(tmp_path)
    (tmp_path / "KEY").chmod(0o644)
    with pytest.raises(SnapshotError, match="readable by you alone"):
        DirectorySnapshotStore(tmp_path)


def test_files_are_private_and_directories_too(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        store = DirectorySnapshotStore(tmp_path / "store")
        store.save(snapshot(1))
    finally:
        os.umask(old_umask)
    modes = {
        path.name: stat.S_IMODE(path.stat().st_mode)
        for path in [tmp_path / "store", *(tmp_path / "store").rglob("*")]
    }
    assert modes.pop("store") == 0o700 and modes.pop("snapshot-0000000001") == 0o700
    assert modes and set(modes.values()) == {0o600}, modes


def test_snapshot_ids_beyond_ten_digits_are_found(tmp_path: Path) -> None:
    store = DirectorySnapshotStore(tmp_path)
    plant(tmp_path, "snapshot-9999999999", {"MANIFEST": b"junk"})
    assert store.next_id() == 10_000_000_000
    store.save(snapshot(10_000_000_000))
    assert sorted(os.listdir(tmp_path)) == ["COMMITTED", "KEY", "snapshot-10000000000"]
    assert store.latest() == snapshot(10_000_000_000)
    assert store.next_id() == 10_000_000_001


def test_a_directory_named_like_a_snapshot_but_not_canonically_is_ignored(tmp_path: Path) -> None:
    store = DirectorySnapshotStore(tmp_path)
    plant(tmp_path, "snapshot-00000000009", {})
    assert store.next_id() == 1


def test_vertex_names_and_keys_with_lone_surrogates_round_trip(tmp_path: Path) -> None:
    name = os.fsdecode(b"caf\xe9")
    saved = ProcessorSnapshot(encode_batch([(name, 1)]))
    snapshot_in = Snapshot(1, 1, {name: 1}, {(name, 0): saved})
    store = DirectorySnapshotStore(tmp_path)
    store.save(snapshot_in)
    loaded = DirectorySnapshotStore(tmp_path).latest()
    assert loaded == snapshot_in
    assert loaded is not None and loaded.processors[(name, 0)].entries() == [(name, 1)]


def test_the_key_is_made_where_hard_links_are_not_supported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(source: str, target: str) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    store = DirectorySnapshotStore(tmp_path)
    store.save(snapshot(1))
    assert stat.S_IMODE((tmp_path / "KEY").stat().st_mode) == 0o600
    assert DirectorySnapshotStore(tmp_path).latest() == snapshot(1)
    assert sorted(os.listdir(tmp_path)) == ["COMMITTED", "KEY", "snapshot-0000000001"]
