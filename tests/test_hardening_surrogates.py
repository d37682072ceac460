"""Strs holding lone surrogates (issue 17, item 5): what `os.fsdecode` makes of a file name that
is not UTF-8. Counting them by key gives the same result at any member count, on both engines,
and snapshots holding them as keys restore, through a directory store too."""

from __future__ import annotations

import os
import sys
from collections import Counter
from typing import Any

import pytest
from fault_tolerance_jobs import (
    EXACTLY_ONCE,
    FailOnce,
    config,
    counting_dag,
    engine,
    expected_counts,
    run_to_completion,
)
from runtime_processors import ListSource, MapSink, SumByKey, ship_to_executors

from jetspark.core import DAG, DirectorySnapshotStore
from jetspark.core.serialization import decode_batch, encode_batch
from jetspark.edges import between
from jetspark.partitioning import DEFAULT

pytestmark = pytest.mark.timeout(60)

NAMES = [os.fsdecode(name) for name in (b"caf\xe9.txt", b"\xff\xfe", b"plain.txt", b"na\xefve")]
WORDS = [NAMES[i % len(NAMES)] for i in range(600)] + [("pair", NAMES[0])] * 5


def test_file_names_that_are_not_utf8_hold_lone_surrogates() -> None:
    assert NAMES[0] == "caf\udce9.txt"
    with pytest.raises(UnicodeEncodeError):
        NAMES[0].encode()


def test_a_batch_with_lone_surrogates_round_trips_exactly() -> None:
    batch = [*NAMES, ("k", NAMES[1]), 3]
    assert decode_batch(encode_batch(batch)) == batch


def count_dag() -> DAG:
    dag = DAG()
    source = dag.new_vertex("source", lambda: ListSource("names"), 2)
    count = dag.new_vertex("count", lambda: SumByKey(), 2)
    sink = dag.new_vertex("sink", lambda: MapSink("name_counts"), 1)
    dag.edge(between(source, count).distributed().partitioned(lambda item: item))
    dag.edge(between(count, sink))
    return dag


def counted(engine_: Any) -> dict[Any, int]:
    engine_.get_list("names")[:] = WORDS
    engine_.get_map("name_counts").clear()
    engine_.new_job(count_dag()).join(timeout=50)
    return dict(engine_.get_map("name_counts"))


@pytest.mark.parametrize("members", [1, 2, 3])
def test_counting_surrogate_keys_gives_the_same_result_at_any_member_count(members: int) -> None:
    from jetspark.core import LocalEngine

    assert counted(LocalEngine(members=members)) == dict(Counter(WORDS))


def test_surrogate_keys_get_one_partition_like_any_key() -> None:
    partition = DEFAULT.partition
    assert partition(NAMES[0], 271) == partition("caf\udce9.txt", 271)
    assert partition((NAMES[0], 1), 271) == partition((NAMES[0], 1.0), 271)


@pytest.mark.parametrize("members", [1, 2])
def test_snapshots_with_surrogate_keys_restore_through_a_directory_store(
    members: int, tmp_path: Any
) -> None:
    local = engine(members)
    local.get_list("words").extend(WORDS)
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    job = local.new_job(counting_dag(FailOnce(300)), config(EXACTLY_ONCE), snapshot_store=store)
    assert run_to_completion(job) == 1
    assert store.latest() is not None
    assert local.get_map("counts") == expected_counts(WORDS)  # type: ignore[arg-type]


@pytest.mark.spark
def test_spark_counts_surrogate_keys_like_local_engine(spark_engine: Any) -> None:
    ship_to_executors(sys.modules[__name__])
    assert counted(spark_engine) == dict(Counter(WORDS))
