"""Ports and addresses of CONTINUOUS jobs: the coordinator and the members listen on the
configured ports (the first free one of `port` .. `port + spark.port.maxRetries`), the
coordinator binds `spark.driver.bindAddress` and the members connect to `spark.driver.host`; a
port range in use, or a driver the members cannot reach, fails the job naming host and ports.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
from collections.abc import Iterator
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from spark_conf import configured

from jetspark.core import ExecutionMode, JobConfig, JobFailedError
from jetspark.core.spark.continuous.settings import (
    COORDINATOR_PORT,
    HEARTBEAT_TIMEOUT,
    MEMBER_PORT,
    PORT_RETRIES,
)

pytestmark = pytest.mark.spark

CONTINUOUS = JobConfig(execution_mode=ExecutionMode.CONTINUOUS)


@pytest.fixture
def engine(spark_engine: Any) -> Any:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    engine.get_list("in").extend(range(100))
    return engine


def _configured(engine: Any, **settings: str) -> contextlib.AbstractContextManager[None]:
    """The engine's context with `settings` (keys with dots) for the block, then as before."""
    return configured(engine.context, settings)


@contextlib.contextmanager
def _ports_in_use(count: int) -> Iterator[int]:
    """Holds `count` consecutive ports of 127.0.0.1 bound for the block; yields the first."""
    while True:
        held: list[socket.socket] = []
        try:
            first = _bound(0, held)
            for offset in range(1, count):
                _bound(first + offset, held)
        except OSError:
            for sock in held:
                sock.close()
            continue
        try:
            yield first
        finally:
            for sock in held:
                sock.close()
        return


def _bound(port: int, held: list[socket.socket]) -> int:
    sock = socket.create_server(("127.0.0.1", port))
    held.append(sock)
    return int(sock.getsockname()[1])


def _runs_exactly(engine: Any) -> None:
    engine.new_job(jobs.copy_dag(), CONTINUOUS).join(120)
    assert sorted(engine.get_list("out")) == list(range(100))


def test_the_coordinator_takes_the_first_free_port_of_its_range(
    engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with _ports_in_use(1) as taken:
        settings = {COORDINATOR_PORT: str(taken), PORT_RETRIES: "3"}
        with _configured(engine, **settings), caplog.at_level(logging.INFO, "jetspark.spark"):
            _runs_exactly(engine)
    (line,) = [r.getMessage() for r in caplog.records if "coordinator listens" in r.getMessage()]
    port = int(re.search(r"listens on 127\.0\.0\.1:(\d+)", line).group(1))  # type: ignore[union-attr]
    assert taken < port <= taken + 3


def test_a_coordinator_port_range_in_use_fails_the_job_naming_host_and_ports(
    engine: Any,
) -> None:
    with (
        _ports_in_use(2) as first,
        _configured(engine, **{COORDINATOR_PORT: str(first), PORT_RETRIES: "1"}),
    ):
        job = engine.new_job(jobs.copy_dag(), CONTINUOUS)
        with pytest.raises(JobFailedError) as failure:
            job.join(120)
    assert f"cannot listen on 127.0.0.1 at ports {first}-{first + 1}" in str(failure.value)
    assert COORDINATOR_PORT in str(failure.value)


def test_members_take_free_ports_of_their_range_and_fail_naming_them_when_none_is(
    engine: Any,
) -> None:
    with (  # two members on one host: the next two ports
        _ports_in_use(1) as taken,
        _configured(engine, **{MEMBER_PORT: str(taken), PORT_RETRIES: "2"}),
    ):
        _runs_exactly(engine)
    with (
        _ports_in_use(2) as first,
        _configured(engine, **{MEMBER_PORT: str(first), PORT_RETRIES: "1"}),
    ):
        job = engine.new_job(jobs.copy_dag(), CONTINUOUS)
        with pytest.raises(JobFailedError) as failure:
            job.join(120)
    assert re.search(
        rf"member \d cannot listen on 127\.0\.0\.1 at ports {first}-{first + 1}",
        str(failure.value),
    )


def test_the_coordinator_binds_the_bind_address_and_members_connect_to_the_driver_host(
    engine: Any,
) -> None:
    """127.0.0.3 is loopback too: the coordinator listens there, and the members, told the
    driver's host 127.0.0.1, find nothing listening. They retry within the heartbeat timeout,
    then fail; a coordinator no member reaches is a configuration error: the job fails at
    once, without a restart, naming the address and the setting."""
    settings = {"spark.driver.bindAddress": "127.0.0.3", HEARTBEAT_TIMEOUT: "3s"}
    with _configured(engine, **settings):
        job = engine.new_job(jobs.copy_dag(), CONTINUOUS)
        with pytest.raises(JobFailedError) as failure:
            job.join(120)
    assert re.search(
        r"member \d on 127\.0\.0\.1 cannot reach the driver's coordinator at 127\.0\.0\.1:\d+ "
        r"\(Connection refused\)",
        str(failure.value),
    )
    assert COORDINATOR_PORT in str(failure.value)
    assert job.metrics.restarts == 0
