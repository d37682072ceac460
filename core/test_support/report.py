"""Output checkers and the mismatch messages that say where the output went wrong."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from jetspark.core.test_support.driver import Origin
from jetspark.core.test_support.inputs import show

OutputChecker = Callable[[list[Any], list[Any]], bool]
"""`(expected, actual) -> bool`: True when the actual output of one ordinal is acceptable."""

_SHOWN_ITEMS = 20


def exact_equality(expected: list[Any], actual: list[Any]) -> bool:
    """The default checker: the same items in the same order."""
    return expected == actual


def same_items_any_order(expected: list[Any], actual: list[Any]) -> bool:
    """The same items as many times each, in any order (Jet's SAME_ITEMS_ANY_ORDER)."""
    missing, unexpected = multiset_difference(expected, actual)
    return not missing and not unexpected


def multiset_difference(expected: list[Any], actual: list[Any]) -> tuple[list[Any], list[Any]]:
    """The expected items missing from `actual`, and the actual items not expected."""
    try:
        missing = Counter(expected)
        missing.subtract(actual)
        return _positive(missing), _positive(Counter({k: -v for k, v in missing.items()}))
    except TypeError:  # unhashable items: compare by equality
        unexpected = list(actual)
        still_missing = []
        for item in expected:
            if item in unexpected:
                unexpected.remove(item)
            else:
                still_missing.append(item)
        return still_missing, unexpected


def _positive(counts: Counter[Any]) -> list[Any]:
    return [item for item, count in counts.items() for _ in range(count)]


def show_list(items: Sequence[Any]) -> str:
    """The items, cut after the first twenty."""
    shown = ", ".join(show(item) for item in items[:_SHOWN_ITEMS])
    more = f", ... ({len(items) - _SHOWN_ITEMS} more)" if len(items) > _SHOWN_ITEMS else ""
    return f"[{shown}{more}] ({len(items)} items)"


def mismatch_message(
    headline: str,
    expected: list[Any],
    actual: list[Any],
    origins: Sequence[Origin],
    any_order: bool,
    hints: Sequence[str],
) -> str:
    """The failure text: expected vs actual, where they first differ and who emitted what."""
    lines = [headline, f"  expected: {show_list(expected)}", f"  actual:   {show_list(actual)}"]
    if any_order:
        missing, unexpected = multiset_difference(expected, actual)
        lines.append(f"  missing: {show_list(missing)}; unexpected: {show_list(unexpected)}")
    else:
        lines.extend(_first_difference(expected, actual, origins))
    lines.extend(f"hint: {hint}" for hint in hints)
    return "\n".join(lines)


def _first_difference(
    expected: list[Any], actual: list[Any], origins: Sequence[Origin]
) -> list[str]:
    position = next(
        (i for i, (e, a) in enumerate(zip(expected, actual, strict=False)) if e != a),
        min(len(expected), len(actual)),
    )
    want = show(expected[position]) if position < len(expected) else "no more items"
    got = show(actual[position]) if position < len(actual) else "no more items"
    lines = [f"  first difference at position {position}: expected {want}, actual {got}"]
    if position < len(actual):
        lines.append(f"  actual[{position}] was emitted by {origins[position]}")
    if position > 0:
        lines.append(f"  the item before it, actual[{position - 1}], by {origins[position - 1]}")
    elif not actual:
        lines.append("  the processor emitted nothing on this ordinal")
    return lines
