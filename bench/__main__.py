"""`python -m bench`: runs the benchmarks (see bench/run.py)."""

from bench.run import main

main()
