"""Property: whatever item fails, whatever the snapshot interval, member count and parallelism,
an exactly-once windowed count ends with the failure-free result."""

from __future__ import annotations

import pytest
from fault_tolerance_jobs import (
    EXACTLY_ONCE,
    FailOnce,
    config,
    engine,
    events,
    expected_windows,
    run_to_completion,
    windowed_dag,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EVENTS = events(300, seed=5)
EXPECTED = expected_windows(EVENTS)


@pytest.mark.timeout(60)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fail_at=st.lists(st.integers(1, len(EVENTS)), min_size=1, max_size=2, unique=True),
    interval=st.integers(1, 8),
    members=st.integers(1, 2),
    source_lp=st.integers(1, 3),
    window_lp=st.integers(1, 3),
)
def test_random_failures_never_change_an_exactly_once_windowed_count(
    fail_at, interval, members, source_lp, window_lp
):
    local = engine(members)
    local.get_list("events").extend(EVENTS)
    faults = [FailOnce(at) for at in fail_at]

    def fault(event):
        for one in faults:
            one(event)
        return event

    dag = windowed_dag(fault, source_lp=source_lp, window_lp=window_lp)
    job = local.new_job(dag, config(EXACTLY_ONCE, interval=interval))
    assert run_to_completion(job) == len(fail_at)
    assert local.get_map("windows") == EXPECTED
