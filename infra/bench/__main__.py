"""`python -m infra.bench`: the benchmark client's command line (see `infra.bench.cli`)."""

import sys

from infra.bench.cli import main

sys.exit(main())
