"""The picture of a DAG in the live view: Graphviz's layout of `dag.to_dot()` (the `dot`
program, Debian package `graphviz`) as SVG, or jetspark's own layered layout without it."""

from __future__ import annotations

import logging
import shutil
import subprocess

from jetspark.core.dag import DAG
from jetspark.core.view.layered import layered_svg

_log = logging.getLogger("jetspark.view")

DOT_TIMEOUT_SECONDS = 30.0


def dag_svg(dag: DAG, dot: str = "dot") -> str:
    """An `<svg>` element picturing `dag`; each vertex is a `g.node` whose `<title>` is its
    name. `dot` is the Graphviz program to run; where it is missing or fails, the layered
    layout draws the DAG instead, and a warning says so."""
    program = shutil.which(dot)
    if program is None:
        _log.warning(
            "Graphviz's %s is not on PATH (Debian: apt-get install graphviz): the job view "
            "draws DAG '%s' with its own layered layout",
            dot,
            dag.name,
        )
        return layered_svg(dag)
    try:
        result = subprocess.run(
            [program, "-Tsvg"],
            input=dag.to_dot(),
            capture_output=True,
            text=True,
            timeout=DOT_TIMEOUT_SECONDS,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", None) or error
        _log.warning(
            "Graphviz's %s failed on DAG '%s' (%s): the job view draws it with its own "
            "layered layout",
            program,
            dag.name,
            str(detail).strip(),
        )
        return layered_svg(dag)
    svg = result.stdout
    return svg[svg.index("<svg") :]
