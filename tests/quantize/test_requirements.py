"""The quantizer's and lm-eval's virtualenvs: every package pinned exactly, and the quantizer on
the same torch and transformers as the vLLM it makes checkpoints for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.venvs import (
    DEFAULT_REQUIREMENTS,
    QUALITY_REQUIREMENTS,
    QUANTIZE_REQUIREMENTS,
    pinned_version,
)

PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[^\s=]+$")


@pytest.mark.parametrize("path", [QUANTIZE_REQUIREMENTS, QUALITY_REQUIREMENTS])
def test_every_package_is_pinned_exactly(path: Path) -> None:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines
    assert [ln for ln in lines if not PIN.match(ln)] == []


def test_the_quantizer_and_lm_eval_are_pinned() -> None:
    assert pinned_version(QUANTIZE_REQUIREMENTS.read_text(), "llmcompressor") == "0.14.0.1"
    assert pinned_version(QUALITY_REQUIREMENTS.read_text(), "lm-eval") == "0.4.13"


@pytest.mark.parametrize("package", ["torch", "transformers"])
def test_the_quantizer_runs_the_torch_and_transformers_vllm_runs(package: str) -> None:
    vllm = pinned_version(DEFAULT_REQUIREMENTS.read_text(), package)
    assert pinned_version(QUANTIZE_REQUIREMENTS.read_text(), package) == vllm
