"""What a Spark task's Python worker imports of jetspark: the modules it runs, not the driver's
engine (each worker pays its imports before its first task)."""

from __future__ import annotations

import subprocess
import sys

TASK_IMPORTS = """
import sys
import jetspark.core.spark.stages.task
import jetspark.processors.tfidf.processors
import jetspark.processors.tfidf.parts
print(sorted(name for name in sys.modules if name.startswith("jetspark.core.spark.")))
"""


def test_a_task_imports_neither_the_engine_nor_its_streaming_modes():
    printed = subprocess.run(
        [sys.executable, "-c", TASK_IMPORTS], capture_output=True, text=True, check=True
    ).stdout
    for driver_module in ("engine", "continuous.run", "microbatch.run", "session"):
        assert f"'jetspark.core.spark.{driver_module}'" not in printed


def test_the_engine_is_still_imported_from_the_package():
    from jetspark.core.spark import SparkEngine, SparkJob
    from jetspark.core.spark.engine import SparkEngine as Engine
    from jetspark.core.spark.engine import SparkJob as Job

    assert (SparkEngine, SparkJob) == (Engine, Job)
