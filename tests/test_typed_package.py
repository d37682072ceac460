"""PEP 561: an installed jetspark ships `py.typed` in each of its packages, so users' type checkers
read its annotations (a wheel built from this checkout, as `pip install jetspark` would get it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {
    "jetspark.core": "core",
    "jetspark.edges": "edges",
    "jetspark.partitioning": "partitioning",
    "jetspark.processors": "processors",
}
"""pyproject.toml's package-dir: jetspark's top-level packages (each holds its subpackages)."""


def test_the_wheel_ships_py_typed_in_every_package(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for directory in PACKAGE_DIRS.values():
        shutil.copytree(
            ROOT / directory, source / directory, ignore=shutil.ignore_patterns("__pycache__")
        )
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "out", source],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "out").glob("jetspark-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"{package.replace('.', '/')}/py.typed" for package in PACKAGE_DIRS}
    assert expected <= names, sorted(expected - names)
