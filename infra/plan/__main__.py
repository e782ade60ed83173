"""`python -m infra.plan`: the planner's command line (see `infra.plan.cli`)."""

import sys

from infra.plan.cli import main

sys.exit(main())
