"""Tests of the three ways to supply processors (manual §8.1.1, §8.7), with the manual's example.

The engine's part (meta-supplier -> per-member supplier -> processors -> complete()) is played by
hand here, for 2 members x 3 processors, as an engine would.
"""

from __future__ import annotations

import pytest

from jetspark.core import (
    DAG,
    AbstractProcessor,
    Context,
    OutboxImpl,
    Processor,
    ProcessorMetaSupplier,
    ProcessorMetaSupplierContext,
    ProcessorSupplier,
    ProcessorSupplierContext,
)
from jetspark.core.suppliers import as_processor_supplier
from jetspark.core.traversers import traverse_iterable
from jetspark.edges import between

UPPER_BOUND = 100

# --- the manual's §8.7.2 example, written in Python as the manual writes it ----------------------


class GenerateNumbersP(AbstractProcessor):
    def __init__(self, upper_bound: int, processor_count: int = 1, processor_index: int = 0):
        self.traverser = traverse_iterable(range(upper_bound)).filter(
            lambda n: n % processor_count == processor_index
        )

    def complete(self) -> bool:
        return self.emit_from_traverser(self.traverser)


class GenerateNumbersPSupplier(ProcessorSupplier):
    def __init__(self, upper_bound: int) -> None:
        self.upper_bound = upper_bound

    def get(self, processor_count: int) -> list[Processor]:
        return [
            GenerateNumbersP(self.upper_bound, processor_count, index)
            for index in range(processor_count)
        ]


class GenerateNumbersPMetaSupplier(ProcessorMetaSupplier):
    def __init__(self, upper_bound: int) -> None:
        self.upper_bound = upper_bound

    def init(self, context: ProcessorMetaSupplierContext) -> None:
        self.total_parallelism = context.total_parallelism
        self.local_parallelism = context.local_parallelism

    def get(self, addresses):
        suppliers = {}
        upper_bound = self.upper_bound
        for i, address in enumerate(addresses):
            # We'll calculate the global index of each processor in the cluster:
            global_index_base = self.local_parallelism * i
            # Capture the values for the lambda below (Python closures bind late, so they are
            # bound as default arguments, the way Java captures effectively-final locals):
            divisor = self.total_parallelism
            # processor_count will be equal to local_parallelism:
            suppliers[address] = lambda processor_count, base=global_index_base, d=divisor: [
                GenerateNumbersP(upper_bound, d, global_index)
                for global_index in range(base, base + processor_count)
            ]
        return suppliers.get


# --- the engine's part, by hand -------------------------------------------------------------------


def run_source_vertex(meta: ProcessorMetaSupplier, members: int, local_parallelism: int) -> list:
    """Creates and completes every processor of a source vertex like an engine; returns the items
    emitted by all processors of all members."""
    name = "generate-numbers"
    shape = {"vertex_name": name, "local_parallelism": local_parallelism, "member_count": members}
    total = members * local_parallelism
    meta.init(ProcessorMetaSupplierContext(total_parallelism=total, **shape))
    supplier_of = meta.get(list(range(members)))
    emitted: list = []
    for member in range(members):
        supplier = as_processor_supplier(supplier_of(member), f"vertex '{name}'")
        supplier.init(
            ProcessorSupplierContext(total_parallelism=total, member_index=member, **shape)
        )
        processors = supplier.get(local_parallelism)
        assert len(processors) == local_parallelism
        for local_index, processor in enumerate(processors):
            outbox = OutboxImpl([7])  # small, so complete() is called again and again
            processor.init(
                outbox,
                Context(
                    total_parallelism=total,
                    member_index=member,
                    local_processor_index=local_index,
                    global_processor_index=member * local_parallelism + local_index,
                    **shape,
                ),
            )
            for _ in range(UPPER_BOUND + 1):
                done = processor.complete()
                emitted.extend(outbox.buckets[0])
                outbox.buckets[0].clear()
                if done:
                    break
            else:
                raise AssertionError(f"processor {local_index} of member {member} never completed")
        supplier.close(None)
    meta.close(None)
    return emitted


def test_the_meta_supplier_example_generates_every_number_exactly_once():
    emitted = run_source_vertex(GenerateNumbersPMetaSupplier(UPPER_BOUND), 2, 3)
    assert sorted(emitted) == list(range(UPPER_BOUND))


def test_the_meta_supplier_example_builds_a_dag_vertex():
    dag = DAG()
    meta = GenerateNumbersPMetaSupplier(UPPER_BOUND)
    generate = dag.new_vertex("generate-numbers", meta)
    log_input = dag.new_vertex("log-input", Processor)
    dag.edge(between(generate, log_input)).validate()
    assert generate.meta_supplier is meta
    assert sorted(run_source_vertex(generate.meta_supplier, 2, 3)) == list(range(UPPER_BOUND))


@pytest.mark.parametrize(
    ("supplier", "members", "copies"),
    [
        (lambda: GenerateNumbersP(UPPER_BOUND), 1, 3),
        (GenerateNumbersPSupplier(UPPER_BOUND), 1, 1),
        (GenerateNumbersPSupplier(UPPER_BOUND), 2, 2),
    ],
    ids=["processor fn: each processor repeats", "supplier, one member", "supplier, two members"],
)
def test_the_simpler_forms_behave_as_the_manual_says(supplier, members, copies):
    """The manual's steps before the meta-supplier: duplicates, then once per member."""
    vertex = DAG().new_vertex("generate-numbers", supplier)
    emitted = run_source_vertex(vertex.meta_supplier, members, 3)
    assert sorted(emitted) == sorted(list(range(UPPER_BOUND)) * copies)


# --- the factories -------------------------------------------------------------------------------


class CountingP(Processor):
    created = 0

    def __init__(self) -> None:
        CountingP.created += 1
        self.number = CountingP.created


def test_processor_supplier_of_calls_the_function_once_per_processor():
    processors = ProcessorSupplier.of(CountingP).get(3)
    assert [type(p) for p in processors] == [CountingP] * 3
    assert len({p.number for p in processors}) == 3


@pytest.mark.parametrize(
    "given",
    [lambda: ProcessorSupplier.of(CountingP), lambda: CountingP],
    ids=["ProcessorSupplier", "processor fn"],
)
def test_processor_meta_supplier_of_gives_every_member_the_same_supplier(given):
    meta = ProcessorMetaSupplier.of(given(), preferred_local_parallelism=2)
    assert meta.preferred_local_parallelism() == 2
    supplier_of = meta.get([0, 1])
    assert isinstance(supplier_of(0), ProcessorSupplier)
    assert supplier_of(0) is supplier_of(1)
    assert [type(p) for p in supplier_of(1).get(2)] == [CountingP] * 2


def test_preferred_local_parallelism_defaults_to_the_engine_default():
    assert ProcessorMetaSupplier.of(CountingP).preferred_local_parallelism() == -1
    assert ProcessorMetaSupplier().preferred_local_parallelism() == -1


def test_as_processor_supplier_passes_suppliers_and_wraps_count_functions():
    supplier = ProcessorSupplier.of(CountingP)
    assert as_processor_supplier(supplier, "here") is supplier
    wrapped = as_processor_supplier(lambda count: [CountingP() for _ in range(count)], "here")
    assert isinstance(wrapped, ProcessorSupplier)
    assert len(wrapped.get(4)) == 4


def test_as_processor_supplier_refuses_other_things_naming_where():
    with pytest.raises(TypeError, match=r"vertex 'v', member 1: .* returned int"):
        as_processor_supplier(3, "vertex 'v', member 1")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ProcessorSupplier().get(1), "ProcessorSupplier must override get"),
        (lambda: ProcessorMetaSupplier().get([0]), "ProcessorMetaSupplier must override get"),
    ],
)
def test_get_must_be_overridden(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_init_and_close_are_optional():
    supplier = GenerateNumbersPSupplier(1)
    shape = {"vertex_name": "v", "total_parallelism": 1, "local_parallelism": 1}
    assert supplier.init(ProcessorSupplierContext(**shape)) is None
    assert supplier.close(None) is None
    meta = ProcessorMetaSupplier.of(supplier)
    assert meta.init(ProcessorMetaSupplierContext(**shape)) is None
    assert meta.close(RuntimeError("failed")) is None
