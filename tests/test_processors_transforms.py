"""Stateless transforms, context factories, no-op and the non-cooperative wrapper.

These processors are stateless by nature; TestSupport still runs them with snapshots on, which
shows that they save nothing and lose nothing across a restore.
"""

from __future__ import annotations

from pyspark import cloudpickle
from test_processors_helpers import verify

from jetspark.core.suppliers import ProcessorMetaSupplier, ProcessorSupplier
from jetspark.core.traversers import traverse_items
from jetspark.core.watermark import Watermark
from jetspark.processors import (
    ContextFactory,
    filter_p,
    flat_map_p,
    flat_map_using_context_p,
    map_p,
    map_using_context_p,
    non_cooperative_p,
    noop_p,
)


def test_map_p_maps_and_drops_none_results():
    verify(map_p(lambda x: None if x == 3 else x * 10)).input([1, 2, 3, 4]).expect_output(
        [10, 20, 40]
    )


def test_map_p_passes_watermarks_through_in_order():
    verify(map_p(str.upper)).input(["a", Watermark(5), "b"]).expect_output(["A", Watermark(5), "B"])


def test_filter_p_keeps_matching_items():
    verify(filter_p(lambda x: x % 2 == 0)).input([1, 2, 3, 4, 6]).expect_output([2, 4, 6])


def test_flat_map_p_accepts_iterables_traversers_and_none():
    def explode(x):
        if x == 0:
            return None
        if x == 1:
            return traverse_items("one")
        return [x] * x

    verify(flat_map_p(explode)).input([0, 1, 2, 3]).expect_output(["one", 2, 2, 3, 3, 3])


def test_map_using_context_p_creates_per_processor_context_and_destroys_it():
    events = []

    def create(context):
        events.append(("create", context.global_processor_index))
        return {"prefix": "#"}

    factory = ContextFactory(create, lambda ctx: events.append(("destroy", ctx["prefix"])))
    verify(map_using_context_p(factory, lambda ctx, x: ctx["prefix"] + x)).input(
        ["a", "b"]
    ).expect_output(["#a", "#b"])
    creates = [e for e in events if e[0] == "create"]
    destroys = [e for e in events if e[0] == "destroy"]
    assert creates and len(creates) == len(destroys)


def test_flat_map_using_context_p_and_non_cooperative_factory():
    factory = ContextFactory(lambda context: 3).non_cooperative()
    assert factory.cooperative is False and ContextFactory(lambda c: 3).cooperative
    supplier = flat_map_using_context_p(factory, lambda n, x: [x] * n)
    assert supplier().is_cooperative() is False
    verify(supplier).input(["a", "b"]).expect_output(["a"] * 3 + ["b"] * 3)


def test_noop_p_swallows_everything():
    verify(noop_p()).input([1, 2, 3]).expect_output([])


def test_non_cooperative_p_wraps_every_supplier_form():
    processor_fn = map_p(lambda x: -x)
    wrapped = non_cooperative_p(processor_fn)
    verify(wrapped).input([1, 2]).expect_output([-1, -2])
    twice = non_cooperative_p(non_cooperative_p(processor_fn))
    verify(twice).input([5]).expect_output([-5])
    for form in (ProcessorSupplier.of(processor_fn), ProcessorMetaSupplier.of(processor_fn)):
        verify(non_cooperative_p(form)).input([3]).expect_output([-3])


def test_non_cooperative_p_processors_are_not_cooperative():
    meta = non_cooperative_p(map_p(abs))
    supplier = meta.get([0])(0)
    (processor,) = supplier.get(1)
    assert processor.is_cooperative() is False


def test_factories_survive_cloudpickle():
    factories_and_outputs = [
        (map_p(lambda x: x + 1), 2),
        (filter_p(bool), 1),
        (flat_map_p(lambda x: [x]), 1),
        (map_using_context_p(ContextFactory(lambda c: 1), lambda c, x: x + c), 2),
        (non_cooperative_p(map_p(abs)), 1),
    ]
    for factory, output in factories_and_outputs:
        clone = cloudpickle.loads(cloudpickle.dumps(factory))
        verify(clone).input([1]).expect_output([output])
