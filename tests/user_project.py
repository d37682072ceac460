"""A user's project as a new user writes one, for the tests of issue 12 (your own code on Spark).

`write_project(root)` lays out, in three sibling folders:

- `project/`: the user's code, which only the driver script puts on `sys.path`: `myprocs.py`
  (a processor class, a helper function, a key function) importing `wordlib/text.py` (a package
  of its own, reached only through `myprocs`), and `installed/site-packages/lockedlib.py`, a
  module the driver imports from a folder named like an installed one (so it is not shipped:
  the workers lack it, as a library installed on the driver only);
- `scripts/driver.py`: runs a word count DAG with a distributed edge on `--master`, sends
  objects of a class of its own (`Tally`, defined in the script) across a distributed edge
  and into a snapshot (which needs an importable class), then the failures the issue lists,
  and prints one JSON line of what it saw;
- `elsewhere/`: the working directory the driver runs from.

`run_driver(root, master)` runs it the way a user does and returns the JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

LINES = ["the cat sat", "The dog sat", "a cat ran", "Cat and dog"]
EXPECTED_COUNTS = {"and": 1, "cat": 3, "dog": 2, "ran": 1, "sat": 2}
"""Word counts of LINES without the stopwords `the` and `a`."""

_FILES = {
    "project/wordlib/__init__.py": "",
    "project/wordlib/text.py": """
        STOPWORDS = frozenset({"the", "a"})

        def words(line):
            return [w for w in line.lower().split() if w not in STOPWORDS]
        """,
    "project/myprocs.py": """
        import threading

        from wordlib.text import words

        from jetspark.core import AbstractProcessor


        class Tokenize(AbstractProcessor):
            def init(self, outbox, context):
                super().init(outbox, context)
                self.flat = self.flat_mapper(words)

            def try_process0(self, line):
                return self.flat.try_process(line)


        class CountWords(AbstractProcessor):
            def init(self, outbox, context):
                super().init(outbox, context)
                self.counts = {}
                self.results = None

            def try_process0(self, word):
                self.counts[word] = self.counts.get(word, 0) + 1
                return True

            def complete(self):
                if self.results is None:
                    self.results = sorted(self.counts.items())
                return self.emit_from_traverser(self.results)


        def key_of(word):
            return word


        class Guarded:
            def __init__(self):
                self.lock = threading.Lock()

            def __call__(self, word):
                with self.lock:
                    return word
        """,
    "project/installed/site-packages/lockedlib.py": """
        def shout(word):
            return word.upper()
        """,
    "scripts/driver.py": """
        import json
        import sys
        from dataclasses import dataclass
        from pathlib import Path

        project = Path(__file__).resolve().parent.parent / "project"
        sys.path.insert(0, str(project))
        sys.path.insert(0, str(project / "installed" / "site-packages"))
        import lockedlib
        import myprocs

        from jetspark.core import (
            DAG,
            DirectorySnapshotStore,
            ExecutionMode,
            JobConfig,
            JobFailedError,
            ProcessingGuarantee,
        )
        from jetspark.core.spark import SparkEngine
        from jetspark.edges import between
        from jetspark.processors import (
            aggregate_by_key_p, map_p, read_list_p, write_list_p, write_map_p
        )
        from jetspark.processors.aggregate import to_list

        EXACTLY_ONCE = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
        # one-item micro-batches: batch 1 saves an object of the script's class in a snapshot
        ONE_ITEM_BATCHES = JobConfig(
            processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
            execution_mode=ExecutionMode.MICRO_BATCH,
        )

        LINES = {lines!r}
        seen = {{}}


        @dataclass(frozen=True)
        class Tally:
            word: str
            count: int


        def tally(word_count):
            return Tally(*word_count)


        def word_of(tally):
            return tally.word


        def tallies_dag(held=False):
            # the counts as Tally objects, sent across a distributed edge (a shuffle); held:
            # kept in an aggregation's state first, which a guarantee saves in snapshots
            dag = DAG("tallies")
            source = dag.new_vertex("source", read_list_p("pairs"))
            make = dag.new_vertex("make", map_p(tally))
            sink = dag.new_vertex("sink", write_list_p("tallies"))
            dag.edge(between(source, make))
            if held:
                keep = dag.new_vertex("held", aggregate_by_key_p([word_of], to_list()))
                dag.edge(between(make, keep).distributed()).edge(between(keep, sink))
            else:
                dag.edge(between(make, sink).distributed())
            return dag


        def tallies_cross(counts):
            engine.new_job(tallies_dag()).join(timeout=120)
            received = engine.get_list("tallies")
            expected = [Tally(*pair) for pair in sorted(counts.items())]
            return sorted(received, key=repr) == sorted(expected, key=repr) and all(
                type(item) is Tally for item in received
            )


        def word_count(middle=None):
            dag = DAG("user-word-count")
            source = dag.new_vertex("source", read_list_p("lines"))
            tokenize = dag.new_vertex("tokenize", myprocs.Tokenize)
            count = dag.new_vertex("count", myprocs.CountWords)
            sink = dag.new_vertex("sink", write_map_p("counts"))
            dag.edge(between(source, tokenize))
            if middle is None:
                dag.edge(between(tokenize, count).distributed().partitioned(myprocs.key_of))
            else:
                name, supplier = middle
                vertex = dag.new_vertex(name, supplier)
                dag.edge(between(tokenize, vertex))
                dag.edge(between(vertex, count).distributed().partitioned(myprocs.key_of))
            dag.edge(between(count, sink))
            return dag


        def failure(dag, config=None, on=None):
            # a job with a guarantee keeps its snapshots where every executor reaches them
            store = None
            if config is not None:
                store = DirectorySnapshotStore(str(project.parent / "snapshots"))
            try:
                (on or engine).new_job(dag, config, snapshot_store=store).join(timeout=120)
            except JobFailedError as error:
                return {{"message": str(error), "vertex": error.vertex_name,
                         "cause": type(getattr(error, "spark_error", None)
                                       or error.__cause__).__name__}}
            return None


        engine = SparkEngine(sys.argv[1], members=2)
        engine.get_list("lines").extend(LINES)
        engine.new_job(word_count()).join(timeout=120)
        seen["counts"] = dict(sorted(engine.get_map("counts").items()))
        engine.get_list("pairs").extend(sorted(seen["counts"].items()))
        seen["script_classes_cross"] = tallies_cross(seen["counts"])
        one_item_batches = SparkEngine(engine.context, batch_items=1)
        one_item_batches.get_list("pairs").extend(sorted(seen["counts"].items()))
        seen["script_classes_in_snapshots"] = failure(
            tallies_dag(held=True), ONE_ITEM_BATCHES, one_item_batches
        )
        seen["unpicklable"] = failure(word_count(("guarded-vertex", map_p(myprocs.Guarded()))))
        seen["missing_module"] = failure(word_count(("shout", map_p(lockedlib.shout))))
        engine.context.stop()
        seen["stopped"] = failure(word_count())
        print(json.dumps(seen))
        """.replace("{lines!r}", repr(LINES)),
}


def write_project(root: Path) -> Path:
    """Writes the project, the driver script and the folder to run it from; returns root."""
    for name, text in _FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip().replace("{{", "{").replace("}}", "}"))
    (root / "elsewhere").mkdir(exist_ok=True)
    return root


def run_driver(root: Path, master: str, timeout: float = 400) -> dict[str, Any]:
    """Runs scripts/driver.py on `master` from elsewhere/ with a clean environment (no
    PYTHONPATH, no PYSPARK_PYTHON); returns what it printed, with its stderr under 'stderr'."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    result = subprocess.run(
        [sys.executable, str(root / "scripts" / "driver.py"), master],
        cwd=root / "elsewhere",
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(f"the driver failed:\n{result.stderr[-5000:]}")
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    seen["stderr"] = result.stderr
    return seen
