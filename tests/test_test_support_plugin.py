"""The pytest plugin: registered by the entry point, light to import, fixtures built lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]


def test_plugin_is_registered_through_the_entry_point(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.has_plugin("jetspark")


def test_plugin_imports_neither_pyspark_nor_the_engines() -> None:
    code = (
        "import sys, jetspark.core.pytest_plugin; "
        "heavy = [m for m in sys.modules if m.startswith(('pyspark', 'py4j', 'jetspark.core.'))]; "
        "assert heavy == ['jetspark.core.pytest_plugin'], heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_local_engine_fixture_builds_one_engine_per_session(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import jetspark.core

        class FakeEngine:
            built = 0

            def __init__(self):
                FakeEngine.built += 1

        jetspark.core.LocalEngine = FakeEngine
        """
    )
    pytester.makepyfile(
        """
        def test_one(local_engine):
            assert type(local_engine).__name__ == "FakeEngine"

        def test_two(local_engine):
            assert type(local_engine).built == 1
        """
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_spark_engine_fixture_is_lazy(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys

        def test_no_spark_before_use():
            assert "pyspark" not in sys.modules
        """
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.spark
@pytest.mark.parametrize("local_ip", [None, "127.0.0.1"], ids=["default", "SPARK_LOCAL_IP"])
def test_spark_engine_fixture_gives_a_quiet_local_context(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, local_ip: str | None
) -> None:
    """Bound to 127.0.0.1 by default, and to the address a user's SPARK_LOCAL_IP names (a test
    run that started Spark before leaves it set for the processes it starts)."""
    if local_ip is None:
        monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    else:
        monkeypatch.setenv("SPARK_LOCAL_IP", local_ip)
    pytester.makeconftest(
        """
        import jetspark.core.spark

        class FakeSparkEngine:
            def __init__(self, spark):
                self.spark = spark

        jetspark.core.spark.SparkEngine = FakeSparkEngine
        """
    )
    pytester.makepyfile(
        """
        def test_context(spark_engine):
            sc = spark_engine.spark
            assert sc.master == "local[2]"
            assert sc.getConf().get("spark.ui.enabled") == "false"
            assert sc.getConf().get("spark.driver.host") == "127.0.0.1"
            assert sc.parallelize(range(4), 2).sum() == 6

        def test_same_context(spark_engine):
            assert spark_engine.spark.uiWebUrl is None
        """
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)
