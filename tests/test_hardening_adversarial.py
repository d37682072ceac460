"""Adversarial cases of issue #36 on LocalEngine and SparkEngine: stores that must not lie
about their state, and the other cases named in each section below."""

from __future__ import annotations

import errno
import gzip
import hmac
import logging
import os
import shutil
import socket
import struct
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import fault_tolerance_jobs as jobs
import msgpack
import pytest
from hang_report import join_or_report
from test_job_upgrades import run_until_read, upgraded_dag

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    LocalEngine,
    ProcessingGuarantee,
    Snapshot,
    SnapshotError,
)
from jetspark.core.cli import main
from jetspark.core.serialization import encode_batch
from jetspark.core.spark.microbatch.item_budget import BUSY_FRACTION, MIN_ITEM_BUDGET, ItemBudget
from jetspark.core.suppliers import unbounded
from jetspark.core.view import JobView
from jetspark.core.watermark import Watermark
from jetspark.edges import EdgeConfig, between, from_
from jetspark.partitioning import partition_id
from jetspark.processors import (
    map_using_model_p,
    stream_files_p,
    write_file_transactional_p,
    write_list_p,
)
from jetspark.processors.stream_files import StreamFilesP
from jetspark.processors.tfidf import open_index, scan_corpus, search, write_index
from jetspark.processors.tfidf.errors import InputError
from jetspark.processors.tfidf.parts import part_name

pytestmark = pytest.mark.timeout(300)


# --- snapshot stores: empty is not lost (cases 4 and 6) -----------------------------------------


def _identity(item: Any) -> Any:
    return item


def _guaranteed(mode: ExecutionMode | None = None, **settings: Any) -> JobConfig:
    if mode is not None:
        settings["execution_mode"] = mode
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
    """A store a job of `kind` wrote, streaming, cancelled once a snapshot of all its input was
    committed (a bounded job may end before its first commit)."""
    return _written_store_of(_engine(kind, spark), mode, path)


def _written_store_of(engine: Any, mode: ExecutionMode | None, path: Path) -> Path:
    """`_written_store` of a job on `engine`, over the words its list holds."""
    store = DirectorySnapshotStore(path)
    job = engine.new_job(upgraded_dag("count"), _guaranteed(mode), snapshot_store=store)
    run_until_read(job, len(engine.get_list("words")))
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
    _rewrite_manifest(path, lambda fields: ["jetspark-snapshot-5", *fields[1:], "more"])
    for skip_damaged in (False, True):
        with pytest.raises(
            SnapshotError, match="jetspark-snapshot-5, written by a newer"
        ) as raised:
            DirectorySnapshotStore(path).latest(skip_damaged=skip_damaged)
        assert "damaged (" not in str(raised.value)
    assert main(["snapshots", str(path)]) == 0
    assert "jetspark-snapshot-5, written by a newer version" in capsys.readouterr().out


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


# --- job upgrades: an edge that routes otherwise into keyed state (case 3) -----------------------


class LastLetter:
    """A partitioner of its own: a word's last letter picks the partition (deterministic)."""

    def partition(self, key: Any, partition_count: int) -> int:
        return ord(key[-1]) % partition_count


def _rerouted(route: str) -> DAG:
    """upgraded_dag("count") with its edge into "count" routed as `route` says."""
    dag = upgraded_dag("count")
    edge = next(edge for edge in dag.edges() if edge.dest_name == "count")
    if route == "broadcast":
        edge.broadcast()
    elif route == "partitioner":
        edge.partitioned(_identity, LastLetter())
    elif route == "local":
        edge.local()
    return dag


def _per_processor(snapshot: Snapshot) -> list[Counter[str]]:
    """The word counts each processor of "count" saved in `snapshot`."""
    return [Counter(dict(saved.entries())) for saved in snapshot.of_vertex("count").values()]


def _upgraded(
    engine: Any, route: str, before: Snapshot, store: Any, mode: Any, **settings: Any
) -> Snapshot:
    """Runs `_rerouted(route)` from `before` over the later words; its last snapshot."""
    config = _guaranteed(mode, **settings)
    job = engine.new_job(_rerouted(route), config, snapshot_store=store, restore_from=before)
    return run_until_read(job, len(engine.get_list("words")))


@pytest.mark.parametrize(("kind", "mode"), ENGINES)
def test_an_upgrade_that_broadcasts_into_keyed_state_is_refused_unless_rekeyed_or_dropped(
    kind: str, mode: ExecutionMode | None, spark_engine: Any, tmp_path: Path
) -> None:
    engine = _engine(kind, spark_engine if kind == "spark" else None)
    first = list(engine.get_list("words"))
    before = DirectorySnapshotStore(_written_store_of(engine, mode, tmp_path / "first")).latest()
    assert before is not None and sum(_per_processor(before), Counter()) == Counter(first)
    with pytest.raises(SnapshotError) as refused:
        engine.new_job(
            _rerouted("broadcast"), _guaranteed(mode), snapshot_store=None, restore_from=before
        )
    message = str(refused.value)
    assert "holds keyed state of vertex 'count'" in message
    assert "edge source:0 -> count:0 routed partitioned by " in message
    assert "now broadcast, distributed" in message
    assert 'state_on_routing_change="rekey"' in message
    later = jobs.words(400, 8)
    engine.get_list("words").extend(later)
    stores = {choice: DirectorySnapshotStore(tmp_path / choice) for choice in ("rekey", "drop")}
    rekeyed = _upgraded(
        engine, "broadcast", before, stores["rekey"], mode, state_on_routing_change="rekey"
    )
    # every processor sees every word now: each continues from every word's count
    assert _per_processor(rekeyed) == [Counter(first + later)] * len(_per_processor(rekeyed))
    dropped = _upgraded(
        engine, "broadcast", before, stores["drop"], mode, state_on_routing_change="drop"
    )
    assert _per_processor(dropped) == [Counter(later)] * len(_per_processor(dropped))


@pytest.mark.parametrize("route", ["partitioner", "local"])
def test_a_rekeyed_upgrade_moves_each_key_to_the_processor_that_now_receives_it(
    route: str, tmp_path: Path
) -> None:
    engine = _engine("local", None)
    first = list(engine.get_list("words"))
    before = DirectorySnapshotStore(_written_store_of(engine, None, tmp_path / "first")).latest()
    assert before is not None
    with pytest.raises(SnapshotError, match="edge source:0 -> count:0 routed partitioned"):
        engine.new_job(_rerouted(route), _guaranteed(), restore_from=before)
    later = jobs.words(400, 8)
    engine.get_list("words").extend(later)
    store = DirectorySnapshotStore(tmp_path / "after")
    after = _upgraded(engine, route, before, store, None, state_on_routing_change="rekey")
    counts = _per_processor(after)
    assert sum(counts, Counter()) == Counter(first + later)
    if route == "partitioner":  # one processor per word: the one its last letter picks
        assert sum(len(held) for held in counts) == len(set(first + later))


def test_keyed_state_behind_a_former_broadcast_edge_can_be_dropped_not_rekeyed(
    tmp_path: Path,
) -> None:
    engine = _engine("local", None)
    store = DirectorySnapshotStore(tmp_path / "broadcast")
    job = engine.new_job(_rerouted("broadcast"), _guaranteed(), snapshot_store=store)
    before = run_until_read(job, len(engine.get_list("words")))
    with pytest.raises(SnapshotError, match="edge source:0 -> count:0 routed broadcast"):
        engine.new_job(upgraded_dag("count"), _guaranteed(), restore_from=before)
    rekey = _guaranteed(state_on_routing_change="rekey")
    with pytest.raises(SnapshotError, match="restore it once per processor that saved it"):
        engine.new_job(upgraded_dag("count"), rekey, restore_from=before)
    later = jobs.words(400, 8)
    engine.get_list("words").extend(later)
    store = DirectorySnapshotStore(tmp_path / "dropped")
    after = _upgraded(engine, "", before, store, None, state_on_routing_change="drop")
    assert sum(_per_processor(after), Counter()) == Counter(later)


def test_a_snapshot_that_recorded_no_routing_is_restored_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _written_store("local", None, None, tmp_path / "store")
    _rewrite_manifest(path, lambda fields: ["jetspark-snapshot-2", *fields[1:5]])
    before = DirectorySnapshotStore(path).latest()
    assert before is not None and before.routing is None
    engine = _engine("local", None)
    with caplog.at_level(logging.WARNING, logger="jetspark.snapshots"):
        store = DirectorySnapshotStore(tmp_path / "new")
        job = engine.new_job(
            _rerouted("broadcast"), _guaranteed(), snapshot_store=store, restore_from=before
        )
        run_until_read(job, len(engine.get_list("words")))
    warned = [r.getMessage() for r in caplog.records if "does not record how" in r.getMessage()]
    assert len(warned) == 1 and f"snapshot {before.snapshot_id} " in warned[0]


def test_state_on_routing_change_takes_rekey_drop_or_none() -> None:
    with pytest.raises(ValueError, match='must be "rekey", "drop" or None, got \'keep\''):
        JobConfig(state_on_routing_change="keep")  # type: ignore[arg-type]


# --- map_using_model_p: items held for a late first model are bounded (case 5) -----------------

HELD = 1_000
"""max_items_waiting of the model tests."""
QUEUE = 256
"""The queue size of their items edge."""
ITEMS = 20_000
WAITING_FOR_A_MODEL = "wait for the first model reference"


class GatedItems(AbstractProcessor):
    """Emits ITEMS numbers; notes in `directory` how many it had emitted when the reference
    was released, and when it emitted them all."""

    def __init__(self, directory: str) -> None:
        self._directory = Path(directory)
        self._next = 0
        self._noted = False

    def complete(self) -> bool:
        if not self._noted and (self._directory / "released").exists():
            (self._directory / "emitted-before-the-reference").write_text(str(self._next))
            self._noted = True
        while self._next < ITEMS:
            if not self.try_emit(self._next):
                return False
            self._next += 1
        (self._directory / "items-emitted").touch()
        return self._noted


class GatedReference(AbstractProcessor):
    """Emits the model reference "m" once the model vertex warned, in its process, that items
    wait for it (`after_a_snapshot`: and a barrier of this processor went before the reference:
    it saved a snapshot since the warning, or one it saved before is not committed yet, whose
    barrier the held-back items source cannot send until the model predicts its items), or
    once every item was emitted (without a bound nothing warns)."""

    def __init__(self, directory: str, after_a_snapshot: bool) -> None:
        self._directory = Path(directory)
        self._after_a_snapshot = after_a_snapshot
        self._saved_since_the_warning = False
        self._uncommitted = False
        self._released = False
        self._warned = threading.Event()
        self._handler = logging.Handler()
        self._handler.emit = self._note  # type: ignore[method-assign]

    def _note(self, record: logging.LogRecord) -> None:
        if WAITING_FOR_A_MODEL in record.getMessage():
            self._warned.set()

    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, context)
        logging.getLogger("jetspark").addHandler(self._handler)

    def save_to_snapshot(self) -> bool:
        self._saved_since_the_warning = self._warned.is_set()
        self._uncommitted = True
        return True

    def snapshot_committed(self) -> None:
        self._uncommitted = False

    def complete(self) -> bool:
        if not self._released:
            warned = self._warned.is_set() and (
                self._saved_since_the_warning
                or self._uncommitted  # a snapshot saved before the warning cannot complete
                or not self._after_a_snapshot
            )
            if not (warned or (self._directory / "items-emitted").exists()):
                return False
            if not self.try_emit("m"):
                return False
            self._released = True
            (self._directory / "released").touch()
        return True

    def close(self) -> None:
        logging.getLogger("jetspark").removeHandler(self._handler)


def _predicted(model: Any, items: list[Any]) -> list[Any]:
    return [(item, model) for item in items]


def _late_model_dag(directory: Path, after_a_snapshot: bool) -> DAG:
    dag = DAG("late-model")
    items = dag.new_vertex("items", lambda: GatedItems(str(directory)), local_parallelism=1)
    references = dag.new_vertex(
        "references",
        lambda: GatedReference(str(directory), after_a_snapshot),
        local_parallelism=1,
    )
    predict = dag.new_vertex(
        "predict",
        map_using_model_p(_identity, _predicted, 64, max_items_waiting=HELD),
        local_parallelism=1,
    )
    sink = dag.new_vertex("sink", write_list_p("predicted"), local_parallelism=1)
    dag.edge(between(items, predict).set_config(EdgeConfig(queue_size=QUEUE)))
    dag.edge(from_(references).to(predict, 1))
    dag.edge(between(predict, sink))
    return dag


MODEL_ENGINES = [
    pytest.param("local", None, id="local"),
    pytest.param("local", ProcessingGuarantee.EXACTLY_ONCE, id="local-exactly-once"),
    pytest.param(
        "spark",
        ProcessingGuarantee.EXACTLY_ONCE,
        id="continuous",
        marks=pytest.mark.spark,
    ),
]


@pytest.mark.parametrize(("kind", "guarantee"), MODEL_ENGINES)
def test_items_held_for_a_late_first_model_are_bounded_by_backpressure(
    kind: str,
    guarantee: ProcessingGuarantee | None,
    spark_engine: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if kind == "local":
        engine: Any = LocalEngine(1)
    else:
        from jetspark.core.spark import SparkEngine

        engine = SparkEngine(spark_engine.context, members=1)
    config = JobConfig() if guarantee is None else _guaranteed(ExecutionMode.CONTINUOUS)
    with caplog.at_level(logging.WARNING, logger="jetspark"):
        # with snapshots, the reference comes after a barrier: the items source, held back,
        # cannot send that barrier until the model predicts its items
        job = engine.new_job(_late_model_dag(tmp_path, guarantee is not None), config)
        try:
            join_or_report(job, 240, spark_engine.context if kind == "spark" else None)
        finally:  # a job that did not end must not hold the shared session's slots
            if not job.status.is_terminal:
                job.cancel()
    assert sorted(engine.get_list("predicted")) == [(item, "m") for item in range(ITEMS)]
    # the items source was held back: no more items than the bound and the queues hold
    before = int((tmp_path / "emitted-before-the-reference").read_text())
    assert HELD <= before <= HELD + 4 * QUEUE
    if guarantee is not None:  # snapshots held no more than that
        held = max(report.vertex_bytes.get("predict", 0) for report in job.metrics.snapshots)
        assert held <= len(encode_batch([(0, tuple(range(HELD + 4 * QUEUE)))]))
    if kind == "local":
        warned = [r.getMessage() for r in caplog.records if WAITING_FOR_A_MODEL in r.getMessage()]
        assert warned == [
            f"vertex 'predict': {HELD} items wait for the first model reference on inbound "
            "ordinal 1; taking no more items from ordinal 0 until one comes (backpressure; "
            f"max_items_waiting={HELD})"
        ]


class _Emits(AbstractProcessor):
    """Emits `items` (a Watermark too) once `gate` is set (None: at once)."""

    def __init__(self, items: list[Any], gate: threading.Event | None) -> None:
        self._items = list(items)
        self._gate = gate

    def complete(self) -> bool:
        if self._gate is not None and not self._gate.is_set():
            return False
        while self._items:
            if not self.try_emit(self._items[0]):
                return False
            self._items.pop(0)
        return True


class _WaitsForGo(AbstractProcessor):
    """Leaves its ordinal-0 inbox as it is until "go" came on ordinal 1 (setting `refused`
    the first time); records what it took, watermarks included, in `seen`."""

    def __init__(self, refused: threading.Event, seen: list[Any]) -> None:
        self._refused = refused
        self._seen = seen

    def process(self, ordinal: int, inbox: Any) -> None:
        if ordinal == 0 and "go" not in self._seen:
            self._refused.set()
            return
        while not inbox.is_empty():
            self._seen.append(inbox.remove())

    def try_process_watermark(self, watermark: Watermark) -> bool:
        self._seen.append(watermark)
        return True


def test_an_edge_left_as_it_is_lets_the_others_go_and_holds_its_watermark_back() -> None:
    refused, seen = threading.Event(), []
    dag = DAG("left-inbox")
    items = dag.new_vertex(
        "items", lambda: _Emits([*range(10), Watermark(100)], None), local_parallelism=1
    )
    go = dag.new_vertex("go", lambda: _Emits([Watermark(200), "go"], refused), local_parallelism=1)
    waits = dag.new_vertex("waits", lambda: _WaitsForGo(refused, seen), local_parallelism=1)
    dag.edge(between(items, waits)).edge(from_(go).to(waits, 1))
    LocalEngine(1).new_job(dag).join(60)
    # the items before the watermark reached the processor before the watermark did (a later
    # one may follow, as the sources end)
    assert seen[:12] == ["go", *range(10), Watermark(100)]
    assert all(isinstance(entry, Watermark) for entry in seen[12:])


def test_max_items_waiting_must_be_a_positive_int() -> None:
    with pytest.raises(ValueError, match="max_items_waiting must be an int >= 1, got 0"):
        map_using_model_p(_identity, _predicted, max_items_waiting=0)


# --- the live view: odd ids, stalled and departed clients (case 9) -------------------------------


def _raw_get(view: JobView, target: bytes) -> bytes:
    """The whole answer to a GET of `target`, sent as raw bytes (no percent-encoding)."""
    host, port = view.url.split("/")[2].split(":")
    with socket.create_connection((host, int(port)), timeout=60) as client:
        client.sendall(b"GET " + target + b" HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    "job_id",
    [b"\xb2", b"1" * 5000, b"0" * 40 + b"1"],
    ids=["superscript two", "5000 digits", "41 digits"],
)
def test_the_view_answers_404_for_a_job_id_that_is_no_short_ascii_decimal(
    job_id: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    engine = LocalEngine(job_view=(view := JobView.serve()))
    with view:
        engine.get_list("words").extend(["a"])
        engine.new_job(jobs.counting_dag(_identity)).join(60)
        with caplog.at_level(logging.DEBUG, logger="jetspark.view"):
            answer = _raw_get(view, b"/api/jobs/" + job_id)
    assert answer.startswith(b"HTTP/1.0 404 "), answer[:200]
    assert len(answer) < 1000, "the answer repeats no long path"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert all(len(r.getMessage()) < 1000 for r in caplog.records)


def test_the_view_hangs_up_on_a_client_that_never_finishes_its_request() -> None:
    with JobView.serve(request_timeout=0.05) as view:
        host, port = view.url.split("/")[2].split(":")
        stalled = [socket.create_connection((host, int(port)), timeout=60) for _ in range(3)]
        for client in stalled:
            client.sendall(b"GET /api/jobs HTTP/1.1\r\nHost: x\r\n")  # no blank line: unfinished
        for client in stalled:
            with client:
                assert client.recv(1) == b"", "the view closed the connection"
        assert _raw_get(view, b"/api/jobs").startswith(b"HTTP/1.0 200 ")
    with pytest.raises(ValueError, match="request_timeout must be a positive number"):
        JobView.serve(request_timeout=0)


class _HeldClock:
    """A view clock that, once armed, holds the reading until released."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self.reading = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> float:
        if self.armed.is_set():
            self.reading.set()
            self.release.wait(60)
        return 1_000.0


def test_a_view_client_that_leaves_before_its_answer_leaves_no_traceback(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    clock = _HeldClock()
    view = JobView.serve(clock=clock)
    engine = LocalEngine(job_view=view)
    engine.get_list("words").extend(["a"] * 1000)
    with view, caplog.at_level(logging.DEBUG, logger="jetspark.view"):
        engine.new_job(jobs.counting_dag(_identity)).join(60)
        clock.armed.set()
        host, port = view.url.split("/")[2].split(":")
        for _ in range(5):
            clock.reading.clear()
            client = socket.create_connection((host, int(port)), timeout=60)
            client.sendall(b"GET /api/jobs/1 HTTP/1.0\r\n\r\n")
            assert clock.reading.wait(60)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()  # a reset: the answer's write fails
            left = len([r for r in caplog.records if "left" in r.getMessage()])
            clock.release.set()
            while len([r for r in caplog.records if "left" in r.getMessage()]) == left:
                assert "Traceback" not in capfd.readouterr().err
                time.sleep(0.01)
            clock.release.clear()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# --- stream_files_p: rotation while a writer holds the file, between looks, compressed (1, 2) ----

STREAM_CONFIG = JobConfig(
    processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=5
)
STREAM_ENGINES = [
    pytest.param("local", None, id="local"),
    pytest.param("spark", ExecutionMode.MICRO_BATCH, id="micro-batch", marks=pytest.mark.spark),
    pytest.param("spark", ExecutionMode.CONTINUOUS, id="continuous", marks=pytest.mark.spark),
]


class _Watched(StreamFilesP):
    """stream_files_p observed through files in `state` (so it works in Spark's Python workers
    too): each look adds a byte to `looks-<processor>`; while the file `hold` exists, a look
    waits, having written `held-<processor>`; the grace clock reads the number in `clock`
    (0: before every file's modification time; the test moves it to after)."""

    poll_seconds = 0.01

    def __init__(self, directory: Path, state: Path, glob: str = "*.log", **options: Any) -> None:
        super().__init__(str(directory), glob, "utf-8", False, True, **options)
        self._state = str(state)

    def clock(self) -> float:  # type: ignore[override]
        with open(os.path.join(self._state, "clock")) as file:
            return float(file.read())

    def _look(self) -> bool:
        me = self.context.global_processor_index
        if os.path.exists(os.path.join(self._state, "hold")):
            Path(self._state, f"held-{me}").touch()
            while os.path.exists(os.path.join(self._state, "hold")):
                time.sleep(0.005)
        looked = super()._look()
        with open(os.path.join(self._state, f"looks-{me}"), "ab") as file:
            file.write(b".")
        return looked


class _Followed:
    """A job of `kind` reading logs/*.log with _Watched into a transactional sink."""

    def __init__(
        self, kind: str, mode: ExecutionMode | None, tmp_path: Path, request: Any, **options: Any
    ) -> None:
        self.logs, self.out, self.state = tmp_path / "logs", tmp_path / "out", tmp_path / "state"
        self.logs.mkdir(exist_ok=True)
        self.processors = 1 if kind == "local" else 2
        self.state.mkdir()
        (self.state / "clock").write_text("0")
        config = STREAM_CONFIG
        if kind == "local":
            engine: Any = LocalEngine(1, snapshot_clock=jobs.TickClock())
        else:
            from jetspark.core.spark import SparkEngine

            context = request.getfixturevalue("spark_engine").context
            engine = SparkEngine(context, members=2, batch_items=1000)
            config = JobConfig(
                processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
                snapshot_interval_millis=5,
                execution_mode=mode,
            )
        logs, state = self.logs, self.state
        dag = DAG("followed-logs")
        files = dag.new_vertex(
            "files", unbounded(lambda: _Watched(logs, state, **options)), local_parallelism=1
        )
        sink = dag.new_vertex("sink", write_file_transactional_p(str(self.out)))
        dag.edge(between(files, sink).distributed())
        self.job = engine.new_job(
            dag, config, snapshot_store=DirectorySnapshotStore(tmp_path / "s")
        )

    def committed(self) -> list[str]:
        return jobs.committed_lines(str(self.out)) if self.out.is_dir() else []

    def wait_for(self, condition: Any) -> None:
        while not condition():
            assert not self.job.status.is_terminal, self.job.join(0)
            time.sleep(0.01)

    def looks(self) -> dict[str, int]:
        """How many looks each processor made so far."""
        return {p.name: p.stat().st_size for p in self.state.glob("looks-*")}

    def wait_for_looks(self, more: int) -> None:
        """Waits until each processor has looked `more` more times (all started looking)."""
        self.wait_for(lambda: len(self.looks()) == self.processors)
        before = self.looks()
        self.wait_for(lambda: all(n >= before[p] + more for p, n in self.looks().items()))

    def finish(self, expected: list[str]) -> None:
        self.wait_for(lambda: len(self.committed()) >= len(expected))
        shutil.rmtree(self.logs)
        self.job.join(300)
        assert self.committed() == sorted(expected)


def _lines(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{n}" for n in range(count)]


def _append(file: Any, lines: list[str]) -> None:
    file.write("".join(line + "\n" for line in lines))
    file.flush()


@pytest.mark.parametrize(("kind", "mode"), STREAM_ENGINES)
def test_lines_a_writer_appends_to_a_rotated_log_after_quiet_looks_are_read(
    kind: str, mode: ExecutionMode | None, tmp_path: Path, request: Any
) -> None:
    followed = _Followed(kind, mode, tmp_path, request)
    log = followed.logs / "app.log"
    with open(log, "a", encoding="utf-8") as writer:  # the application's descriptor
        _append(writer, _lines("before-", 100))
        followed.wait_for(lambda: len(followed.committed()) >= 100)
        log.rename(followed.logs / "app.log.1")  # logrotate; the writer keeps its descriptor
        followed.wait_for_looks(3)  # the rotated file was looked at, unchanged, since
        _append(writer, _lines("late-", 50))
        followed.wait_for(lambda: len(followed.committed()) >= 150)
        quiet = os.stat(followed.logs / "app.log.1").st_mtime + 10  # past the 5 s grace period
        (followed.state / "clock").write_text(str(quiet))
        followed.wait_for_looks(3)
        _append(writer, _lines("after-grace-", 5))  # no longer followed: not read
        followed.wait_for_looks(3)
    (followed.logs / "b.log").write_text("marker\n")
    followed.finish(_lines("before-", 100) + _lines("late-", 50) + ["marker"])


@pytest.mark.parametrize(("kind", "mode"), STREAM_ENGINES)
def test_a_log_written_and_rotated_between_two_looks_is_read_whole(
    kind: str, mode: ExecutionMode | None, tmp_path: Path, request: Any
) -> None:
    followed = _Followed(kind, mode, tmp_path, request, glob="app.log")
    logs = followed.logs
    (logs / "app.log").write_text("".join(f"{line}\n" for line in _lines("first-", 100)))
    followed.wait_for(lambda: len(followed.committed()) >= 100)
    followed.wait_for_looks(1)
    (followed.state / "hold").touch()
    followed.wait_for(lambda: len(list(followed.state.glob("held-*"))) == followed.processors)
    # between two looks: app.log rotated, a second one written and rotated, a third begun
    (logs / "app.log").rename(logs / "app.log.1")
    (logs / "app.log").write_text("".join(f"{line}\n" for line in _lines("second-", 70)))
    (logs / "app.log.1").rename(logs / "app.log.2")
    (logs / "app.log").rename(logs / "app.log.1")
    (logs / "app.log").write_text("".join(f"{line}\n" for line in _lines("third-", 30)))
    (followed.state / "hold").unlink()
    followed.finish(_lines("first-", 100) + _lines("second-", 70) + _lines("third-", 30))


@pytest.mark.parametrize(("kind", "mode"), STREAM_ENGINES)
@pytest.mark.parametrize("on_bad_input", ["fail", "skip"])
def test_compressed_rotations_the_glob_does_not_name_are_ignored(
    kind: str, mode: ExecutionMode | None, on_bad_input: str, tmp_path: Path, request: Any
) -> None:
    followed = _Followed(kind, mode, tmp_path, request, glob="app.log*", on_bad_input=on_bad_input)
    logs = followed.logs
    (logs / "app.log").write_text("".join(f"{line}\n" for line in _lines("first-", 100)))
    followed.wait_for(lambda: len(followed.committed()) >= 100)
    (logs / "app.log").rename(logs / "app.log.1")
    (logs / "app.log").write_text("".join(f"{line}\n" for line in _lines("second-", 40)))
    # logrotate's compress; stored blocks, so lines of text show through its bytes
    with gzip.open(logs / "app.log.1.gz", "wb", compresslevel=0) as compressed:
        compressed.write((logs / "app.log.1").read_bytes())
    (logs / "app.log.1").unlink()
    followed.finish(_lines("first-", 100) + _lines("second-", 40))


def test_a_glob_naming_compressed_files_is_refused_naming_the_type(tmp_path: Path) -> None:
    for glob, kind in [("*.gz", "gzip"), ("app.log.*.bz2", "bzip2"), ("*.zst*", "zstd")]:
        with pytest.raises(ValueError, match=f"names {kind}-compressed files"):
            stream_files_p(str(tmp_path), glob)


# --- micro-batches: the item budget follows what fits the interval (case 10) ---------------------


def _batches(fixed_cost: float, per_item: float, interval: float, count: int) -> list[float]:
    """The durations of `count` micro-batches of a job whose sources are always behind and
    whose batch costs `fixed_cost` plus `per_item` per item, its budget adapted after each."""
    budget = ItemBudget()
    durations = []
    for _ in range(count):
        seconds = fixed_cost + per_item * budget.items
        durations.append(seconds)
        budget.adapt(budget.items, seconds, True, interval)
    return durations


def test_a_slow_sink_brings_the_budget_down_to_what_fits_the_interval() -> None:
    # 2 ms an item (a slow sink), 1 s snapshots: the first batch is small (it was 40 s when it
    # started at 20,000 items), the second overshoots, the third fits
    durations = _batches(fixed_cost=0.2, per_item=0.002, interval=1.0, count=8)
    assert durations[0] <= 1.0
    assert all(0.5 <= seconds <= 1.0 for seconds in durations[2:]), durations


def test_the_first_batchs_duration_is_not_taken_as_the_cost_of_its_items() -> None:
    """It includes the job's start: 30 s of it must not shrink the budget of the next."""
    budget = ItemBudget()
    first = budget.items
    budget.adapt(first, 30.0, True, 1.0)
    assert budget.items == 4 * first


@pytest.mark.parametrize(
    ("fixed_cost", "per_item", "interval"),
    [(0.3, 1e-6, 0.1), (0.05, 1e-6, 1.0), (0.2, 0.5, 1.0)],
    ids=["fixed cost above the interval", "fast items", "an item a half second"],
)
def test_the_budget_keeps_throughput_where_the_fixed_cost_dominates(
    fixed_cost: float, per_item: float, interval: float
) -> None:
    durations = _batches(fixed_cost, per_item, interval, count=12)
    settled = durations[-1]
    items = round((settled - fixed_cost) / per_item)
    assert items >= MIN_ITEM_BUDGET
    # busy at least as long as fixed: throughput is at least half of what any budget gives
    assert settled - fixed_cost >= min(fixed_cost, BUSY_FRACTION * interval - fixed_cost) * 0.99
    assert settled <= max(interval, 2.01 * fixed_cost, fixed_cost + MIN_ITEM_BUDGET * per_item)


def test_a_fixed_budget_stays_fixed() -> None:
    budget = ItemBudget(150)
    budget.adapt(150, 30.0, True, 1.0)
    assert budget.items == 150


# --- the TF-IDF index: damage named as damage (case 7) --------------------------------------------

TEXTS = {
    "jet.txt": "The jet engine burns fuel.\nA jet flies fast and the jet is loud.\n",
    "spark.txt": "A spark lights the fuel.\nSpark clusters process data fast.\n",
}


@pytest.fixture
def partitioned_index(tmp_path: Path) -> Path:
    books = tmp_path / "books"
    books.mkdir()
    for name, text in TEXTS.items():
        (books / name).write_text(text * 50, encoding="utf-8")
    path = tmp_path / "index"
    write_index(LocalEngine(), scan_corpus(books), str(path), frozenset({"the", "a"}))
    return path


def _search(capsys: pytest.CaptureFixture[str], path: Path, query: str) -> tuple[int, str]:
    code = main(["search", query, "--index", str(path)])
    out, err = capsys.readouterr()
    return code, out + err


def test_a_truncated_index_part_is_named_damaged_once(
    partitioned_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    part = partitioned_index / part_name(
        partition_id("jet", open_index(partitioned_index).partitions)
    )
    part.write_bytes(part.read_bytes()[:-7])
    with pytest.raises(InputError) as raised:
        search(open_index(partitioned_index), "jet")
    message = str(raised.value)
    assert f"its part {part.name} holds" in message and "CRC-32" in message
    assert "not msgpack" not in message and message.count("damaged") == 1
    code, text = _search(capsys, partitioned_index, "jet")
    assert code == 2 and "not msgpack" not in text and "CRC-32" in text


def test_an_edited_index_manifest_is_named_damaged_not_answered(
    partitioned_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest_path = partitioned_index / "MANIFEST.msgpack"
    manifest = msgpack.unpackb(manifest_path.read_bytes(), strict_map_key=False)
    manifest["partitions"] += 1  # every word would be looked up in the wrong part
    manifest_path.write_bytes(msgpack.packb(manifest))
    with pytest.raises(InputError, match=r"MANIFEST\.msgpack does not match its checksum"):
        open_index(partitioned_index)
    code, text = _search(capsys, partitioned_index, "jet fuel")
    assert code == 2 and "is damaged" in text and "no document contains" not in text
    manifest_path.write_bytes(b"\xc1" + manifest_path.read_bytes())
    with pytest.raises(InputError, match=r"is damaged: its MANIFEST\.msgpack is not msgpack"):
        open_index(partitioned_index)


# --- Python text where the JVM's was (case 8) ---------------------------------------------------

SUBMITTED_ENGINE = """
from jetspark.core.spark import SparkEngine
SparkEngine()
"""


@pytest.mark.spark
@pytest.mark.parametrize("master", ["spark//h:7077", "local[0]"])
def test_spark_submit_with_a_master_that_is_no_master_url_is_a_value_error(
    master: str, tmp_path: Path
) -> None:
    import subprocess
    import sys

    app = tmp_path / "app.py"
    app.write_text(SUBMITTED_ENGINE)
    bin_dir = Path(sys.executable).parent
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "PYTHONPATH")
    }
    environment["PATH"] = f"{bin_dir}{os.pathsep}{environment.get('PATH', '')}"
    result = subprocess.run(
        [str(bin_dir / "spark-submit"), "--master", master, str(app)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"ValueError: {master!r} is not a Spark master URL" in output, output[-3000:]
    assert "\tat " not in output and "SparkStartError" not in output, output[-3000:]


NO_WORKER_PYTHON = """
import os
os.environ["PYSPARK_PYTHON"] = "/nonexistent/python3"
from jetspark.core import DAG, JobFailedError
from jetspark.core.spark import SparkEngine
from jetspark.edges import between
from jetspark.processors import read_list_p, write_list_p

engine = SparkEngine()
engine.get_list("in").extend([1, 2, 3])
dag = DAG("tiny")
source = dag.new_vertex("source", read_list_p("in"))
dag.edge(between(source, dag.new_vertex("sink", write_list_p("out"))))
try:
    engine.new_job(dag).join(120)
except JobFailedError as error:
    print("FAILED:", error)
"""


@pytest.mark.spark
def test_a_worker_python_that_cannot_run_is_named_in_python_terms(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "no_worker_python.py"
    script.write_text(NO_WORKER_PYTHON)
    environment = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=environment
    )
    [failed] = [line for line in result.stdout.splitlines() if line.startswith("FAILED:")]
    assert "the executors cannot run their Python '/nonexistent/python3'" in failed, failed
    assert "No such file or directory" in failed and "PYSPARK_PYTHON" in failed
    assert "z:org" not in failed and "org.apache" not in failed and "java." not in failed
    assert "\tat " not in result.stdout + result.stderr


FAILING_PROCESSOR = """
import sys
from jetspark.core import DAG, ExecutionMode, JobConfig, ProcessingGuarantee
from jetspark.core.spark import SparkEngine
from jetspark.edges import between
from jetspark.processors import map_p, read_list_p, write_list_p


def refuse_three(item):
    if item == 3:
        raise ValueError("three is not welcome")
    return item


config = JobConfig()
if sys.argv[1] != "plain":
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        execution_mode=ExecutionMode(sys.argv[1]),
        max_restarts=0,
    )
engine = SparkEngine()
engine.get_list("in").extend(range(10))
dag = DAG("refusing")
source = dag.new_vertex("source", read_list_p("in"))
refuse = dag.new_vertex("refuse", map_p(refuse_three))
dag.edge(between(source, refuse))
dag.edge(between(refuse, dag.new_vertex("sink", write_list_p("out"))))
engine.new_job(dag, config).join(120)
"""


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["plain", "micro_batch", "continuous"])
def test_an_uncaught_processor_failure_on_spark_prints_python_text_only(
    mode: str, tmp_path: Path
) -> None:
    import subprocess
    import sys

    script = tmp_path / "refusing.py"
    script.write_text(FAILING_PROCESSOR)
    result = subprocess.run(
        [sys.executable, str(script), mode], capture_output=True, text=True, timeout=240
    )
    terminal = result.stdout + result.stderr
    assert result.returncode == 1
    assert "JobFailedError: vertex 'refuse', processor #" in terminal, terminal[-3000:]
    assert "ValueError: three is not welcome" in terminal
    assert "\tat " not in terminal and "<<jetspark-failure" not in terminal, terminal[-3000:]
    assert "Py4JJavaError" not in terminal and "org.apache.spark" not in terminal
