"""The test run's own configuration (the jetspark pytest plugin has the engine fixtures)."""

from __future__ import annotations

import pytest
from cleanup import end_runs_by_signal_with_teardown


def pytest_configure(config: pytest.Config) -> None:
    """A run killed with SIGTERM tears down like one interrupted with Ctrl-C."""
    end_runs_by_signal_with_teardown()
