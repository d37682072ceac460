"""Port of Jet 4 `com.hazelcast.jet.impl.processor.TransformStatefulPTest` (4.0-4.5.4, the same
cases): `mapStatefulP` and `flatMapStatefulP`, each test run for both (Jet's `flatMap`
parameter), the flat-mapping form emitting every result followed by its negated copy.

Deliberate differences: Jet's `long[1]` state is a one-element list (the state and summing
functions are tests/test_processors_stateful.py's), `entry(k, v)` a tuple,
`jetEvent(t, x)` a `JetEvent(t, x)` and `Long.MAX_VALUE` `MAX_TIMESTAMP`. jetspark's factories
take the key function by keyword and the timestamp function only with a ttl (Jet passes
`e -> 0L` to `mapStateful_noTtl` and `mapStateful_toNull_inMapFn`, where it is unused).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_processors_stateful import counter, event_key, event_total, running_total

from jetspark.core.suppliers import ProcessorFn
from jetspark.core.test_support import TestSupport
from jetspark.core.watermark import Watermark
from jetspark.processors import entry_key, flat_map_stateful_p, map_stateful_p
from jetspark.processors.events import JetEvent, event_timestamp
from jetspark.processors.watermark_policies import MAX_TIMESTAMP


def expand_entry(en: tuple[Any, int]) -> list[Any]:
    """Jet's `expandEntryFn`: the entry and its negated copy."""
    return [en, (en[0], -en[1])]


def expand_jet_event(je: JetEvent) -> list[Any]:
    """Jet's `expandJetEventFn`: the event and its negated copy, at the same timestamp."""
    return [je, JetEvent(je.timestamp, (je.item[0], -je.item[1]))]


def as_expanded_list(flat_map: bool, expand_fn: Callable[[Any], list[Any]], *items: Any) -> Any:
    """Jet's `asExpandedList`: the items, each expanded by `expand_fn` in the flat-map form."""
    if not flat_map:
        return list(items)
    return [
        r for item in items for r in ([item] if isinstance(item, Watermark) else expand_fn(item))
    ]


def create_supplier(
    flat_map: bool,
    ttl: int,
    key_fn: Callable[[Any], Any],
    timestamp_fn: Callable[[Any], int] | None,
    create_fn: Callable[[], Any],
    stateful_map_fn: Callable[[Any, Any, Any], Any],
    on_evict_fn: Callable[[Any, Any, int], Any] | None,
    expand_fn: Callable[[Any], list[Any]],
) -> ProcessorFn:
    """Jet's `createSupplier`: `mapStatefulP`, or `flatMapStatefulP` expanding each result."""
    if not flat_map:
        return map_stateful_p(
            create_fn,
            stateful_map_fn,
            key_fn=key_fn,
            ttl=ttl,
            timestamp_fn=timestamp_fn,
            on_evict_fn=on_evict_fn,
        )

    def expanded(fn: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
        def flat_mapped(state: Any, key: Any, item: Any) -> list[Any]:
            result = fn(state, key, item)
            return [] if result is None else expand_fn(result)

        return flat_mapped

    return flat_map_stateful_p(
        create_fn,
        expanded(stateful_map_fn),
        key_fn=key_fn,
        ttl=ttl,
        timestamp_fn=timestamp_fn,
        on_evict_fn=None if on_evict_fn is None else expanded(on_evict_fn),
    )


def ttl_supplier(flat_map: bool, on_evict_fn: Callable[[Any, Any, int], Any] | None = None) -> Any:
    """The supplier most tests share: ttl 2, keyed by the event's entry key, summing."""
    return create_supplier(
        flat_map,
        2,
        event_key,
        event_timestamp,
        counter,
        event_total,
        on_evict_fn,
        expand_jet_event,
    )


FLAT_MAP = pytest.mark.parametrize("flat_map", [True, False], ids=["flatMap", "map"])


@FLAT_MAP
def test_map_stateful_no_ttl(flat_map: bool) -> None:
    """`mapStateful_noTtl`."""
    supplier = create_supplier(
        flat_map, 0, entry_key, None, counter, running_total, None, expand_entry
    )
    TestSupport.verify_processor(supplier).input(
        [("a", 1), ("b", 2), ("a", 3), ("b", 4)]
    ).expect_output(
        as_expanded_list(flat_map, expand_entry, ("a", 1), ("b", 2), ("a", 4), ("b", 6))
    )


@FLAT_MAP
def test_map_stateful_to_null_in_map_fn(flat_map: bool) -> None:
    """`mapStateful_toNull_inMapFn`."""
    supplier = create_supplier(
        flat_map, 0, entry_key, None, counter, lambda s, k, e: None, None, expand_entry
    )
    TestSupport.verify_processor(supplier).input([("a", 1)]).expect_output([])


TTL_INPUT = [
    JetEvent(0, ("a", 1)),
    JetEvent(1, ("b", 2)),
    Watermark(3),  # evict a
    JetEvent(3, ("a", 3)),
    Watermark(4),  # evict b
    JetEvent(4, ("b", 4)),
]
"""The input of `mapStateful_withTtl` and `mapStateful_withTtlAndEvict`."""


@FLAT_MAP
def test_map_stateful_with_ttl(flat_map: bool) -> None:
    """`mapStateful_withTtl`: the output is the input, each key evicted before it comes again."""
    TestSupport.verify_processor(ttl_supplier(flat_map)).input(TTL_INPUT).expect_output(
        as_expanded_list(flat_map, expand_jet_event, *TTL_INPUT)
    )


@FLAT_MAP
def test_map_stateful_with_ttl_survive_wm(flat_map: bool) -> None:
    """`mapStateful_withTtl_surviveWm`."""
    TestSupport.verify_processor(ttl_supplier(flat_map)).input(
        [JetEvent(1, ("b", 1)), Watermark(2), JetEvent(2, ("b", 2))]
    ).expect_output(
        as_expanded_list(
            flat_map,
            expand_jet_event,
            JetEvent(1, ("b", 1)),
            Watermark(2),
            JetEvent(2, ("b", 3)),
        )
    )


@FLAT_MAP
def test_map_stateful_with_ttl_evict_only_expired(flat_map: bool) -> None:
    """`mapStateful_withTtl_evictOnlyExpired`."""
    TestSupport.verify_processor(ttl_supplier(flat_map)).input(
        [
            JetEvent(0, ("a", 1)),
            JetEvent(1, ("b", 2)),
            Watermark(3),
            JetEvent(3, ("a", 3)),
            JetEvent(3, ("b", 4)),
        ]
    ).expect_output(
        as_expanded_list(
            flat_map,
            expand_jet_event,
            JetEvent(0, ("a", 1)),
            JetEvent(1, ("b", 2)),
            Watermark(3),
            JetEvent(3, ("a", 3)),
            JetEvent(3, ("b", 6)),
        )
    )


@FLAT_MAP
def test_map_stateful_with_ttl_and_evict(flat_map: bool) -> None:
    """`mapStateful_withTtlAndEvict`: evictions before their watermark, the rest on completion
    with the watermark `Long.MAX_VALUE`."""
    evict_signal = 99

    def on_evict(state: list[int], key: Any, wm: int) -> JetEvent:
        return JetEvent(wm, (key, evict_signal))

    TestSupport.verify_processor(ttl_supplier(flat_map, on_evict)).input(TTL_INPUT).expect_output(
        as_expanded_list(
            flat_map,
            expand_jet_event,
            JetEvent(0, ("a", 1)),
            JetEvent(1, ("b", 2)),
            JetEvent(3, ("a", evict_signal)),
            Watermark(3),
            JetEvent(3, ("a", 3)),
            JetEvent(4, ("b", evict_signal)),
            Watermark(4),
            JetEvent(4, ("b", 4)),
            JetEvent(MAX_TIMESTAMP, ("a", 99)),
            JetEvent(MAX_TIMESTAMP, ("b", 99)),
        )
    )


@FLAT_MAP
def test_map_stateful_with_ttl_many_keys(flat_map: bool) -> None:
    """`mapStateful_withTtl_manyKeys`: keys 0..99, a watermark evicting them all, then keys
    99..0, each starting afresh (eviction goes in the order the keys were used)."""
    num_keys = 100
    items: list[Any] = [JetEvent(0, (f"k{i}", 1)) for i in range(num_keys)]
    items.append(Watermark(3))
    items += [JetEvent(3, (f"k{i}", 3)) for i in reversed(range(num_keys))]
    TestSupport.verify_processor(ttl_supplier(flat_map)).input(
        items
    ).disable_logging().expect_output(as_expanded_list(flat_map, expand_jet_event, *items))


def test_map_stateful_late_event() -> None:
    """`mapStateful_lateEvent` (`mapStatefulP` directly, in both of Jet's runs)."""

    def add(s: list[int], k: Any, e: JetEvent) -> JetEvent:
        s[0] += e.item
        return JetEvent(e.timestamp, s[0])

    supplier = map_stateful_p(
        counter, add, key_fn=lambda je: 0, ttl=1000, timestamp_fn=event_timestamp
    )
    TestSupport.verify_processor(supplier).input(
        [JetEvent(0, 1), JetEvent(1, 2), Watermark(3), JetEvent(0, 1)]  # the last one is late
    ).expect_output([JetEvent(0, 1), JetEvent(1, 3), Watermark(3)])


@FLAT_MAP
def test_map_stateful_negative_wm_time(flat_map: bool) -> None:
    """`mapStateful_negativeWmTime`."""
    TestSupport.verify_processor(ttl_supplier(flat_map)).input(
        [
            JetEvent(-10, ("a", 1)),
            JetEvent(-9, ("b", 2)),
            Watermark(-7),  # evict a
            JetEvent(-7, ("a", 3)),
            JetEvent(-7, ("b", 3)),
            Watermark(-4),  # evict b
            JetEvent(-4, ("b", 4)),
        ]
    ).expect_output(
        as_expanded_list(
            flat_map,
            expand_jet_event,
            JetEvent(-10, ("a", 1)),
            JetEvent(-9, ("b", 2)),
            Watermark(-7),
            JetEvent(-7, ("a", 3)),
            JetEvent(-7, ("b", 5)),
            Watermark(-4),
            JetEvent(-4, ("b", 4)),
        )
    )
