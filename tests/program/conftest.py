"""Fixtures for running the program as Pulumi's Python host runs it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest

from tests.program.harness import PROGRAM, REPO


@pytest.fixture
def exports(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    recorded: dict[str, Any] = {}
    monkeypatch.setattr(pulumi, "export", lambda name, value: recorded.__setitem__(name, value))
    return recorded


@pytest.fixture
def as_pulumi_host() -> Iterator[None]:
    """The host's view: cwd is the program folder, the repository root is not importable."""
    saved_path, saved_cwd = list(sys.path), os.getcwd()
    saved_modules = {
        name: mod
        for name, mod in sys.modules.items()
        if name.split(".")[0] in ("infra", "components")
    }
    for name in saved_modules:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO]
    os.chdir(PROGRAM)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        for name in [n for n in sys.modules if n.split(".")[0] in ("infra", "components")]:
            del sys.modules[name]
        sys.modules.update(saved_modules)
