"""The quantize Job's own script, run here against a fake hub and a fake quantizer: it makes the
checkpoint once, copies it to every other rank's volume with its hashes checked, and a second run
with the same inputs does nothing."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from components.manifests.quantize import quantize_job
from tests import builders

REVISION = "707f0a3b8a3c7ad586ed01e27eafbad8a27dd0f7"

_FAKE_HUB = """
import os
from pathlib import Path

def snapshot_download(repo, revision=None, local_dir=None, allow_patterns=None):
    Path(local_dir).mkdir(parents=True, exist_ok=True)
    (Path(local_dir) / "model.safetensors").write_bytes(b"bf16" * 1000)
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(f"download {repo}@{revision}\\n")
"""

# Stands in for `python -m infra.quantize`: the checkpoint and, last, its marker.
_FAKE_QUANTIZER = """
import argparse, hashlib, json, os
from pathlib import Path

parser = argparse.ArgumentParser()
for flag in ("--source", "--scheme", "--out", "--source-revision"):
    parser.add_argument(flag)
args = parser.parse_args()
if os.environ.get("FAKE_REFUSE"):
    raise SystemExit(2)  # the quantizer's exit code for input it refuses
out = Path(args.out)
(out / "model.safetensors").write_bytes(b"int8" * 500)
(out / "config.json").write_text("{}")
files = {p.name: {"bytes": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
         for p in sorted(out.iterdir())}
marker = {"scheme": args.scheme, "sourceRevision": args.source_revision, "files": files}
(out / "quantized.json").write_text(json.dumps(marker))
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(f"quantize {args.scheme} {args.source_revision}\\n")
"""


def _job() -> dict[str, Any]:
    """The Job of an int8 server whose two ranks' volumes each get the checkpoint."""
    spec = builders.server_spec(
        weights="int8",
        produced_checkpoint=True,
        persistent_models=True,
        stages=2,
        replicas=1,
        model_revision=REVISION,
    )
    return quantize_job(spec, builders.quantize_spec())


def _run(tmp_path: Path, job: dict[str, Any], **fake: str) -> subprocess.CompletedProcess[str]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    fakes = tmp_path / "fakes"
    (fakes / "huggingface_hub").mkdir(parents=True, exist_ok=True)
    (fakes / "huggingface_hub" / "__init__.py").write_text(_FAKE_HUB)
    code = tmp_path / "code"
    (code / "infra" / "quantize").mkdir(parents=True, exist_ok=True)
    (code / "infra" / "__init__.py").write_text("")
    (code / "infra" / "quantize" / "__init__.py").write_text("")
    (code / "infra" / "quantize" / "__main__.py").write_text(_FAKE_QUANTIZER)
    (code / "requirements-quantize.txt").write_text("")
    outs = [tmp_path / "out" / str(i) / "ckpt" for i in range(len(env["OUT_DIRS"].split(":")))]
    env |= {
        "OUT_DIRS": ":".join(map(str, outs)),
        "SCRATCH": str(tmp_path / "scratch"),
        "CODE": str(code),
        "REQUIREMENTS": str(code / "requirements-quantize.txt"),
        "HOME": str(tmp_path / "scratch"),
        "TMPDIR": str(tmp_path),
    }
    script = container["command"][2].replace("python3 -", f"{sys.executable} -", 1)
    return subprocess.run(
        ["/bin/sh", "-c", script],
        env={
            **os.environ,
            **env,
            **fake,
            "PYTHONPATH": str(fakes),
            "FAKE_LOG": str(tmp_path / "log"),
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
    )


def test_the_job_makes_the_checkpoint_once_copies_it_checked_and_remakes_a_lost_copy(
    tmp_path: Path,
) -> None:
    job = _job()
    first = _run(tmp_path, job)
    assert first.returncode == 0, first.stdout + first.stderr
    log = (tmp_path / "log").read_text().splitlines()
    assert log == [f"download google/gemma-4-12B-it@{REVISION}", f"quantize int8 {REVISION}"]
    made, copy = (tmp_path / "out" / str(i) / "ckpt" for i in (0, 1))
    marker = json.loads((made / "quantized.json").read_text())
    for name, entry in marker["files"].items():
        assert hashlib.sha256((copy / name).read_bytes()).hexdigest() == entry["sha256"], name
    assert (copy / "quantized.json").read_text() == (made / "quantized.json").read_text()
    assert not (tmp_path / "scratch" / "source").exists(), "the bf16 download is removed"

    again = _run(tmp_path, job)
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout
    assert len((tmp_path / "log").read_text().splitlines()) == 2, "no second download or run"
    # A lost copy is made again without quantizing.
    (tmp_path / "out" / "1" / "ckpt" / "model.safetensors").write_bytes(b"short")
    again = _run(tmp_path, job)
    assert again.returncode == 0, again.stderr
    assert "copying to" in again.stdout
    assert len((tmp_path / "log").read_text().splitlines()) == 2


def test_a_disruption_takes_no_retry_and_a_refusal_is_the_pods_exit_code(tmp_path: Path) -> None:
    job = _job()
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"  # a policy requires it
    assert job["spec"]["podFailurePolicy"]["rules"] == [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    ]
    # The quantizer's refusal (2) is the pod's exit code, in its log as the quantizer printed it.
    refused = _run(tmp_path, job, FAKE_REFUSE="1")
    assert refused.returncode == 2, refused.stdout + refused.stderr


def test_the_job_is_named_by_its_inputs_and_checks_no_kernel_it_needs_not() -> None:
    spec, job = builders.server_spec(weights="int8"), builders.quantize_spec()
    name = quantize_job(spec, job)["metadata"]["name"]
    assert name == quantize_job(spec, job)["metadata"]["name"]
    moved = replace(spec, model_revision="f" * 40)
    assert quantize_job(moved, job)["metadata"]["name"] != name
    # A format that needs no op gets no kernel check.
    assert "initContainers" not in quantize_job(spec, job)["spec"]["template"]["spec"]


def _fake_vllm(root: Path, ops: list[str]) -> Path:
    """A `torch` whose `torch.ops._C` gets `ops` only once vLLM's platform loads its kernels
    (`current_platform.import_kernels`, which picks the library built for the CPU)."""
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text(
        "import types\nops = types.SimpleNamespace(_C=types.SimpleNamespace())\n"
    )
    (root / "vllm" / "platforms").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    (root / "vllm" / "platforms" / "__init__.py").write_text(
        "import types, torch\n"
        "def _load():\n"
        + "".join(f"    setattr(torch.ops._C, {op!r}, object())\n" for op in ops)
        + "    return None\n"
        "current_platform = types.SimpleNamespace(import_kernels=_load)\n"
    )
    return root


def _kernel_check(root: Path, required: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(root), "REQUIRED_OPS": required, "SCHEME": "int8"}
    command = quantize_job(
        builders.server_spec(weights="int8"), builders.quantize_spec(required_ops=(required,))
    )["spec"]["template"]["spec"]["initContainers"][0]["command"]
    assert command[:2] == ["python3", "-c"]
    return subprocess.run(
        [sys.executable, "-c", command[2]], env=env, capture_output=True, text=True, check=False
    )


def test_a_job_for_a_format_with_ops_checks_the_image_before_anything_else(
    tmp_path: Path,
) -> None:
    """The check is the Job's first container, on the serving image: it passes where the
    image's vLLM registered the op and stops in one line naming it, and the fix, where not."""
    spec = builders.server_spec(weights="int8")
    job = quantize_job(spec, builders.quantize_spec(required_ops=("cpu_fused_moe_int8",)))
    (check,) = job["spec"]["template"]["spec"]["initContainers"]
    assert (check["name"], check["image"]) == ("kernel-check", spec.image)
    assert {"name": "REQUIRED_OPS", "value": "cpu_fused_moe_int8"} in check["env"]
    assert check["resources"]["requests"] == check["resources"]["limits"]
    present = _kernel_check(
        _fake_vllm(tmp_path / "with", ["cpu_fused_moe_int8"]), "cpu_fused_moe_int8"
    )
    assert (present.returncode, present.stdout) == (0, "the image's vLLM has cpu_fused_moe_int8\n")
    absent = _kernel_check(_fake_vllm(tmp_path / "without", ["onednn_mm"]), "cpu_fused_moe_int8")
    assert absent.returncode == 1 and absent.stderr.count("\n") == 1
    assert absent.stderr.startswith("the image's vLLM has no cpu_fused_moe_int8")
    assert "set `vllmImage`" in absent.stderr
