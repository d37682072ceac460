"""The test run's own configuration (the jetspark pytest plugin has the engine fixtures)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from cleanup import end_runs_by_signal_with_teardown


def pytest_configure(config: pytest.Config) -> None:
    """A run killed with SIGTERM tears down like one interrupted with Ctrl-C."""
    end_runs_by_signal_with_teardown()


@pytest.fixture
def browser(tmp_path) -> Iterator[Any]:
    """Debian's headless chromium with a fresh profile (tests/chromium.py); a test using it
    carries `chromium.needs_chromium`'s marks."""
    from chromium import headless_chromium

    with headless_chromium(tmp_path / "profile") as driver:
        yield driver


@pytest.fixture
def frequent_thread_switches() -> Iterator[None]:
    """Python switches threads every microsecond instead of every 5 ms for one test: a race
    between two steps of one thread, rare at the default, comes up in every run."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory) -> Iterator[Any]:
    """A real Kafka broker (bench/kafka_broker.py) shared by the run's tests, stopped by PID
    at the end; tests give their topics names of their own."""
    from bench.kafka_broker import KafkaBroker

    broker = KafkaBroker(tmp_path_factory.mktemp("kafka")).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def restartable_kafka_broker(tmp_path) -> Iterator[Any]:
    """A broker of the test's own, which it may stop, kill and start again mid-test."""
    from bench.kafka_broker import KafkaBroker

    broker = KafkaBroker(tmp_path / "kafka").start()
    try:
        yield broker
    finally:
        broker.stop()
