"""Rows timed as a user runs them, each command a process of its own (JVM start included):
`jetspark tfidf DIR --tsv` vs the PySpark script a user would write (2d), `jetspark tfidf` on
the default corpus on Spark vs `--engine local` (2e), and the driver's peak memory as the corpus
grows (2f: tenfold, twofold in smoke runs).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from bench.report import Goal, Row
from bench.timing import alternate, single

_BENCH = Path(__file__).resolve().parent
_TIMEOUT = 3600


def _python(*argv: str) -> str:
    """Runs `python argv...` from the repository root; its stdout, or an error with its stderr's
    end. The workers run this Python (PYSPARK_PYTHON), as a user's console script would."""
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT,
        env=environment,
        cwd=_BENCH.parent,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def _jetspark(*argv: str) -> dict[str, float]:
    """`jetspark argv...` in a process of its own; its wall time and driver's peak RSS in MB."""
    output = _python("-m", "bench.driver_peak", *argv)
    return json.loads(output.strip().splitlines()[-1])  # type: ignore[no-any-return]


def warm_up_class_archive(master: str) -> str:
    """Runs `jetspark warm-up` (a first run on a machine saves the driver JVM's class archive,
    unless one exists), so that every timed driver starts as a user's later runs do; returns
    what it said about the archive."""
    return _python("-m", "jetspark.core", "warm-up", "--master", master).strip()


def same_tsv(expected: Path, actual: Path) -> None:
    """The two TSV files hold the same postings in the same order, scores equal to 1e-9."""
    with expected.open(encoding="utf-8") as want, actual.open(encoding="utf-8") as got:
        for number, (a, b) in enumerate(zip(want, got, strict=True), 1):
            word_a, doc_a, score_a = a.rstrip("\n").split("\t")
            word_b, doc_b, score_b = b.rstrip("\n").split("\t")
            if (word_a, doc_a) != (word_b, doc_b) or not math.isclose(
                float(score_a), float(score_b), rel_tol=1e-9, abs_tol=1e-9
            ):
                raise AssertionError(f"line {number} differs: {a!r} != {b!r}")


def tfidf_process(documents: Path, megabytes: float, workdir: Path, rounds: int) -> list[Row]:
    """Row 2d: `jetspark tfidf DIR --tsv` vs `bench/rdd_tfidf_script.py DIR TSV`, whole
    processes on local[2]; the two TSVs must agree to 1e-9."""
    jet_tsv, rdd_tsv = workdir / "jetspark.tsv", workdir / "rdd.tsv"
    index = workdir / "jetspark-index"
    jetspark = ("tfidf", str(documents), "--master", "local[2]", "--index", str(index))
    script = (str(_BENCH / "rdd_tfidf_script.py"), str(documents), str(rdd_tsv))
    times, _ = alternate(
        {
            "jetspark": lambda: _jetspark(*jetspark, "--tsv", str(jet_tsv)),
            "rdd": lambda: _python(*script),
        },
        rounds,
    )
    same_tsv(rdd_tsv, jet_tsv)
    title = (
        f"`jetspark tfidf DIR --tsv` {megabytes:.3g} MB, whole process on local[2] vs the "
        "whole-process PySpark RDD script (same TSV to 1e-9)"
    )
    return [Row.compare("2d", title, "s", times["jetspark"], times["rdd"], goal=Goal("<=", 1.0))]


def default_corpus(documents: Path | None, workdir: Path, rounds: int) -> list[Row]:
    """Row 2e: `jetspark tfidf` on the default corpus (the standard library; `documents` in
    smoke runs) end to end on Spark local[2] vs `--engine local`."""
    corpus = () if documents is None else (str(documents),)
    index = str(workdir / "default-index")
    times, _ = alternate(
        {
            "spark": lambda: _jetspark("tfidf", *corpus, "--master", "local[2]", "--index", index),
            "local": lambda: _jetspark("tfidf", *corpus, "--engine", "local", "--index", index),
        },
        rounds,
    )
    what = "the default corpus" if documents is None else "the smoke corpus"
    title = f"`jetspark tfidf` on {what}, end to end: Spark local[2] vs `--engine local`"
    return [
        Row.compare(
            "2e", title, "s", times["spark"], times["local"], goal=Goal("<=", 8.0, unit="s")
        )
    ]


def driver_memory(small: Path, large: Path, sizes: tuple[float, float], workdir: Path) -> list[Row]:
    """Row 2f: the driver's peak RSS of `jetspark tfidf` (partitioned index, on local[2]) at a
    larger corpus vs a smaller one: the postings never reach the driver."""
    peaks = {
        name: _jetspark(
            "tfidf", str(directory), "--master", "local[2]", "--index", str(workdir / name)
        )
        for name, directory in (("small", small), ("large", large))
    }
    title = (
        f"driver peak RSS of `jetspark tfidf` at {sizes[1]:.3g} MB vs at {sizes[0]:.3g} MB "
        "(local[2], partitioned index)"
    )
    extra = {"seconds": {name: peak["seconds"] for name, peak in peaks.items()}}
    return [
        Row.compare(
            "2f",
            title,
            "MB",
            single(peaks["large"]["peak_rss_mb"]),
            single(peaks["small"]["peak_rss_mb"]),
            goal=Goal("<=", 1.2),
            extra=extra,
        )
    ]
