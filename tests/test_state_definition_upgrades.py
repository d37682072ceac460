"""Job upgrades that change what saved state means (issue #45): a changed window, aggregate
operation, grouping key or processor class is refused at submit, naming the vertex and both
definitions, on every engine; `state_on_definition_change="drop"` restores those vertices
empty; the same pipeline restored after a cancel at several points is exact on every engine;
a window processor given frames of another window definition fails naming the frame."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
import test_job_upgrades as upgrades
import test_streaming_conformance as conformance
from test_pipeline_conformance import NUMBERS, counter_source

from jetspark.core import (
    AbstractProcessor,
    DirectorySnapshotStore,
    JobCancelledError,
    JobConfig,
    LocalEngine,
    ProcessingGuarantee,
    SnapshotError,
)
from jetspark.core.pipeline import Pipeline, Sinks, WindowDefinition
from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext
from jetspark.core.watermark import Watermark
from jetspark.processors import sliding_window
from jetspark.processors.aggregate import counting, summing
from jetspark.processors.windowing import SlidingWindowPolicy, TimestampKind

PATIENCE_SECONDS = 180.0


def _timestamp(n: int) -> int:
    return n


def _mod7(n: int) -> int:
    return n % 7


def _mod5(n: int) -> int:
    return n % 5


def _line(start: int, end: int, result: int) -> str:
    return f"{end}:{result}"


def _keyed_line(start: int, end: int, key: Any, result: int) -> str:
    return f"{end}:{key}:{result}"


@dataclasses.dataclass
class Version:
    """One version of the windowed pipeline: what an upgrade may change."""

    window: WindowDefinition = dataclasses.field(
        default_factory=lambda: WindowDefinition.tumbling(100)
    )
    operation: Callable[[], Any] = counting
    key: Callable[[int], int] | None = None

    def pipeline(self, source: Any, out: str) -> Pipeline:
        p = Pipeline.create()
        stage = p.draw_from(source).add_timestamps(_timestamp, 0)
        if self.key is None:
            windowed = (
                stage.window(self.window).aggregate(self.operation(), _line).set_name("window")
            )
        else:
            windowed = (
                stage.grouping_key(self.key)
                .window(self.window)
                .aggregate(self.operation(), _keyed_line)
                .set_name("window")
            )
        windowed.drain_to(Sinks.files_transactional(out))
        return p


class Cut:
    """A first run of a pipeline stopped after `stop` numbers, its last snapshot in `store`."""

    def __init__(self, engine: Any, config: JobConfig, tmp_path: Any, stop: int) -> None:
        self.paused, self.gate = str(tmp_path / "paused"), str(tmp_path / "gate")
        self.store = DirectorySnapshotStore(str(tmp_path / "snapshots"))
        self.engine, self.config, self.stop, self.tmp_path = engine, config, stop, tmp_path

    def source(self) -> Any:
        return counter_source(self.gate, self.stop, self.paused)

    def first_run(self, version: Version) -> None:
        """Runs `version` until a snapshot committed after the source paused, then cancels."""
        job = self.engine.new_job(
            version.pipeline(self.source(), str(self.tmp_path / "out")),
            self.config,
            snapshot_store=self.store,
        )
        _wait_until(lambda: os.path.exists(self.paused), job)
        seen = job.metrics.snapshot_count
        _wait_until(lambda: job.metrics.snapshot_count >= seen + 2, job)
        job.cancel()
        with pytest.raises(JobCancelledError):
            job.join(PATIENCE_SECONDS)
        open(self.gate, "w").close()

    def restore(self, version: Version, out: str, config: JobConfig | None = None) -> Any:
        """Submits `version` restoring the last snapshot; returns the job."""
        return self.engine.new_job(
            version.pipeline(self.source(), out),
            config or self.config,
            snapshot_store=self.store,
            restore_from=self.store.latest(),
        )


def _wait_until(condition: Callable[[], bool], job: Any) -> None:
    """Polls `condition` while `job` runs (the pytest timeout bounds a hang)."""
    while not condition():
        assert not job.status.is_terminal, job.join(0)
        time.sleep(0.01)


def _local_config(**settings: Any) -> JobConfig:
    return JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=20,
        **settings,
    )


def _every_window_of(size: int, numbers: range) -> list[str]:
    """The lines of the tumbling windows of `size` over `numbers` (timestamp = number)."""
    counts: dict[int, int] = {}
    for n in numbers:
        end = (n // size + 1) * size
        counts[end] = counts.get(end, 0) + 1
    return sorted(f"{end}:{count}" for end, count in counts.items())


@pytest.mark.parametrize("stop", [100, 350, 777, 1499])
def test_the_same_pipeline_restored_after_a_cancel_at_any_point_is_exact(
    tmp_path: Any, stop: int
) -> None:
    cut = Cut(LocalEngine(2), _local_config(), tmp_path, stop)
    cut.first_run(Version())
    cut.restore(Version(), str(tmp_path / "out")).join(PATIENCE_SECONDS)
    assert jobs.committed_lines(str(tmp_path / "out")) == _every_window_of(100, range(NUMBERS))


@pytest.mark.parametrize(
    ("upgrade", "before", "after"),
    [
        ("window", "tumbling(size=100)", "tumbling(size=200)"),
        ("operation", "_count_one", "_Summing"),
        ("sliding", "tumbling(size=100)", "sliding(size=200, slide=100)"),
    ],
)
def test_an_upgrade_changing_the_window_or_the_operation_is_refused_naming_both(
    tmp_path: Any, upgrade: str, before: str, after: str
) -> None:
    cut = Cut(LocalEngine(2), _local_config(), tmp_path, 350)
    cut.first_run(Version())
    changed = {
        "window": Version(window=WindowDefinition.tumbling(200)),
        "operation": Version(operation=summing),
        "sliding": Version(window=WindowDefinition.sliding(200, 100)),
    }[upgrade]
    with pytest.raises(SnapshotError) as refused:
        cut.restore(changed, str(tmp_path / "out"))
    message = str(refused.value)
    assert "vertex 'window-step" in message
    assert before in message and after in message
    assert 'state_on_definition_change="drop"' in message


def test_an_upgrade_changing_the_grouping_key_is_refused_naming_both_functions(
    tmp_path: Any,
) -> None:
    cut = Cut(LocalEngine(2), _local_config(), tmp_path, 350)
    cut.first_run(Version(key=_mod7))
    with pytest.raises(SnapshotError, match=r"key was test_state_definition_upgrades\._mod7, "):
        cut.restore(Version(key=_mod5), str(tmp_path / "out"))


def test_dropping_the_state_of_a_changed_window_recomputes_from_the_restored_sources(
    tmp_path: Any,
) -> None:
    """The window restores nothing: the items of its open windows at the snapshot are lost,
    and everything the source reads after its restored offset is counted in the new windows."""
    cut = Cut(LocalEngine(2), _local_config(), tmp_path, 350)
    cut.first_run(Version())
    first = jobs.committed_lines(str(tmp_path / "out"))
    assert first == _every_window_of(100, range(300))  # (300, 400] was open at the snapshot
    drop = _local_config(state_on_definition_change="drop")
    out = str(tmp_path / "out")
    cut.restore(Version(window=WindowDefinition.tumbling(200)), out, drop).join(PATIENCE_SECONDS)
    assert jobs.committed_lines(out) == sorted(first + _every_window_of(200, range(350, NUMBERS)))


class CountB(AbstractProcessor):
    """A counter of another class in the place of the keyed counter."""


def test_a_changed_processor_class_of_a_vertex_with_state_is_refused_naming_both() -> None:
    engine = upgrades.jobs.engine(2)
    before = upgrades.first_version(engine, "count")
    with pytest.raises(SnapshotError) as refused:
        engine.new_job(
            upgrades.upgraded_dag("count", counter=CountB),
            upgrades.guaranteed(),
            restore_from=before,
        )
    message = str(refused.value)
    assert "vertex 'count'" in message
    assert "processor was jetspark.processors.aggregation.GroupByKeyP" in message
    assert "now test_state_definition_upgrades.CountB" in message
    dropped = engine.new_job(
        upgrades.upgraded_dag("count", counter=CountB),
        upgrades.guaranteed(state_on_definition_change="drop"),
        restore_from=before,
    )
    dropped.cancel()
    with pytest.raises(JobCancelledError):
        dropped.join(PATIENCE_SECONDS)


def test_a_source_restored_from_offsets_of_another_journal_is_refused() -> None:
    engine = upgrades.jobs.engine(2)
    before = upgrades.first_version(engine, "count")
    with pytest.raises(SnapshotError, match="vertex 'source': journal was 'words', now 'other'"):
        engine.new_job(
            upgrades.upgraded_dag("count", journal="other"),
            upgrades.guaranteed(),
            restore_from=before,
        )


def test_state_on_definition_change_takes_drop_or_none() -> None:
    with pytest.raises(ValueError, match='state_on_definition_change must be "drop" or None'):
        JobConfig(state_on_definition_change="rekey")  # type: ignore[arg-type]


def test_a_window_given_frames_of_another_window_definition_fails_naming_the_frame() -> None:
    """The cause of lost items when a changed window was restored: a frame ending at 1700,
    saved by tumbling(100) windows, lies between the frames of tumbling(200) windows and was
    never emitted once the first watermark after the restore jumped past it."""
    new = sliding_window.aggregate_to_sliding_window_p(
        _mod7, _timestamp, TimestampKind.EVENT, SlidingWindowPolicy(200, 200), counting()
    )()
    new.init(TestOutbox(100), TestProcessorContext())
    with pytest.raises(ValueError, match=r"saved frame 1700 of key 3 is no frame end of "):
        new.restore_from_snapshot(TestInbox([(3, {1700: 50})]))


def test_a_window_restores_frames_of_its_own_definition_and_emits_them() -> None:
    new = sliding_window.aggregate_to_sliding_window_p(
        _mod7, _timestamp, TimestampKind.EVENT, SlidingWindowPolicy(200, 200), counting()
    )()
    outbox = TestOutbox(100)
    new.init(outbox, TestProcessorContext())
    new.restore_from_snapshot(TestInbox([(3, {1800: 50})]))
    assert new.finish_snapshot_restore()
    assert new.try_process_watermark(Watermark(2100))
    assert [result.value for result in outbox.queue(0)] == [50]


@pytest.mark.spark
@pytest.mark.parametrize("stop", [350, 1499])
@pytest.mark.parametrize("mode", ["micro_batch", "continuous"])
def test_changed_definitions_are_refused_and_the_same_ones_restored_exactly_on_spark(
    spark_engine: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any, mode: str, stop: int
) -> None:
    request = _Param(mode, spark_engine)
    engine = conformance.engine_for(request, monkeypatch)  # type: ignore[arg-type]
    cut = Cut(engine, conformance.guaranteed(), tmp_path, stop)
    cut.first_run(Version(key=_mod7))
    out = str(tmp_path / "out")
    for changed, clause in (
        (Version(key=_mod7, window=WindowDefinition.tumbling(200)), r"window was tumbling\(size="),
        (Version(key=_mod7, operation=summing), "aggregate was AggregateOperation"),
        (Version(key=_mod5), r"key was test_state_definition_upgrades\._mod7, now "),
    ):
        with pytest.raises(SnapshotError, match=f"vertex 'window-step1': .*{clause}"):
            cut.restore(changed, out)
    cut.restore(Version(key=_mod7), out).join(PATIENCE_SECONDS)
    expected: dict[tuple[int, int], int] = {}
    for n in range(NUMBERS):
        window = ((n // 100 + 1) * 100, n % 7)
        expected[window] = expected.get(window, 0) + 1
    lines = sorted(f"{end}:{key}:{count}" for (end, key), count in expected.items())
    assert jobs.committed_lines(out) == lines


@dataclasses.dataclass
class _Param:
    """What `conformance.engine_for` reads of a pytest request."""

    param: str
    spark_engine: Any

    def getfixturevalue(self, name: str) -> Any:
        assert name == "spark_engine"
        return self.spark_engine
