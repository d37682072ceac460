"""jetspark's benchmarks: `python -m bench` runs every comparison and writes the table.

The pytest-benchmark suites (`bench_*.py`) run by path: `python -m pytest bench/bench_partitioner.py
--benchmark-only`. See bench/run.py for the runner and docs/benchmarks.md for the results.
"""
