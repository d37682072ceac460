"""What a DirectorySnapshotStore holds, for people: its snapshots, and a snapshot's vertices
(the data, and the tables `jetspark snapshots` prints).

Reading never changes the store (open it with `DirectorySnapshotStore.open_existing`) and
never builds the objects of the saved state: entries are counted by an unpickler that turns
every class and function into a placeholder, so neither Spark, nor the job's own modules, nor
code that the state names are needed. Each snapshot's state is the one `latest()` goes by
(`DirectorySnapshotStore.verified`, which authenticates every part): committed, never committed
(a process died writing it: no manifest), or damaged, saying why.
"""

from __future__ import annotations

import io
import os
import pickle
from dataclasses import dataclass
from datetime import datetime, timezone

from jetspark.core.errors import SnapshotError
from jetspark.core.serialization import decode_batch, pickles_of
from jetspark.core.snapshot_store import DirectorySnapshotStore, Snapshot


@dataclass(frozen=True)
class SnapshotSummary:
    """One snapshot directory of a store."""

    snapshot_id: int
    time: datetime
    """When its newest file was written (for a committed snapshot: the manifest), in UTC."""
    size_bytes: int
    """The bytes of its files on disk."""
    committed: bool
    """Whether it was committed (it has a manifest, or the store records it committed)."""
    problem: str | None
    """Why it is not committed, or is damaged (None when it is committed and intact)."""
    member_count: int | None
    vertices: tuple[str, ...]
    """Its vertices, by name (empty when it is not committed)."""


@dataclass(frozen=True)
class VertexState:
    """What the processors of one vertex saved in a snapshot."""

    name: str
    local_parallelism: int
    processors: int
    completed: int
    """How many of its processors had completed."""
    entries: int
    state_bytes: int
    """The serialized bytes of its entries."""


def show_store(directory: str | os.PathLike[str]) -> str:
    """The table of the snapshots in the store at `directory` (`jetspark snapshots DIR`)."""
    store = DirectorySnapshotStore.open_existing(directory)
    summaries = list_snapshots(store)
    committed = sum(summary.problem is None for summary in summaries)
    damaged = sum(summary.committed and summary.problem is not None for summary in summaries)
    rows = [
        [
            str(summary.snapshot_id),
            _utc(summary.time),
            _state(summary),
            _bytes(summary.size_bytes),
            ", ".join(summary.vertices) or "-",
        ]
        for summary in summaries
    ]
    count = f"{len(summaries)} snapshot{'s' * (len(summaries) != 1)}"
    title = f"{store.directory}: {count}, {committed} committed"
    if damaged:
        title += f", {damaged} damaged"
    lines = [title, *_table(["ID", "TIME (UTC)", "COMMITTED", "SIZE", "VERTICES"], rows, {0, 3})]
    if (lost := lost_snapshot(store)) is not None:
        lines.append(f"snapshot {lost}, the last committed, is lost: its directory is missing")
    return "\n".join(lines)


def _state(summary: SnapshotSummary) -> str:
    """The COMMITTED cell of a snapshot."""
    if summary.problem is None:
        return "yes"
    return f"{'damaged' if summary.committed else 'no'}: {summary.problem}"


def lost_snapshot(store: DirectorySnapshotStore) -> int | None:
    """The id of the last snapshot the store committed when its directory is gone (None when
    it is there, or the store never committed one)."""
    recorded = store.recorded_commit()
    return recorded if recorded is not None and recorded not in store.snapshot_ids() else None


def show_snapshot(directory: str | os.PathLike[str], snapshot_id: int) -> str:
    """The table of the vertices of one snapshot (`jetspark snapshots DIR ID`)."""
    summary, vertices = describe_snapshot(
        DirectorySnapshotStore.open_existing(directory), snapshot_id
    )
    title = (
        f"snapshot {summary.snapshot_id}: committed {_utc(summary.time)}, "
        f"{summary.member_count} member{'s' * (summary.member_count != 1)}, "
        f"{_bytes(summary.size_bytes)} on disk"
    )
    rows = [
        [
            vertex.name,
            str(vertex.local_parallelism),
            str(vertex.processors),
            str(vertex.completed),
            f"{vertex.entries:,}",
            _bytes(vertex.state_bytes),
        ]
        for vertex in vertices
    ]
    header = ["VERTEX", "LOCAL PARALLELISM", "PROCESSORS", "COMPLETED", "ENTRIES", "BYTES"]
    return "\n".join([title, *_table(header, rows, numeric={1, 2, 3, 4, 5})])


def list_snapshots(store: DirectorySnapshotStore) -> list[SnapshotSummary]:
    """Every snapshot directory of `store`, oldest first, committed or not (one that a running
    job removes meanwhile is left out)."""
    summaries = []
    for snapshot_id in store.snapshot_ids():
        try:
            summaries.append(_summary(store, snapshot_id)[0])
        except FileNotFoundError:
            continue  # removed since it was listed: a newer snapshot was committed
    return summaries


def describe_snapshot(
    store: DirectorySnapshotStore, snapshot_id: int
) -> tuple[SnapshotSummary, list[VertexState]]:
    """Snapshot `snapshot_id` of `store` and its vertices, by name; SnapshotError when there is
    no such snapshot, when it is not committed, or when a part fails authentication."""
    present = store.snapshot_ids()
    if snapshot_id not in present:
        held = ", ".join(map(str, present)) or "none"
        raise SnapshotError(f"{store.directory!r} has no snapshot {snapshot_id} (it holds: {held})")
    summary, snapshot = _summary(store, snapshot_id)
    if snapshot is None:
        state = "damaged" if summary.committed else "not committed"
        raise SnapshotError(f"snapshot {snapshot_id} is {state}: {summary.problem}")
    vertices = []
    for name, lp in sorted(snapshot.local_parallelism.items()):
        saved = snapshot.of_vertex(name).values()
        vertices.append(
            VertexState(
                name,
                lp,
                len(saved),
                sum(state.completed for state in saved),
                sum(count_entries(state.data) for state in saved),
                sum(len(state.data) for state in saved),
            )
        )
    return summary, vertices


def count_entries(data: bytes) -> int:
    """How many entries an `encode_batch` batch holds, without building its objects."""
    try:
        return sum(len(_EntryCounter(io.BytesIO(part)).load()) for part in pickles_of(data))
    except (ValueError, pickle.UnpicklingError):  # msgpack of an earlier version: runs no code
        return len(decode_batch(data))


def _summary(
    store: DirectorySnapshotStore, snapshot_id: int
) -> tuple[SnapshotSummary, Snapshot | None]:
    directory = store.snapshot_directory(snapshot_id)
    files = [entry.stat(follow_symlinks=False) for entry in _files(directory)]
    newest = max((info.st_mtime for info in files), default=os.stat(directory).st_mtime)
    size = sum(info.st_size for info in files)
    time = datetime.fromtimestamp(newest, timezone.utc)
    try:
        snapshot = store.verified(snapshot_id)
    except (OSError, ValueError, SnapshotError) as error:
        if not os.path.isdir(directory):
            raise FileNotFoundError(directory) from error  # removed meanwhile: list_snapshots
        problem = (
            str(error) if isinstance(error, SnapshotError) else f"{type(error).__name__}: {error}"
        )
        return SnapshotSummary(snapshot_id, time, size, True, problem, None, ()), None
    if snapshot is None:
        return SnapshotSummary(snapshot_id, time, size, False, "no manifest", None, ()), None
    vertices = tuple(sorted(snapshot.local_parallelism))
    summary = SnapshotSummary(snapshot_id, time, size, True, None, snapshot.member_count, vertices)
    return summary, snapshot


def _files(directory: str) -> list[os.DirEntry[str]]:
    with os.scandir(directory) as entries:
        return [entry for entry in entries if entry.is_file(follow_symlinks=False)]


def _table(header: list[str], rows: list[list[str]], numeric: set[int]) -> list[str]:
    """Lines of aligned columns, the `numeric` ones right-aligned."""
    lines = []
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    for row in [header, *rows]:
        cells = [
            cell.rjust(width) if column in numeric else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def _utc(moment: datetime) -> str:
    """A UTC time as ISO-8601, to the second."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _bytes(count: int) -> str:
    """A byte count, with its binary-prefixed size from 1 KiB on: `12,345 B (12.1 KiB)`."""
    size, unit = float(count), "B"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, larger
    return f"{count:,} B" if unit == "B" else f"{count:,} B ({size:.1f} {unit})"


class _Placeholder:
    """Stands for every object of the state while its entries are counted: it can be made
    from anything and given any state, and holds nothing."""

    def __new__(cls, *args: object, **kwargs: object) -> _Placeholder:
        return super().__new__(cls)

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __setstate__(self, state: object) -> None:
        pass

    def __setitem__(self, key: object, value: object) -> None:
        pass

    def append(self, item: object) -> None:
        """Takes an item of a list-like object's pickled items (and drops it)."""

    def extend(self, items: object) -> None:
        """Takes a batch of a list-like object's pickled items (and drops it)."""


class _EntryCounter(pickle.Unpickler):
    """Unpickles a batch with every class and function it names replaced by `_Placeholder`."""

    def find_class(self, module_name: str, global_name: str) -> type[_Placeholder]:
        return _Placeholder
