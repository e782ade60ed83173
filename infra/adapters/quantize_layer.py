"""The quantize layer's wiring (`weightsSource: quantize`): the plan's quantize Job, shipping the
quantizer from this checkout. The program and the render load it only for such a stack."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from components.manifests.quantize import QuantizeSpec
from infra.plan.sizing import Plan
from infra.plan.stackfile import REPO

#: What the quantize Job ships of this repository: the quantizer's package, the package root it
#: imports from, and its pinned requirements.
QUANTIZER_FILES = ("infra/__init__.py", "infra/quantize/*.py", "requirements-quantize.txt")


def quantizer_files(root: Path) -> dict[str, str]:
    """The quantizer's source and requirements, relative path -> text."""
    files = {}
    for pattern in QUANTIZER_FILES:
        found = sorted(root.glob(pattern))
        if not found:
            raise FileNotFoundError(f"{root / pattern} is missing: the quantize Job ships it")
        files |= {path.relative_to(root).as_posix(): path.read_text() for path in found}
    return files


def quantize_spec(plan: Plan) -> QuantizeSpec | None:
    """The plan's quantize Job, shipping the quantizer from this checkout."""
    if plan.quantize is None:
        return None
    return replace(plan.quantize, files=quantizer_files(REPO))
