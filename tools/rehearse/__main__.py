"""`python -m tools.rehearse`: the rehearsal's command line (see `tools.rehearse.cli`)."""

import sys

from tools.rehearse.cli import main

sys.exit(main())
