"""`python -m infra.quantize`: see `infra.quantize.cli`."""

import sys

from infra.quantize.cli import main

sys.exit(main())
