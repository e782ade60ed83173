"""`python -m infra.plan`: the planner's command line (see `infra.adapters.cli`)."""

import os
import sys

from infra.adapters.cli import main

try:
    code = main()
    sys.stdout.flush()
except BrokenPipeError:
    # `python -m infra.plan | head` reads the verdict and closes the pipe: not an error.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    code = 0
sys.exit(code)
