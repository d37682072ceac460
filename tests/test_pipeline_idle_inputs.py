"""Idle inputs in the Pipeline API (issue #43): `add_timestamps(..., idle_timeout=)` marks a
quiet input idle, so it stops holding the coalesced watermark back and windows are emitted;
and Jet 4's names for the same stages. Assertions are on items only: a stream job is polled
for its results, then cancelled."""

from __future__ import annotations

import time
from typing import Any

import pytest

from jetspark.core import DagValidationError, LocalEngine
from jetspark.core.pipeline import Pipeline, Sinks, Sources, WindowDefinition
from jetspark.processors.aggregate import aggregate_operation2, counting
from jetspark.processors.journal import DEFAULT_JOURNAL_PARTITIONS

PATIENCE_SECONDS = 120.0
"""How long a test waits for results before it fails (a failure bound, not a speed claim)."""


def _timestamp(event: tuple[str, int]) -> int:
    return event[1]


def _results_of(engine: LocalEngine, job: Any, sink: str, count: int) -> list[Any]:
    """The sink list once it holds `count` items (the job's own error if it ends first)."""
    deadline = time.monotonic() + PATIENCE_SECONDS
    results = engine.get_list(sink)
    while len(results) < count:
        if job.status.is_terminal:
            job.join(0)
        assert time.monotonic() < deadline, f"{len(results)} of {count} results: {list(results)}"
        time.sleep(0.02)
    job.cancel()
    return sorted(results)


def test_a_windowed_co_aggregation_with_an_empty_input_emits_its_windows() -> None:
    """The review's reproduction: the second input never sees an item; once it is idle the
    windows of the first are emitted, counted against nothing."""
    engine = LocalEngine()
    engine.get_list("trades")[:] = [("a", t) for t in (1, 2, 11, 12, 13, 35)]
    engine.get_list("quotes")  # exists, empty, for ever
    p = Pipeline.create()
    trades = p.draw_from(Sources.stream_journal("trades")).add_timestamps(
        _timestamp, 0, idle_timeout=100
    )
    quotes = p.draw_from(Sources.stream_journal("quotes")).add_timestamps(
        _timestamp, 0, idle_timeout=100
    )
    windows = trades.window(WindowDefinition.tumbling(10))
    windows.aggregate2(quotes, aggregate_operation2(counting(), counting())).drain_to(
        Sinks.list("windows")
    )
    job = engine.new_job(p)
    results = _results_of(engine, job, "windows", 2)
    assert [(r.timestamp, r.item) for r in results] == [(10, (2, 0)), (20, (3, 0))]


def test_a_source_processor_without_items_stops_holding_the_watermark_once_idle() -> None:
    """Two source processors; a journal's offset n goes to processor n % 2, and the filter
    drops every item at an odd offset, so the second timestamping processor never sees one:
    it is marked idle, and the windows close on the first one's watermark alone."""
    engine = LocalEngine()
    events = [("k", 1), ("k", 5), ("k", 12), ("k", 30)]
    engine.get_list("events")[:] = [item for event in events for item in (event, ("noise", 0))]
    p = Pipeline.create()
    source = p.draw_from(Sources.stream_journal("events")).set_local_parallelism(2)
    stamped = source.filter(_not_noise).add_timestamps(_timestamp, 0, idle_timeout=100)
    stamped.window(WindowDefinition.tumbling(10)).aggregate(counting()).drain_to(
        Sinks.list("counts")
    )
    job = engine.new_job(p)
    results = _results_of(engine, job, "counts", 2)
    assert [(r.timestamp, r.item) for r in results] == [(10, 2), (20, 1)]


def test_journal_source_processors_reading_no_partition_never_hold_the_watermark_back() -> None:
    """`add_timestamps` right after a journal goes into the source: 20 processors share its 16
    partitions, and the 4 that read none are idle at once, even with idle marking off (as
    the vertex that stamped after the source, they would hold every window for ever). An item
    at 100 in every partition closes the windows before it."""
    engine = LocalEngine(members=2)
    closing = [("k", 100)] * DEFAULT_JOURNAL_PARTITIONS
    engine.get_list("events")[:] = [("k", t) for t in (1, 5, 12, 30)] + closing
    p = Pipeline.create()
    source = p.draw_from(Sources.stream_journal("events")).set_local_parallelism(10)
    stamped = source.add_timestamps(_timestamp, 0, idle_timeout=0)
    stamped.window(WindowDefinition.tumbling(10)).aggregate(counting()).drain_to(
        Sinks.list("counts")
    )
    assert [v.name for v in p.to_dag().vertices()][:2] == [
        "streamJournalSource(events)",
        "tumbling-window-step1",
    ]
    job = engine.new_job(p)
    results = _results_of(engine, job, "counts", 3)
    assert [(r.timestamp, r.item) for r in results] == [(10, 2), (20, 1), (40, 1)]


def _not_noise(event: tuple[str, int]) -> bool:
    return event[0] != "noise"


@pytest.mark.parametrize("value", [-1, 1.5, True, "60"])
def test_an_idle_timeout_that_is_not_a_whole_number_of_ms_is_refused_naming_the_stage(
    value: Any,
) -> None:
    p = Pipeline.create()
    stage = p.draw_from(Sources.stream_journal("events"))
    with pytest.raises(ValueError, match=r"stage 'streamJournalSource\(events\)': idle_timeout"):
        stage.add_timestamps(_timestamp, 0, idle_timeout=value)


def test_jet_4_names_build_the_same_pipeline_as_jet_0_7_names() -> None:
    def build(jet4: bool) -> str:
        p = Pipeline.create()
        source = Sources.stream_journal("events")
        stage = p.read_from(source) if jet4 else p.draw_from(source)
        if jet4:
            stamped = stage.without_timestamps().with_timestamps(_timestamp, 5)
        else:
            stamped = stage.add_timestamps(_timestamp, 5)
        counted = stamped.window(WindowDefinition.tumbling(10)).aggregate(counting())
        if jet4:
            counted.write_to(Sinks.list("counts"))
        else:
            counted.drain_to(Sinks.list("counts"))
        return p.to_dot()

    assert build(True) == build(False)


def test_pipeline_write_to_drains_every_stage_into_one_sink() -> None:
    engine = LocalEngine()
    engine.get_list("first")[:] = [1, 2]
    engine.get_list("second")[:] = [3]
    p = Pipeline.create()
    first = p.read_from(Sources.list("first"))
    second = p.read_from(Sources.list("second"))
    p.write_to(Sinks.list("all"), first, second)
    engine.new_job(p).join()
    assert sorted(engine.get_list("all")) == [1, 2, 3]


def test_without_timestamps_on_a_timestamped_stage_is_refused_naming_it() -> None:
    p = Pipeline.create()
    stamped = p.draw_from(Sources.stream_journal("events")).add_timestamps(_timestamp, 0)
    with pytest.raises(DagValidationError, match="already have timestamps"):
        stamped.without_timestamps()


def test_ingestion_timestamps_window_items_by_when_they_came() -> None:
    """Every item gets the wall clock as its timestamp: a bounded source's items all land in
    windows, and each is counted once."""
    engine = LocalEngine()
    engine.get_list("numbers")[:] = list(range(50))
    p = Pipeline.create()
    stamped = p.read_from(Sources.list("numbers")).with_ingestion_timestamps()
    stamped.window(WindowDefinition.tumbling(60_000)).aggregate(counting()).write_to(
        Sinks.list("counts")
    )
    engine.new_job(p).join()
    assert sum(r.item for r in engine.get_list("counts")) == 50
