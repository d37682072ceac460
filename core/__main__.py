"""`python -m jetspark.core`: the `jetspark` command line."""

from jetspark.core.cli import main

raise SystemExit(main())
