"""Bounded jobs without a guarantee on Spark: the DAG cut into RDD stages joined by shuffles,
one `mapPartitionsWithIndex` task per member and stage (run.py is the driver's side)."""
