"""Shipping code to executors as zipped py-files: jetspark itself, so workers need no jetspark
install, and the paths a user names with `SparkEngine(ship=[...])`."""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
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


def ship_path(context: SparkContext, path: str | os.PathLike[str]) -> set[str]:
    """Makes the code at `path` importable on the context's executors; returns the top-level
    names it provides.

    `path` is a module file (`.py`), a package directory, or a `.zip` of modules and packages.
    It is zipped (a zip as it is) into `<name>-<content hash>.zip` and added to the context
    with `addPyFile` once; a changed file gets a new hash, so calling this again after an edit
    ships the new code (Python workers Spark reuses keep a module they already imported).
    """
    source = Path(path).resolve()
    if source.is_dir():
        files = sorted(f for f in source.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
        entries = [(f, f"{source.name}/{f.relative_to(source).as_posix()}") for f in files]
    elif source.suffix in (".py", ".zip") and source.is_file():
        entries = [(source, source.name)]
    else:
        raise ValueError(
            f"ship={str(path)!r}: expected a .py module, a package directory or a .zip"
        )
    digest = hashlib.sha256()
    for file, name in entries:
        digest.update(name.encode() + b"\0" + file.read_bytes())
    shipped: dict[str, set[str]] = context.__dict__.setdefault("_jetspark_shipped_paths", {})
    target = Path(_shipping_dir(), f"{source.stem}-{digest.hexdigest()[:16]}.zip")
    if str(target) not in shipped:
        if source.suffix == ".zip":
            shutil.copyfile(source, target)
        else:
            with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
                for file, name in entries:
                    archive.write(file, name)
        with zipfile.ZipFile(target) as archive:
            tops = {n.split("/")[0].removesuffix(".py") for n in archive.namelist()}
        context.addPyFile(str(target))
        shipped[str(target)] = tops
    return shipped[str(target)]


@functools.cache
def _shipping_dir() -> str:
    """A folder for this driver process's shipped zips, removed when the process exits."""
    folder = tempfile.mkdtemp(prefix="jetspark-ship-")
    atexit.register(shutil.rmtree, folder, True)
    return folder
