"""The engines the ported pipeline tests run on: LocalEngine with two members (every
distributed edge crosses members), and SparkEngine with two members on the session's Spark
context for the tests that take `any_engine`."""

from __future__ import annotations

from typing import Any

import pytest

from jetspark.core import LocalEngine

from .support import WindowRun


@pytest.fixture
def engine() -> LocalEngine:
    """A fresh LocalEngine of two members: its lists and maps are the test's own."""
    return LocalEngine(2)


@pytest.fixture(params=["local", pytest.param("spark", marks=pytest.mark.spark)])
def any_engine(request: pytest.FixtureRequest) -> Any:
    """LocalEngine(2), then SparkEngine(members=2) on the plugin's session SparkContext."""
    if request.param == "local":
        return LocalEngine(2)
    from jetspark.core.spark import SparkEngine

    return SparkEngine(request.getfixturevalue("spark_engine").context, members=2)


@pytest.fixture
def stream_run(engine: LocalEngine) -> WindowRun:
    """Windowing tests on LocalEngine(2), streaming: journals followed until cancelled."""
    return WindowRun(engine, streaming=True)


@pytest.fixture
def window_run(any_engine: Any) -> WindowRun:
    """Windowing tests streaming on LocalEngine(2), then bounded on SparkEngine(members=2)."""
    return WindowRun(any_engine, streaming=isinstance(any_engine, LocalEngine))
