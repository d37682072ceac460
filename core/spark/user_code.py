"""The user's code on the executors: found by pickling each job's DAG on the driver first.

Spark ships every vertex's processor supplier, and every edge's key function and partitioner,
with cloudpickle, which pickles a function or class *by reference* (its module's name) unless
it comes from `__main__` or from a module registered "by value". A module the driver imported
from a folder the workers do not have (a project folder on `sys.path`, a test module, a script
run from elsewhere, any real cluster) then fails on the executors with ModuleNotFoundError.

`UserCode.prepare(dag)` pickles what Spark will ship, vertex by vertex and edge by edge, with a
pickler that notes the module of everything pickled by reference. A *user module* among them
(not the standard library, not installed under site-packages or dist-packages, not jetspark,
pyspark or py4j) is registered with cloudpickle to be pickled by value, and the DAG is pickled
again, since code pickled by value can refer to further user modules, until no new one turns up.
So the executors run exactly the code the driver has in memory. A supplier that cannot be
pickled at all is reported at submit time, naming its vertex or edge.

`SparkEngine(ship=[...])` names code explicitly: a module object is pickled by value; a path (a
`.py` file, a package directory, a `.zip`) is added to the executors' `sys.path` with
`addPyFile` (`shipping.ship_path`), and the modules it provides stay pickled by reference, so
objects of its classes can also cross distributed edges (which pickle items by reference).
"""

from __future__ import annotations

import io
import os
import sys
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pyspark import SparkContext, cloudpickle
from pyspark.cloudpickle.cloudpickle import _should_pickle_by_reference

from jetspark.core.dag import DAG
from jetspark.core.errors import JobFailedError
from jetspark.core.spark.shipping import ship_path

Shippable = types.ModuleType | str | os.PathLike[str]
"""What `SparkEngine(ship=[...])` takes: a module object, or the path of code to ship."""

_NEVER_SHIPPED = frozenset({"__main__", "builtins", "jetspark", "pyspark", "py4j"})
"""Top-level packages that are never user modules: `__main__` is pickled by value anyway,
jetspark ships itself as a zip, pyspark and py4j are on every executor."""
_INSTALLED_DIRS = frozenset({"site-packages", "dist-packages"})


class _ModuleRecorder(cloudpickle.Pickler):
    """A cloudpickle pickler that notes the module of every function, class and module it
    pickles by reference (what the unpickling process must be able to import)."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self.modules: set[str] = set()

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.ModuleType):
            if _should_pickle_by_reference(obj):
                self.modules.add(obj.__name__)
        elif isinstance(obj, (type, types.FunctionType)):
            module = getattr(obj, "__module__", None)
            if isinstance(module, str) and _should_pickle_by_reference(obj):
                self.modules.add(module)
        return super().reducer_override(obj)


def modules_pickled_by_reference(obj: Any) -> set[str]:
    """The modules the process that unpickles `obj` (pickled as Spark does) must import.

    Raises what pickling raises when `obj` cannot be pickled.
    """
    recorder = _ModuleRecorder(io.BytesIO())
    recorder.dump(obj)
    return recorder.modules


def is_user_module(name: str) -> bool:
    """True for an imported module from a file that is neither the standard library nor an
    installed distribution (site-packages, dist-packages), nor jetspark, pyspark or py4j."""
    top = name.partition(".")[0]
    if top in _NEVER_SHIPPED or top in sys.stdlib_module_names:
        return False
    file = getattr(sys.modules.get(name), "__file__", None)
    if not file:
        return False
    return not _INSTALLED_DIRS.intersection(Path(file).resolve().parts)


def _is_pickled_by_value(name: str) -> bool:
    registered = cloudpickle.list_registry_pickle_by_value()
    parts = name.split(".")
    return any(".".join(parts[:i]) in registered for i in range(1, len(parts) + 1))


class UserCode:
    """What a SparkEngine ships of the user's code, on one SparkContext."""

    def __init__(self, context: SparkContext, ship: Iterable[Shippable] = ()) -> None:
        self._context = context
        self._paths: list[Path] = []
        for item in ship:
            if isinstance(item, types.ModuleType):
                cloudpickle.register_pickle_by_value(item)
            elif isinstance(item, (str, os.PathLike)):
                path = Path(item)
                if not path.exists():
                    raise ValueError(f"ship={str(item)!r}: no such file or directory")
                self._paths.append(path)
            else:
                raise TypeError(
                    f"ship=[...] takes modules and paths (str or os.PathLike), got "
                    f"{type(item).__name__}"
                )

    def prepare(self, dag: DAG) -> dict[str, set[str]]:
        """Makes the executors able to load what `dag` needs; returns, for every module the
        executors import to unpickle it, the vertices (or edges) whose code refers to it.

        The named paths are (re)shipped when their content changed; user modules are registered
        to be pickled by value. Raises JobFailedError naming the vertex or edge whose supplier,
        key function or partitioner cannot be pickled.
        """
        installed: set[str] = set()
        for path in self._paths:
            installed |= ship_path(self._context, path)
        for name in cloudpickle.list_registry_pickle_by_value():
            if name.partition(".")[0] in installed and name in sys.modules:
                cloudpickle.unregister_pickle_by_value(sys.modules[name])  # importable now
        while True:
            used = _modules_used(dag)
            new = {
                name
                for name in used
                if is_user_module(name)
                and name.partition(".")[0] not in installed
                and not _is_pickled_by_value(name)
            }
            if not new:
                return used
            for name in sorted(new):
                cloudpickle.register_pickle_by_value(sys.modules[name])


def _modules_used(dag: DAG) -> dict[str, set[str]]:
    """Module name -> the vertices and edges of `dag` whose pickles refer to it by reference."""
    used: dict[str, set[str]] = {}
    parts: list[tuple[str, str | None, str, Any]] = [
        (f"vertex '{v.name}'", v.name, "its processor supplier", v.meta_supplier)
        for v in dag.vertices()
    ]
    parts += [
        (
            f"edge '{e.source_name}:{e.source_ordinal} -> {e.dest_name}:{e.dest_ordinal}'",
            None,
            "its key function or partitioner",
            (e.key_fn, e.partitioner),
        )
        for e in dag.edges()
    ]
    for where, vertex, what, obj in parts:
        try:
            modules = modules_pickled_by_reference(obj)
        except Exception as error:
            failure = JobFailedError(
                f"{where}: {what} cannot be sent to the executors: {type(error).__name__}: {error}",
                vertex_name=vertex,
            )
            raise failure from error
        for module in modules:
            used.setdefault(module, set()).add(where)
    return used
