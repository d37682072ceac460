"""MkDocs hook: shows mkdocstrings where the `jetspark` package's sources are.

mkdocstrings reads the sources with griffe, which looks for a `jetspark/` directory on its search
paths (`sys.path`). The repository has none: pyproject's package-dir maps `jetspark.core` to
`core/`, `jetspark.edges` to `edges/` and so on, and an editable install resolves those names
with an import hook that griffe does not consult (it scans directories). So before the build
this hook makes a throwaway `jetspark/` directory of symbolic links to the directories the
installed subpackages live in (found by importlib: the checkout for an editable install,
site-packages for a regular one) and puts its parent first on `sys.path`.
"""

from __future__ import annotations

import atexit
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

SUBPACKAGES = ("core", "edges", "partitioning", "processors")
"""The top-level subpackages of `jetspark` (pyproject's package-dir)."""

_layout: Path | None = None


def on_startup(**_: object) -> None:
    global _layout
    if _layout is not None:  # `mkdocs serve` rebuilds in the same process
        return
    _layout = Path(tempfile.mkdtemp(prefix="jetspark-docs-"))
    atexit.register(shutil.rmtree, _layout, ignore_errors=True)
    package = _layout / "jetspark"
    package.mkdir()
    for name in SUBPACKAGES:
        spec = importlib.util.find_spec(f"jetspark.{name}")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"jetspark.{name} is not installed: pip install -e '.[docs]'")
        (package / name).symlink_to(next(iter(spec.submodule_search_locations)))
    sys.path.insert(0, str(_layout))
