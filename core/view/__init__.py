"""The live job view: a page served by the driver showing a job's DAG and live figures, and
the same figures at `/metrics` for Prometheus (docs/view.md).

    view = JobView.serve()             # 127.0.0.1, any free port
    engine = LocalEngine(job_view=view)  # or SparkEngine(job_view=view); or view.watch(job, dag)
    print(view.url)
"""

from jetspark.core.view.server import JobView

__all__ = ["JobView"]
