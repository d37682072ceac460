"""Runs the `jetspark` command line and prints, last, a JSON line with the wall time and the
peak RSS of this process (the Spark driver's Python side, not the JVM or the workers)."""

from __future__ import annotations

import json
import resource
import sys
import time

from jetspark.core.cli import main

if __name__ == "__main__":
    started = time.perf_counter()
    code = main(sys.argv[1:])
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_rss_mb": peak}))
    sys.exit(code)
