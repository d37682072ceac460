"""The benchmarks' one timing helper: candidates run alternately, round after round.

Every candidate of a comparison runs once per round, in an order that rotates from round to
round, so a machine that slows down (another job starting, a CPU throttling) costs every
candidate alike. A ratio is computed per round (paired), and reported as the median of those
ratios with their minimum and maximum: the spread shows how much to trust it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Samples:
    """Repeated measurements of one quantity (seconds, items per second, MB, a ratio)."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        """The median: the number a table shows."""
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        """The smallest measurement."""
        return min(self.values)

    @property
    def high(self) -> float:
        """The largest measurement."""
        return max(self.values)

    def map(self, fn: Callable[[float], float]) -> Samples:
        """Each measurement transformed (seconds into items per second, say)."""
        return Samples(tuple(fn(value) for value in self.values))

    def over(self, other: Samples) -> Samples:
        """Paired ratios `self[i] / other[i]`, round by round."""
        if len(self.values) != len(other.values):
            raise ValueError("paired ratios need the same number of rounds on both sides")
        return Samples(tuple(a / b for a, b in zip(self.values, other.values, strict=True)))

    def as_json(self) -> dict[str, Any]:
        """Median, min, max and every sample."""
        return {
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "samples": list(self.values),
        }


def single(value: float) -> Samples:
    """One measurement (memory peaks, start-up), so spread is nil."""
    return Samples((value,))


def seconds(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall-clock seconds of one call, and what it returned."""
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def alternate(
    candidates: Mapping[str, Callable[[], Any]], rounds: int
) -> tuple[dict[str, Samples], dict[str, Any]]:
    """Runs every candidate once per round, rotating the order; returns seconds per candidate
    and what each returned in the first round (to check that they agree)."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    names = list(candidates)
    times: dict[str, list[float]] = {name: [] for name in names}
    results: dict[str, Any] = {}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            took, result = seconds(candidates[name])
            times[name].append(took)
            results.setdefault(name, result)
    return {name: Samples(tuple(values)) for name, values in times.items()}, results
