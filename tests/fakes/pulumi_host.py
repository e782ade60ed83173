"""How Pulumi's Python language host runs a program: from its own folder, with only that folder
importable (`runpy.run_path` of the folder), not the repository root."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The project's top-level packages; imported fresh inside the host's view, restored after it.
ROOTS = ("infra", "components")


@contextmanager
def pulumi_host(program: Path) -> Iterator[None]:
    """cwd is `program`, the repository root is off `sys.path`, and the project's modules are
    imported anew; everything is restored on exit."""
    saved_path, saved_cwd = list(sys.path), os.getcwd()
    saved_modules = {n: m for n, m in sys.modules.items() if n.split(".")[0] in ROOTS}
    for name in saved_modules:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO]
    os.chdir(program)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        for name in [n for n in sys.modules if n.split(".")[0] in ROOTS]:
            del sys.modules[name]
        sys.modules.update(saved_modules)
