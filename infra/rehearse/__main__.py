"""`python -m infra.rehearse`: the rehearsal's command line (see `infra.rehearse.cli`)."""

import sys

from infra.rehearse.cli import main

sys.exit(main())
