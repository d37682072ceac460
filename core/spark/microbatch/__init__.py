"""Jobs as micro-batches on Spark: each batch one staged Spark job that restores the last
snapshot and ends with the next (run.py is the driver's side, batch.py a task's)."""
