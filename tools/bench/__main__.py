"""`python -m tools.bench`: the benchmark client's command line (see `tools.bench.cli`)."""

import sys

from tools.bench.cli import main

sys.exit(main())
