"""Tests of Edge, EdgeConfig and RoutingPolicy (manual §8.1.3-8.1.7): factories and setters."""

from __future__ import annotations

import pytest

from jetspark.core import DagValidationError, Processor, Vertex
from jetspark.edges import Edge, EdgeConfig, RoutingPolicy, between, from_
from jetspark.partitioning import DEFAULT, HASH_CODE


class NoopP(Processor):
    pass


def key_of(item):
    return item


@pytest.fixture
def a() -> Vertex:
    return Vertex("a", NoopP)


@pytest.fixture
def b() -> Vertex:
    return Vertex("b", NoopP)


def ends(edge: Edge) -> tuple:
    return (edge.source, edge.source_name, edge.source_ordinal, edge.destination,
            edge.dest_name, edge.dest_ordinal)  # fmt: skip


def test_defaults_are_jets(a, b):
    edge = Edge.between(a, b)
    assert edge.is_distributed is False
    assert edge.routing_policy is RoutingPolicy.UNICAST
    assert edge.get_priority() == 0
    assert edge.config == EdgeConfig()
    assert edge.config.queue_size == 1024
    assert (edge.key_fn, edge.partitioner) == (None, None)


@pytest.mark.parametrize(
    ("build", "ordinals"),
    [
        (lambda a, b: Edge.between(a, b), (0, 0)),
        (lambda a, b: between(a, b), (0, 0)),
        (lambda a, b: Edge.from_(a).to(b), (0, 0)),
        (lambda a, b: Edge.from_(a, 1).to(b, 2), (1, 2)),
        (lambda a, b: from_(a, 1).to(b, 2), (1, 2)),
        (lambda a, b: from_(a, 3).to(b), (3, 0)),
        (lambda a, b: Edge(a, 4).to(b, 5), (4, 5)),
    ],
    ids=[
        "Edge.between",
        "between",
        "Edge.from_ defaults",
        "Edge.from_",
        "from_",
        "from_ 3",
        "Edge",
    ],
)
def test_factories_connect_the_given_ordinals(a, b, build, ordinals):
    edge = build(a, b)
    assert ends(edge) == (a, "a", ordinals[0], b, "b", ordinals[1])


def test_from_leaves_the_destination_open(a):
    edge = from_(a, 2)
    assert (edge.destination, edge.dest_name, edge.source_ordinal) == (None, None, 2)
    assert repr(edge) == "Edge(a:2 -> ?:0)"


CHAINABLE = {
    "to": lambda e, b: e.to(b),
    "distributed": lambda e, b: e.distributed(),
    "local": lambda e, b: e.local(),
    "unicast": lambda e, b: e.unicast(),
    "isolated": lambda e, b: e.isolated(),
    "broadcast": lambda e, b: e.broadcast(),
    "all_to_one": lambda e, b: e.all_to_one(),
    "partitioned": lambda e, b: e.partitioned(key_of),
    "priority": lambda e, b: e.priority(-1),
    "set_config": lambda e, b: e.set_config(EdgeConfig(queue_size=16)),
}


@pytest.mark.parametrize("setter", list(CHAINABLE))
def test_setters_return_the_edge(a, b, setter):
    edge = from_(a)
    assert CHAINABLE[setter](edge, b) is edge


@pytest.mark.parametrize(
    ("setter", "policy"),
    [
        (Edge.unicast, RoutingPolicy.UNICAST),
        (Edge.isolated, RoutingPolicy.ISOLATED),
        (Edge.broadcast, RoutingPolicy.BROADCAST),
        (Edge.all_to_one, RoutingPolicy.ALL_TO_ONE),
    ],
    ids=lambda x: getattr(x, "__name__", None),
)
def test_routing_setters_choose_the_policy_and_drop_a_key(a, b, setter, policy):
    edge = between(a, b).partitioned(key_of)
    setter(edge)
    assert edge.routing_policy is policy
    assert (edge.key_fn, edge.partitioner) == (None, None)


def test_partitioned_uses_murmur3_by_default(a, b):
    edge = between(a, b).partitioned(key_of)
    assert edge.routing_policy is RoutingPolicy.PARTITIONED
    assert edge.key_fn is key_of
    assert edge.partitioner is DEFAULT
    assert edge.allows_nondeterministic_partitioner is False


def test_partitioned_takes_a_partitioner_and_the_nondeterminism_waiver(a, b):
    edge = between(a, b).partitioned(key_of, HASH_CODE, allow_nondeterministic=True)
    assert edge.partitioner is HASH_CODE
    assert edge.allows_nondeterministic_partitioner is True


def test_distributed_and_local_toggle(a, b):
    edge = between(a, b).distributed()
    assert edge.is_distributed is True
    assert edge.local().is_distributed is False


def test_priority_and_config_are_kept(a, b):
    edge = between(a, b).priority(-5).set_config(EdgeConfig(queue_size=512))
    assert edge.get_priority() == -5
    assert edge.config.queue_size == 512


def test_routing_policy_has_jets_five_policies():
    assert {p.name for p in RoutingPolicy} == {
        "UNICAST",
        "ISOLATED",
        "BROADCAST",
        "PARTITIONED",
        "ALL_TO_ONE",
    }


@pytest.mark.parametrize(
    ("misuse", "error", "message"),
    [
        (lambda a, b: between(a, b).to(b), DagValidationError, r"a:0 -> b:0.*already set"),
        (lambda a, b: from_(a, -1), DagValidationError, "source ordinal .* got -1"),
        (lambda a, b: from_(a, "1"), DagValidationError, "source ordinal .* got '1'"),
        (lambda a, b: from_(a, True), DagValidationError, "source ordinal .* got True"),
        (lambda a, b: from_(a).to(b, -2), DagValidationError, "destination ordinal .* got -2"),
        (lambda a, b: from_(a).to(b, 1.0), DagValidationError, "destination ordinal .* got 1.0"),
        (lambda a, b: from_("a"), TypeError, "connects Vertex objects, got str"),
        (lambda a, b: from_(a).to("b"), TypeError, "connects Vertex objects, got str"),
        (lambda a, b: between(a, b).priority("high"), DagValidationError, "priority must be"),
        (lambda a, b: between(a, b).set_config(512), TypeError, "takes an EdgeConfig, got 512"),
    ],
    ids=[
        "to twice",
        "negative source ordinal",
        "str source ordinal",
        "bool source ordinal",
        "negative destination ordinal",
        "float destination ordinal",
        "source not a vertex",
        "destination not a vertex",
        "priority not an int",
        "config not an EdgeConfig",
    ],
)
def test_misuse_is_reported(a, b, misuse, error, message):
    with pytest.raises(error, match=message):
        misuse(a, b)


@pytest.mark.parametrize("queue_size", [0, -1, 1.5, "8"])
def test_edge_config_needs_a_positive_int_queue_size(queue_size):
    with pytest.raises(ValueError, match="queue_size must be an int >= 1"):
        EdgeConfig(queue_size=queue_size)


def test_edge_config_is_an_immutable_value():
    assert EdgeConfig(queue_size=8) == EdgeConfig(queue_size=8)
    with pytest.raises(AttributeError):
        EdgeConfig().queue_size = 8  # type: ignore[misc]


@pytest.mark.parametrize(
    ("edge", "words"),
    [
        (lambda a, b: between(a, b), "unicast, local"),
        (lambda a, b: between(a, b).isolated(), "isolated, local"),
        (lambda a, b: between(a, b).distributed().all_to_one(), "all_to_one, distributed"),
        (lambda a, b: between(a, b).broadcast().priority(2), "broadcast, local, priority 2"),
        (
            lambda a, b: between(a, b).partitioned(key_of).set_config(EdgeConfig(queue_size=2)),
            "partitioned, local, queue 2",
        ),
    ],
)
def test_describe_names_routing_locality_priority_and_queue(a, b, edge, words):
    assert edge(a, b).describe() == words
