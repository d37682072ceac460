"""Continuous jobs on Spark, Jet's own execution model: every member a long-running task of one
barrier stage, records streaming between members as they are produced, snapshots in-band
(run.py is the driver's side, member.py a member's task)."""
