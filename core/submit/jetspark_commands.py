"""The `jetspark` commands as a script for spark-submit, which runs Python applications from a
.py file: `spark-submit [options] "$(jetspark --submit-script)" COMMAND [ARGS]`. It sits in a
folder of its own, so that the folder Python puts first on sys.path holds nothing else."""

from jetspark.core.cli import main

raise SystemExit(main())
