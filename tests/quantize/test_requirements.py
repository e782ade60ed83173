"""The quantizer's and lm-eval's virtualenvs: every package pinned exactly, and the quantizer on
the same torch and transformers as the vLLM it makes checkpoints for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools import venvs
from tools.venvs import (
    BUILT_SIZE,
    DEFAULT_REQUIREMENTS,
    GIB,
    QUALITY_REQUIREMENTS,
    QUANTIZE_REQUIREMENTS,
    RehearsalEnvError,
    disk_shortfall,
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


@pytest.mark.parametrize("what", ["rehearsal env", "quantize env", "quality env"])
def test_a_build_is_refused_in_one_line_only_when_the_disk_cannot_hold_it(what: str) -> None:
    size = BUILT_SIZE[what]
    assert disk_shortfall(size, what) is None
    refusal = disk_shortfall(size - GIB / 10, what)
    assert refusal is not None and "\n" not in refusal
    assert refusal.startswith(f"{what}: ") and "free disk space" in refusal


def test_the_build_stops_before_its_first_step_on_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(venvs.shutil, "disk_usage", lambda _path: usage(10, 10, 0))
    ran: list[str] = []
    with pytest.raises(RehearsalEnvError, match="GiB free"):
        venvs._ensure(
            tmp_path / "env",
            {"k": "v"},
            [("step", lambda: ran.append("step"))],
            "quality env",
            lambda _line: None,
        )
    assert ran == []
