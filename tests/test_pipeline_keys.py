"""Keys in the Pipeline API (issue #43): `grouping_key(key_fn, partitioner)` for keys the
default partitioner cannot route, and `rebalance(key_fn=None)` (Jet 4.2). Three members, so
every distributed edge really routes; assertions on items."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from jetspark.core import DagValidationError, JobFailedError, LocalEngine
from jetspark.core.pipeline import Pipeline, Sinks, Sources
from jetspark.processors.aggregate import aggregate_operation2, counting

WORDS = ["apple", "pear", "apple", "fig", "pear", "apple"]


class Fruit:
    """A key of the user's own: hashable, but no deterministic encoding is known for it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fruit) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Fruit({self.name!r})"


class ByFirstLetter:
    """A partitioner of the user's own: the same in every process."""

    def partition(self, key: Any, partition_count: int) -> int:
        return ord(key.name[0]) % partition_count

    def __eq__(self, other: object) -> bool:
        return type(other) is ByFirstLetter

    def __hash__(self) -> int:
        return 1


def _fruit(word: str) -> Fruit:
    return Fruit(word)


def _counts(engine: LocalEngine, sink: str) -> dict[str, int]:
    return {key.name: count for key, count in engine.get_list(sink)}


def test_a_partitioner_given_to_grouping_key_routes_keys_of_the_users_type() -> None:
    engine = LocalEngine(members=3)
    engine.get_list("words")[:] = WORDS
    p = Pipeline.create()
    words = p.draw_from(Sources.list("words"))
    words.grouping_key(_fruit, ByFirstLetter()).aggregate(counting()).drain_to(Sinks.list("n"))
    engine.new_job(p).join(60)
    assert _counts(engine, "n") == dict(Counter(WORDS))


def test_without_a_partitioner_such_a_key_fails_naming_its_type_and_the_fix() -> None:
    engine = LocalEngine(members=3)
    engine.get_list("words")[:] = WORDS
    p = Pipeline.create()
    words = p.draw_from(Sources.list("words"))
    words.grouping_key(_fruit).aggregate(counting()).drain_to(Sinks.list("n"))
    with pytest.raises(JobFailedError, match=r"'Fruit'.*partitioner") as failure:
        engine.new_job(p).join(60)
    assert "group-and-aggregate" in str(failure.value)


def test_stages_grouped_together_must_choose_the_same_partitioner() -> None:
    p = Pipeline.create()
    first = p.draw_from(Sources.list("a")).grouping_key(_fruit, ByFirstLetter())
    second = p.draw_from(Sources.list("b")).grouping_key(_fruit)
    with pytest.raises(DagValidationError, match="same partitioner"):
        first.aggregate2(second, aggregate_operation2(counting(), counting())).drain_to(
            Sinks.list("n")
        )
        p.to_dag()


def test_a_partitioner_without_partition_is_refused_naming_the_stage() -> None:
    stage = Pipeline.create().draw_from(Sources.list("a"))
    with pytest.raises(TypeError, match=r"stage 'listSource\(a\)': grouping_key's partitioner"):
        stage.grouping_key(_fruit, 42)  # type: ignore[arg-type]


@pytest.mark.parametrize("by_key", [False, True], ids=["round-robin", "by key"])
def test_rebalance_spreads_the_items_over_the_members_and_changes_none(by_key: bool) -> None:
    engine = LocalEngine(members=3)
    engine.get_list("numbers")[:] = list(range(300))
    p = Pipeline.create()
    numbers = p.draw_from(Sources.list("numbers"))
    spread = numbers.rebalance(_tens) if by_key else numbers.rebalance()
    spread.map(_doubled).drain_to(Sinks.list("out"))
    dag = p.to_dag()
    edge = next(e for e in dag.edges() if e.dest_name == "rebalance")
    assert edge.is_distributed
    assert (edge.routing_policy.name == "PARTITIONED") is by_key
    engine.new_job(p).join(60)
    assert sorted(engine.get_list("out")) == [2 * n for n in range(300)]


def _tens(n: int) -> int:
    return n // 10


def _doubled(n: int) -> int:
    return 2 * n
