"""Services in the Pipeline API (Jet 4's `mapUsingService` and its async forms; issue #43):
sync and async lookups, futures and coroutines, batches, keyed forms, event time kept through
an async stage, and exactly-once across a cancel and a restore on more members."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import Counter
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from test_pipeline_conformance import NUMBERS, counter_source, jobs_wait_for_commit

from jetspark.core import (
    DirectorySnapshotStore,
    JobCancelledError,
    JobConfig,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.pipeline import Pipeline, Sinks, Sources, WindowDefinition
from jetspark.processors import ServiceFactories
from jetspark.processors.aggregate import counting

PATIENCE_SECONDS = 120.0
NAMES = {n: f"name-{n}" for n in range(10)}


def _directory(context: Any) -> dict[int, str]:
    return dict(NAMES)


def _lookup(directory: dict[int, str], n: int) -> str:
    return directory[n % 10]


async def _lookup_later(directory: dict[int, str], n: int) -> str:
    await asyncio.sleep(0.001)
    return directory[n % 10]


_POOL = concurrent.futures.ThreadPoolExecutor(4)


def _lookup_in_a_thread(directory: dict[int, str], n: int) -> concurrent.futures.Future[str]:
    return _POOL.submit(_lookup, directory, n)


async def _both_later(directory: dict[int, str], n: int) -> list[str]:
    return [directory[n % 10], str(n)]


async def _batch_later(directory: dict[int, str], ns: list[int]) -> list[str | None]:
    return [None if n == 3 else directory[n % 10] for n in ns]


def _keyed_lookup(directory: dict[int, str], key: int, n: int) -> concurrent.futures.Future[str]:
    return _POOL.submit(lambda: f"{key}:{directory[n % 10]}")


def _run(stage_fn: Any, items: list[int], members: int = 2) -> list[Any]:
    engine = LocalEngine(members=members)
    engine.get_list("xs")[:] = items
    p = Pipeline.create()
    stage_fn(p.draw_from(Sources.list("xs"))).drain_to(Sinks.list("out"))
    engine.new_job(p).join(60)
    return list(engine.get_list("out"))


@pytest.mark.parametrize(
    "factory",
    [ServiceFactories.shared_service(_directory), ServiceFactories.non_shared_service(_directory)],
    ids=["shared", "non-shared"],
)
def test_a_sync_service_maps_filters_and_flat_maps(factory: Any) -> None:
    items = list(range(20))
    assert sorted(_run(lambda s: s.map_using_service(factory, _lookup), items)) == sorted(
        NAMES[n % 10] for n in items
    )
    kept = _run(lambda s: s.filter_using_service(factory, lambda d, n: n in d), items)
    assert sorted(kept) == list(range(10))
    both = _run(lambda s: s.flat_map_using_service(factory, lambda d, n: [d[n % 10], n]), [1])
    assert sorted(both, key=str) == [1, "name-1"]


@pytest.mark.parametrize("fn", [_lookup_later, _lookup_in_a_thread], ids=["coroutine", "future"])
@pytest.mark.parametrize("ordered", [True, False])
def test_an_async_service_gives_every_result_once(fn: Any, ordered: bool) -> None:
    factory = ServiceFactories.non_shared_service(_directory)
    items = list(range(200))
    out = _run(lambda s: s.map_using_service_async(factory, fn, 8, ordered), items)
    assert sorted(out) == sorted(NAMES[n % 10] for n in items)


def test_the_flat_map_and_batched_async_forms() -> None:
    factory = ServiceFactories.shared_service(_directory)
    flat = _run(lambda s: s.flat_map_using_service_async(factory, _both_later), [1, 2])
    assert sorted(flat) == ["1", "2", "name-1", "name-2"]
    batched = _run(lambda s: s.map_using_service_async_batched(factory, 4, _batch_later), [1, 3, 5])
    assert sorted(batched) == ["name-1", "name-5"]


def test_a_keyed_async_service_gets_the_key() -> None:
    factory = ServiceFactories.non_shared_service(_directory)
    out = _run(
        lambda s: s.grouping_key(lambda n: n % 2).map_using_service_async(factory, _keyed_lookup),
        [1, 2, 3],
        members=3,
    )
    assert sorted(out) == ["0:name-2", "1:name-1", "1:name-3"]


async def _keyed_batch_later(
    directory: dict[int, str], keys: list[int], ns: list[int]
) -> list[str | None]:
    return [
        None if n == 4 else f"{key}:{directory[n % 10]}" for key, n in zip(keys, ns, strict=True)
    ]


def test_a_keyed_batched_async_service_gets_each_items_key() -> None:
    """Jet 4's keyed `mapUsingServiceAsyncBatched(factory, max_batch_size, (s, keys, items))`:
    `keys[n]` is the key of `items[n]`; a None result drops its item."""
    factory = ServiceFactories.shared_service(_directory)
    out = _run(
        lambda s: s.grouping_key(lambda n: n % 3).map_using_service_async_batched(
            factory, 2, _keyed_batch_later
        ),
        list(range(9)),
        members=3,
    )
    assert sorted(out) == sorted(f"{n % 3}:name-{n}" for n in range(9) if n != 4)


def _time(n: int) -> int:
    return n


@pytest.mark.parametrize("form", ["map", "keyed batched"])
def test_an_async_stage_keeps_the_event_time_for_the_windows_after_it(form: str) -> None:
    engine = LocalEngine()
    engine.get_list("events")[:] = [1, 2, 11, 30]
    p = Pipeline.create()
    factory = ServiceFactories.non_shared_service(_directory)
    stamped = p.draw_from(Sources.stream_journal("events")).add_timestamps(_time, 0)
    if form == "map":
        looked_up = stamped.map_using_service_async(factory, _lookup_later)
    else:
        looked_up = stamped.grouping_key(_time).map_using_service_async_batched(
            factory, 2, _keyed_batch_later
        )
    looked_up.window(WindowDefinition.tumbling(10)).aggregate(counting()).drain_to(
        Sinks.list("counts")
    )
    job = engine.new_job(p)
    counts = engine.get_list("counts")
    deadline = time.monotonic() + PATIENCE_SECONDS
    while len(counts) < 2:
        assert time.monotonic() < deadline and not job.status.is_terminal, list(counts)
        time.sleep(0.02)
    job.cancel()
    assert sorted(counts)[:2] == [(10, 2), (20, 1)]


def test_a_service_stage_rejects_what_is_not_a_factory_naming_the_stage() -> None:
    stage = Pipeline.create().draw_from(Sources.list("xs"))
    with pytest.raises(TypeError, match=r"stage 'listSource\(xs\)': map-using-service-async"):
        stage.map_using_service_async(_directory, _lookup_later)  # type: ignore[arg-type]


def _seventh(n: int) -> int:
    return n % 7


async def _tagged(directory: dict[int, str], n: int) -> str:
    await asyncio.sleep(0)
    return f"{n}:{directory[n % 10]}"


@pytest.mark.parametrize("ordered", [True, False])
def test_an_async_stage_is_exactly_once_across_a_cancel_and_a_restore_on_more_members(
    tmp_path: Any, ordered: bool
) -> None:
    gate, out = str(tmp_path / "gate"), str(tmp_path / "out")
    store = DirectorySnapshotStore(str(tmp_path / "snapshots"))
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=100
    )
    factory = ServiceFactories.non_shared_service(_directory)

    def pipeline() -> Pipeline:
        p = Pipeline.create()
        numbers = p.draw_from(counter_source(gate)).rebalance()
        numbers.map_using_service_async(factory, _tagged, 8, ordered).drain_to(
            Sinks.files_transactional(out)
        )
        return p

    job = LocalEngine(members=2).new_job(pipeline(), config, snapshot_store=store)
    jobs_wait_for_commit(job)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(PATIENCE_SECONDS)
    open(gate, "w").close()
    LocalEngine(members=3).new_job(
        pipeline(), config, snapshot_store=store, restore_from=store.latest()
    ).join(PATIENCE_SECONDS)
    lines = jobs.committed_lines(out)
    assert Counter(lines) == Counter(f"{n}:{NAMES[n % 10]}" for n in range(NUMBERS))


@pytest.mark.spark
def test_an_async_stage_is_exactly_once_across_a_killed_python_worker_in_continuous(
    spark_engine: Any, tmp_path: Any
) -> None:
    """CONTINUOUS on 2 members, unordered (items in flight are saved): a Python worker dies
    (SIGKILL) at an item after the first commit; the job restarts by itself and every result
    is written exactly once."""
    import os
    import signal

    from test_continuous import continuous

    from jetspark.core.spark import SparkEngine

    spark = SparkEngine(spark_engine.context, members=2)
    out, snapshots = str(tmp_path / "out"), str(tmp_path / "snapshots")
    gate = os.path.join(snapshots, "snapshot-*", "MANIFEST")
    kill = jobs.SignalOnce(signal.SIGKILL, NUMBERS // 2 + 10, snapshots, str(tmp_path / "killed"))
    factory = ServiceFactories.non_shared_service(_directory)
    p = Pipeline.create()
    numbers = p.draw_from(counter_source(gate)).map(kill).rebalance()
    numbers.map_using_service_async(factory, _tagged, 8, False).drain_to(
        Sinks.files_transactional(out)
    )
    job = spark.new_job(p, continuous(interval=5), snapshot_store=DirectorySnapshotStore(snapshots))
    job.join(240)
    assert os.path.exists(tmp_path / "killed")
    assert job.metrics.restarts == 1
    assert Counter(jobs.committed_lines(out)) == Counter(
        f"{n}:{NAMES[n % 10]}" for n in range(NUMBERS)
    )
