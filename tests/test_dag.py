"""Tests of DAG and Vertex (manual §8.1): building, every validation rule, order, to_dot, pickle."""

from __future__ import annotations

import pickle
import re

import pytest

from jetspark.core import (
    DAG,
    DagValidationError,
    Processor,
    ProcessorMetaSupplier,
    ProcessorSupplier,
    Vertex,
)
from jetspark.edges import Edge, EdgeConfig, RoutingPolicy, between, from_
from jetspark.partitioning import DEFAULT, HASH_CODE


class NoopP(Processor):
    """A module-level Processor class: a valid zero-argument supplier, picklable by reference."""


class NeedsArgumentP(Processor):
    def __init__(self, upper_bound: int) -> None:
        self.upper_bound = upper_bound


class NoopSupplier(ProcessorSupplier):
    def get(self, count: int) -> list[Processor]:
        return [NoopP() for _ in range(count)]


class NoopMetaSupplier(ProcessorMetaSupplier):
    def get(self, member_indexes):
        return lambda member_index: NoopSupplier()


def key_of(item):
    return item


def needs_two(a, b):
    return NoopP()


def defaults_only(a=1, *rest, b=2):
    return NoopP()


def dag_of(*names: str) -> tuple[DAG, list[Vertex]]:
    dag = DAG()
    return dag, [dag.new_vertex(name, NoopP) for name in names]


def wired_dag(names, edges: list[tuple[str, str]]) -> DAG:
    """A DAG of `names` (in that order) with `edges`, each on the next free ordinal at both ends."""
    dag, _ = dag_of(*names)
    next_out: dict[str, int] = {}
    next_in: dict[str, int] = {}
    for source, dest in edges:
        out_ordinal = next_out[source] = next_out.get(source, -1) + 1
        in_ordinal = next_in[dest] = next_in.get(dest, -1) + 1
        dag.edge(from_(dag.get_vertex(source), out_ordinal).to(dag.get_vertex(dest), in_ordinal))
    return dag


def edge_message(edge_text: str) -> str:
    """A regex matching the repr of an edge, e.g. 'a:0 -> b:0', as error messages show it."""
    return re.escape(f"Edge({edge_text})")


# --- validation rules: each raises DagValidationError naming the vertex or edge -----------------


def test_dag_validation_error_is_a_value_error():
    assert issubclass(DagValidationError, ValueError)


@pytest.mark.parametrize(
    "add_again",
    [
        lambda dag: dag.new_vertex("a", NoopP),
        lambda dag: dag.vertex(Vertex("a", NoopP)),
    ],
    ids=["new_vertex", "vertex"],
)
def test_duplicate_vertex_name_is_refused(add_again):
    dag, (a,) = dag_of("a")
    with pytest.raises(DagValidationError, match="vertex 'a' already exists"):
        add_again(dag)
    assert dag.get_vertex("a") is a


@pytest.mark.parametrize("foreign_end", ["source", "destination"])
@pytest.mark.parametrize("same_name", [False, True], ids=["unknown name", "same name other DAG"])
def test_edge_endpoint_must_be_a_vertex_of_this_dag(foreign_end, same_name):
    dag, (a, b) = dag_of("a", "b")
    if same_name:  # a vertex of another DAG that happens to share the name
        foreign_name = "b" if foreign_end == "destination" else "a"
        foreign = DAG().new_vertex(foreign_name, NoopP)
    else:
        foreign_name = "stranger"
        foreign = Vertex(foreign_name, NoopP)
    edge = between(a, foreign) if foreign_end == "destination" else between(foreign, b)
    with pytest.raises(DagValidationError, match=f"{foreign_end} vertex '{foreign_name}' is not"):
        dag.edge(edge)
    assert dag.edges() == []


def test_the_same_edge_cannot_be_added_twice():
    dag, (a, b) = dag_of("a", "b")
    edge = between(a, b)
    dag.edge(edge)
    with pytest.raises(DagValidationError, match=edge_message("a:0 -> b:0")):
        dag.edge(edge)


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (lambda a, b, c: between(a, c), "outbound ordinal 0 of vertex 'a' is already taken"),
        (lambda a, b, c: between(c, b), "inbound ordinal 0 of vertex 'b' is already taken"),
        (lambda a, b, c: from_(a, 0).to(c, 1), "outbound ordinal 0 of vertex 'a'"),
    ],
    ids=["outbound", "inbound", "outbound, other inbound ordinal"],
)
def test_two_edges_on_one_ordinal_are_refused(second, message):
    dag, (a, b, c) = dag_of("a", "b", "c")
    dag.edge(between(a, b))
    with pytest.raises(DagValidationError, match=message):
        dag.edge(second(a, b, c))
    assert len(dag.edges()) == 1


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        (
            lambda a, b, c: [from_(a, 1).to(b)],
            r"vertex 'a': outbound ordinals .*got \[1\] \(missing \[0\]\)",
        ),
        (
            lambda a, b, c: [from_(a).to(b, 1)],
            r"vertex 'b': inbound ordinals .*got \[1\] \(missing \[0\]\)",
        ),
        (
            lambda a, b, c: [between(a, b), from_(a, 2).to(c)],
            r"vertex 'a': outbound ordinals .*got \[0, 2\] \(missing \[1\]\)",
        ),
        (
            lambda a, b, c: [between(a, c), from_(b).to(c, 2)],
            r"vertex 'c': inbound ordinals .*got \[0, 2\] \(missing \[1\]\)",
        ),
    ],
    ids=["outbound starts at 1", "inbound starts at 1", "outbound gap", "inbound gap"],
)
def test_gaps_in_ordinals_are_refused(edges, message):
    dag, vertices = dag_of("a", "b", "c")
    for edge in edges(*vertices):
        dag.edge(edge)
    with pytest.raises(DagValidationError, match=message):
        dag.validate()


@pytest.mark.parametrize(
    ("edges", "cycle"),
    [
        ([("a", "a")], "a -> a"),
        ([("a", "b"), ("b", "a")], "a -> b -> a"),
        ([("src", "a"), ("a", "b"), ("b", "c"), ("c", "a")], "a -> b -> c -> a"),
    ],
    ids=["self-loop", "two vertices", "behind a source"],
)
@pytest.mark.parametrize("check", [DAG.validate, DAG.vertices, list], ids=lambda f: f.__name__)
def test_a_cycle_is_refused_and_listed(edges, cycle, check):
    dag = wired_dag(dict.fromkeys(name for edge in edges for name in edge), edges)
    with pytest.raises(DagValidationError, match=f"cycle: {re.escape(cycle)}$"):
        check(dag)


@pytest.mark.parametrize("distributed_first", [True, False])
def test_isolated_routing_on_a_distributed_edge_is_refused(distributed_first):
    dag, (a, b) = dag_of("a", "b")
    edge = between(a, b)
    edge = edge.distributed().isolated() if distributed_first else edge.isolated().distributed()
    dag.edge(edge)
    with pytest.raises(DagValidationError, match=edge_message("a:0 -> b:0") + ".*isolated"):
        dag.validate()


def test_isolated_routing_on_a_local_edge_is_valid():
    dag, (a, b) = dag_of("a", "b")
    dag.edge(between(a, b).isolated()).validate()


@pytest.mark.parametrize("key_fn", [None, "word", 3], ids=["None", "str", "int"])
def test_partitioned_needs_a_key_function(key_fn):
    _, (a, b) = dag_of("a", "b")
    with pytest.raises(DagValidationError, match=edge_message("a:0 -> b:0") + ".*key function"):
        between(a, b).partitioned(key_fn)


def test_partitioned_edge_that_lost_its_key_function_fails_validation():
    dag, (a, b) = dag_of("a", "b")
    edge = between(a, b).partitioned(key_of)
    edge.key_fn = None  # e.g. cleared by hand after the fact
    dag.edge(edge)
    with pytest.raises(DagValidationError, match=edge_message("a:0 -> b:0") + ".*key function"):
        dag.validate()


BAD_PARALLELISM = [0, -2, -100, 1.5, "2", None, True]
SET_PARALLELISM = {
    "Vertex()": lambda dag, n: Vertex("v", NoopP, n),
    "new_vertex()": lambda dag, n: dag.new_vertex("v", NoopP, local_parallelism=n),
    ".local_parallelism()": lambda dag, n: dag.new_vertex("v", NoopP).local_parallelism(n),
}


@pytest.mark.parametrize(
    ("how", "value"),
    [
        pytest.param(how, value, id=f"{how}-{value!r}")
        for how in SET_PARALLELISM
        for value in BAD_PARALLELISM
        if not (how == "new_vertex()" and value is None)  # None there means the engine default
    ],
)
def test_bad_local_parallelism_is_refused(how, value):
    with pytest.raises(DagValidationError, match=r"vertex 'v': local parallelism .* got"):
        SET_PARALLELISM[how](DAG(), value)


@pytest.mark.parametrize("how", list(SET_PARALLELISM))
@pytest.mark.parametrize("value", [-1, 1, 7])
def test_good_local_parallelism_is_kept(how, value):
    vertex = SET_PARALLELISM[how](DAG(), value)
    assert vertex.get_local_parallelism() == value


@pytest.mark.parametrize(
    ("supplier", "message"),
    [
        (42, "supplier must be a zero-argument callable.*got int"),
        ("NoopP", "supplier must be a zero-argument callable.*got str"),
        (NoopP(), "got a Processor instance \\(NoopP\\); .*pass the class or a lambda"),
        (NeedsArgumentP, "NeedsArgumentP requires arguments"),
        (needs_two, "needs_two requires arguments"),
        (lambda count: NoopP(), "<lambda> requires arguments"),
        (NoopSupplier, "pass an instance of NoopSupplier, not the class"),
        (NoopMetaSupplier, "pass an instance of NoopMetaSupplier, not the class"),
    ],
    ids=[
        "int",
        "str",
        "processor instance",
        "class needing arguments",
        "function needing arguments",
        "lambda needing arguments",
        "ProcessorSupplier class",
        "ProcessorMetaSupplier class",
    ],
)
@pytest.mark.parametrize("how", ["Vertex()", "new_vertex()"])
def test_bad_supplier_is_refused(supplier, message, how):
    dag = DAG()
    with pytest.raises(DagValidationError, match=f"vertex 'v': .*{message}"):
        Vertex("v", supplier) if how == "Vertex()" else dag.new_vertex("v", supplier)
    assert dag.get_vertex("v") is None


@pytest.mark.parametrize(
    "supplier",
    [
        NoopP,
        lambda: NoopP(),
        defaults_only,
        NoopSupplier(),
        NoopMetaSupplier(),
        ProcessorSupplier.of(NoopP),
        ProcessorMetaSupplier.of(NoopP),
    ],
    ids=[
        "Processor class",
        "lambda",
        "defaults only",
        "ProcessorSupplier",
        "ProcessorMetaSupplier",
        "ProcessorSupplier.of",
        "ProcessorMetaSupplier.of",
    ],
)
def test_every_supplier_form_is_accepted(supplier):
    dag, (src,) = dag_of("src")
    vertex = dag.new_vertex("v", supplier)
    dag.edge(between(src, vertex)).validate()
    assert vertex.supplier is supplier
    assert isinstance(vertex.meta_supplier, ProcessorMetaSupplier)


def test_hash_code_partitioner_on_a_distributed_edge_is_refused():
    dag, (a, b) = dag_of("a", "b")
    dag.edge(between(a, b).partitioned(key_of, HASH_CODE).distributed())
    with pytest.raises(
        DagValidationError,
        match=edge_message("a:0 -> b:0") + ".*not deterministic.*allow_nondeterministic=True",
    ):
        dag.validate()


@pytest.mark.parametrize(
    "edge",
    [
        lambda a, b: between(a, b).partitioned(key_of, HASH_CODE),
        lambda a, b: (
            between(a, b).partitioned(key_of, HASH_CODE, allow_nondeterministic=True).distributed()
        ),
        lambda a, b: between(a, b).partitioned(key_of).distributed(),
        lambda a, b: between(a, b).partitioned(key_of, DEFAULT).distributed(),
    ],
    ids=["hash code, local", "hash code, distributed, allowed", "default", "explicit default"],
)
def test_deterministic_or_allowed_partitioners_are_valid(edge):
    dag, (a, b) = dag_of("a", "b")
    dag.edge(edge(a, b)).validate()


def test_an_edge_without_destination_is_refused():
    dag, (a,) = dag_of("a")
    with pytest.raises(DagValidationError, match=edge_message("a:1 -> ?:0") + ".*with .to()"):
        dag.edge(from_(a, 1))
    assert dag.edges() == []


def test_dag_edge_takes_only_edges():
    dag, (a, b) = dag_of("a", "b")
    with pytest.raises(TypeError, match="takes an Edge, got tuple"):
        dag.edge((a, b))


def test_an_empty_dag_is_invalid():
    with pytest.raises(DagValidationError, match="no vertices"):
        DAG().validate()


def test_a_well_formed_dag_validates():
    dag, (source, to_upper, to_lower, sink) = dag_of("source", "toUpper", "toLower", "sink")
    dag.edge(between(source, to_upper)).edge(from_(source, 1).to(to_lower))
    dag.edge(between(to_upper, sink).partitioned(key_of).distributed())
    dag.edge(from_(to_lower).to(sink, 1).broadcast().priority(-1))
    dag.validate()


# --- the DAG-building API ---------------------------------------------------------------------


def test_new_vertex_and_local_parallelism_chain():
    dag = DAG()
    vertex = dag.new_vertex("v", NoopP)
    assert isinstance(vertex, Vertex)
    assert (vertex.name, vertex.get_local_parallelism()) == ("v", -1)
    assert vertex.local_parallelism(3) is vertex
    assert vertex.get_local_parallelism() == 3
    assert dag.new_vertex("w", NoopP, 2).get_local_parallelism() == 2
    assert dag.new_vertex("x", NoopP, local_parallelism=None).get_local_parallelism() == -1


def test_vertex_adds_an_existing_vertex():
    dag = DAG()
    vertex = Vertex("v", NoopP, 4)
    assert dag.vertex(vertex) is vertex
    assert dag.get_vertex("v") is vertex


@pytest.mark.parametrize("name", ["", None, 3])
def test_a_vertex_name_must_be_a_non_empty_str(name):
    with pytest.raises(DagValidationError, match="vertex name must be a non-empty str"):
        DAG().new_vertex(name, NoopP)


def test_edge_returns_the_dag_so_calls_chain():
    dag, (a, b, c) = dag_of("a", "b", "c")
    ab, bc = between(a, b), between(b, c)
    assert dag.edge(ab).edge(bc) is dag
    assert dag.edges() == [ab, bc]


def test_get_vertex_returns_the_vertex_or_none():
    dag, (a, _) = dag_of("a", "b")
    assert dag.get_vertex("a") is a
    assert dag.get_vertex("missing") is None


@pytest.mark.parametrize(
    ("names", "edges", "expected"),
    [
        ("cba", [], "cba"),
        (["sink", "map", "source"], [("source", "map"), ("map", "sink")], "source map sink"),
        ("abcd", [("a", "d"), ("b", "c")], "abcd"),
        ("dcba", [("a", "d"), ("b", "c")], "bcad"),
        (
            ["src", "left", "right", "join"],
            [("src", "right"), ("src", "left"), ("right", "join"), ("left", "join")],
            "src left right join",
        ),
    ],
    ids=["no edges", "reversed chain", "ties by insertion", "ties reversed", "diamond"],
)
def test_vertices_are_topological_with_ties_in_insertion_order(names, edges, expected):
    dag = wired_dag(names, edges)
    expected_names = expected.split() if " " in expected else list(expected)
    assert [v.name for v in dag.vertices()] == expected_names
    assert [v.name for v in dag] == expected_names


def test_inbound_and_outbound_edges_are_sorted_by_ordinal():
    dag, (a, b, c, d) = dag_of("a", "b", "c", "d")
    a_to_d1 = from_(a, 1).to(d, 1)
    c_to_d2 = from_(c).to(d, 2)
    a_to_b = between(a, b)
    b_to_d0 = between(b, d)
    for edge in (c_to_d2, a_to_d1, b_to_d0, a_to_b):
        dag.edge(edge)
    assert dag.inbound_edges("d") == [b_to_d0, a_to_d1, c_to_d2]
    assert dag.outbound_edges("a") == [a_to_b, a_to_d1]
    assert dag.inbound_edges("a") == []
    assert dag.outbound_edges("d") == []


@pytest.mark.parametrize("method", [DAG.inbound_edges, DAG.outbound_edges])
def test_edges_of_an_unknown_vertex_are_an_error(method):
    dag, _ = dag_of("a")
    with pytest.raises(DagValidationError, match="no vertex named 'ghost'"):
        method(dag, "ghost")


def dot_line(dot: str, start: str) -> str:
    (line,) = [line for line in dot.splitlines() if line.strip().startswith(start)]
    return line


def test_to_dot_shows_parallelism_routing_distribution_ordinals_and_priority():
    dag = DAG("word count")
    source = dag.new_vertex("source", NoopP, 1)
    tokenize = dag.new_vertex("tokenize", NoopP)
    stopwords = dag.new_vertex("stopwords", NoopP, 1)
    count = dag.new_vertex("count", NoopP, 4)
    dag.edge(between(source, tokenize).set_config(EdgeConfig(queue_size=512)))
    dag.edge(from_(stopwords).to(tokenize, 1).broadcast().priority(-1))
    dag.edge(between(tokenize, count).partitioned(key_of).distributed())
    dot = dag.to_dot()

    assert dot.startswith('digraph "word count" {') and dot.endswith("}")
    assert dot_line(dot, '"source" [') == '  "source" [label="source\\nlocal parallelism 1"];'
    assert "local parallelism default" in dot_line(dot, '"tokenize" [')
    assert "local parallelism 4" in dot_line(dot, '"count" [')

    local_edge = dot_line(dot, '"source" -> "tokenize"')
    assert 'label="unicast, local, queue 512"' in local_edge
    assert 'taillabel="0"' in local_edge and 'headlabel="0"' in local_edge
    assert "style=bold" not in local_edge

    priority_edge = dot_line(dot, '"stopwords" -> "tokenize"')
    assert 'label="broadcast, local, priority -1"' in priority_edge
    assert 'taillabel="0"' in priority_edge and 'headlabel="1"' in priority_edge

    distributed_edge = dot_line(dot, '"tokenize" -> "count"')
    assert 'label="partitioned, distributed"' in distributed_edge
    assert "style=bold" in distributed_edge


def test_to_dot_quotes_names_with_quotes_and_backslashes():
    dag = DAG()
    tricky = dag.new_vertex('say "hi"\\now', NoopP)
    plain = dag.new_vertex("plain", NoopP)
    dag.edge(between(tricky, plain))
    dot = dag.to_dot()
    assert dot.startswith('digraph "DAG" {')
    assert '  "say \\"hi\\"\\\\now" [label="say \\"hi\\"\\\\now\\nlocal parallelism' in dot
    assert '  "say \\"hi\\"\\\\now" -> "plain" [' in dot


# --- pickling -----------------------------------------------------------------------------------


def sample_dag() -> DAG:
    """A DAG whose suppliers and key function are module-level, so the standard pickle works."""
    dag = DAG("sample")
    source = dag.new_vertex("source", NoopP, 1)
    mapper = dag.new_vertex("map", NoopSupplier(), 2)
    sink = dag.new_vertex("sink", ProcessorMetaSupplier.of(NoopP, preferred_local_parallelism=1))
    dag.edge(between(source, mapper).partitioned(key_of, HASH_CODE).priority(3))
    dag.edge(between(mapper, sink).partitioned(key_of).distributed())
    dag.edge(from_(source, 1).to(sink, 1).broadcast().set_config(EdgeConfig(queue_size=64)))
    return dag


def edge_summary(edge: Edge) -> tuple:
    return (
        edge.source_name,
        edge.source_ordinal,
        edge.dest_name,
        edge.dest_ordinal,
        edge.routing_policy,
        edge.is_distributed,
        edge.key_fn,
        edge.partitioner,
        edge.get_priority(),
        edge.config,
    )


def test_the_dag_pickles_with_the_standard_pickle():
    dag = sample_dag()
    copy = pickle.loads(pickle.dumps(dag))
    copy.validate()
    assert copy.name == "sample"
    assert [(v.name, v.get_local_parallelism()) for v in copy.vertices()] == [
        (v.name, v.get_local_parallelism()) for v in dag.vertices()
    ]
    assert [edge_summary(e) for e in copy.edges()] == [edge_summary(e) for e in dag.edges()]
    for edge in copy.edges():  # endpoints are the copy's own vertices, not stray copies
        assert edge.source is copy.get_vertex(edge.source_name)
        assert edge.destination is copy.get_vertex(edge.dest_name)
    assert copy.to_dot() == dag.to_dot()
    map_supplier = copy.get_vertex("map").meta_supplier.get([0])(0)
    assert [type(p) for p in map_supplier.get(2)] == [NoopP, NoopP]
    assert copy.get_vertex("sink").meta_supplier.preferred_local_parallelism() == 1


def test_vertices_and_edges_pickle_on_their_own():
    dag = sample_dag()
    vertex = pickle.loads(pickle.dumps(dag.get_vertex("map")))
    assert (vertex.name, vertex.get_local_parallelism()) == ("map", 2)
    assert isinstance(vertex.supplier, NoopSupplier)
    edge = pickle.loads(pickle.dumps(dag.edges()[1]))
    assert edge_summary(edge) == edge_summary(dag.edges()[1])
    assert edge.routing_policy is RoutingPolicy.PARTITIONED


def test_lambdas_need_cloudpickle_as_spark_uses():
    """A lambda supplier or key function cannot go through the standard pickle: jetspark ships
    DAGs with cloudpickle (the one Spark itself uses), which pickles them by value."""
    cloudpickle = pytest.importorskip("pyspark.cloudpickle")
    dag = DAG()
    source = dag.new_vertex("source", lambda: NoopP())
    sink = dag.new_vertex("sink", NoopP)
    dag.edge(between(source, sink).partitioned(lambda item: item[0]))
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(dag)
    copy = cloudpickle.loads(cloudpickle.dumps(dag))
    copy.validate()
    assert copy.edges()[0].key_fn("ab") == "a"
    (processor,) = copy.get_vertex("source").meta_supplier.get([0])(0).get(1)
    assert isinstance(processor, NoopP)
