"""The jetspark pytest plugin (entry point `pytest11`): session fixtures for the two engines.

Installing jetspark is enough to get `local_engine` and `spark_engine` in any test. The module
imports only the standard library and pytest: jetspark's engines, and pyspark with its JVM, are
loaded inside the fixtures, so pytest starts fast and never fails because of them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

SPARK_MASTER = "local[2]"


def pytest_configure(config: pytest.Config) -> None:
    """Registers the `spark` marker, so `--strict-markers` accepts tests that use Spark."""
    config.addinivalue_line("markers", "spark: runs a job on a local Spark context (needs Java)")


@pytest.fixture(scope="session")
def local_engine() -> Any:
    """A `LocalEngine` shared by the whole test session: runs jobs in-process, no JVM."""
    from jetspark.core import LocalEngine

    return LocalEngine()


@pytest.fixture(scope="session")
def spark_engine() -> Iterator[Any]:
    """A `SparkEngine` on a quiet local[2] SparkContext bound to 127.0.0.1, stopped at the end."""
    if not _java_available():
        pytest.skip("spark_engine needs Java 17+ (set JAVA_HOME or put java on PATH)")
    from jetspark.core.spark import SparkEngine

    context, created = _spark_context()
    try:
        yield SparkEngine(spark=context)
    finally:
        if created:
            context.stop()


def _java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return True
    return shutil.which("java") is not None


def _spark_context() -> tuple[Any, bool]:
    """The active SparkContext if there is one (not ours to stop), else a new test context."""
    from pyspark import SparkContext

    from jetspark.core.spark.session import create_context

    active = SparkContext._active_spark_context
    if active is not None:
        return active, False
    return create_context(SPARK_MASTER, "jetspark-tests"), True
