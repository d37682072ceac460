"""The plain count every window row is checked against before it reports a figure: events per
(sliding window, ticker), counted with numpy straight from the events' timestamps and tickers,
with no engine in between. A rate or a latency over windows that differ from it is no figure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

WINDOW_MILLIS, SLIDE_MILLIS = 1_000, 100
"""The stock-exchange window: 1 s, sliding by 100 ms (frames of 100 ms)."""
FRAMES_PER_WINDOW = WINDOW_MILLIS // SLIDE_MILLIS

WindowKey = tuple[int, int]
"""(window start ms, ticker)."""


def window_counts(timestamps_ms: np.ndarray, tickers: np.ndarray) -> dict[WindowKey, int]:
    """Events per (window start, ticker) of every window that holds at least one event."""
    tickers = np.asarray(tickers, dtype=np.int64)
    span = int(tickers.max()) + 1 if len(tickers) else 1
    keys, per_key = np.unique(
        np.asarray(timestamps_ms, dtype=np.int64) // SLIDE_MILLIS * span + tickers,
        return_counts=True,
    )
    counts: dict[WindowKey, int] = {}
    for key, events in zip(keys.tolist(), per_key.tolist(), strict=True):
        frame, ticker = divmod(key, span)
        for first_frame in range(frame - FRAMES_PER_WINDOW + 1, frame + 1):
            window = (first_frame * SLIDE_MILLIS, ticker)
            counts[window] = counts.get(window, 0) + events
    return counts


def wrong_windows(
    results: Iterable[tuple[int, int, int]], expected: Mapping[WindowKey, int]
) -> list[str]:
    """What is wrong with window results `(start, ticker, count)`, each window once: a window
    counted twice, a count that differs from `expected`, an expected window missing (at most
    five of each, described); empty when they are exactly `expected`."""
    seen: dict[WindowKey, int] = {}
    twice, wrong = [], []
    for start, ticker, count in results:
        key = (start, ticker)
        if key in seen:
            twice.append(f"window {key} came {seen[key]} and {count}")
        seen[key] = count
        if expected.get(key) != count:
            wrong.append(f"window {key}: {count} events, the plain count is {expected.get(key)}")
    missing = [
        f"window {key} ({n} events) is missing" for key, n in expected.items() if key not in seen
    ]
    problems = twice[:5] + wrong[:5] + sorted(missing)[:5]
    if len(twice) + len(wrong) + len(missing) > len(problems):
        problems.append(
            f"({len(twice)} twice, {len(wrong)} wrong and {len(missing)} missing in all, of "
            f"{len(expected)} windows)"
        )
    return problems
