"""Shipping jetspark to executors as a zipped py-file, so workers need no jetspark install."""

from __future__ import annotations

import atexit
import functools
import os
import tempfile
import zipfile
from pathlib import Path

from pyspark import SparkContext

_SUBPACKAGES = ("core", "edges", "partitioning", "processors")


def _source_root() -> Path:
    """The folder holding core/, edges/, ...: the repository, or site-packages/jetspark."""
    import jetspark.core

    return Path(jetspark.core.__file__).resolve().parent.parent


def build_zip(target_dir: str | None = None) -> str:
    """Writes jetspark's Python sources into a zip laid out as the `jetspark` package.

    `jetspark` is a namespace package (no `__init__.py`); zipimport finds one only through the
    directory's own entry, so the zip holds `jetspark/` explicitly.
    """
    root = _source_root()
    handle, path = tempfile.mkstemp(prefix="jetspark-", suffix=".zip", dir=target_dir)
    os.close(handle)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("jetspark/", b"")
        for folder in _SUBPACKAGES:
            base = root / folder
            for source in sorted(base.rglob("*.py")):
                archive.write(source, f"jetspark/{folder}/{source.relative_to(base)}")
    return path


@functools.cache
def _process_zip() -> str:
    """One zip per driver process, removed when the process exits."""
    path = build_zip()
    atexit.register(os.remove, path)
    return path


def ship_package(context: SparkContext) -> None:
    """Adds the jetspark zip to the context once; executors put it on their sys.path."""
    if getattr(context, "_jetspark_shipped", False):
        return
    context.addPyFile(_process_zip())
    context._jetspark_shipped = True  # type: ignore[attr-defined]
