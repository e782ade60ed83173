"""The optional layers, each selected by one stack key: deleting a layer's files leaves the
minimal stack planning and running (issue 44). Its key off on dev gives minimal's part of it:
test_minimal_stack.py (frontDoor), test_program.py (chatPage), test_monitoring_program.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.program.test_minimal_stack import _COUNT

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Layer:
    """An optional layer: the key that selects it, the value that turns it off, and as glob
    patterns (space-separated, from the repository root) its product files and its own tests."""

    key: str
    off: Any
    product: str
    tests: str

    def files(self, root: Path, which: str) -> list[Path]:
        found = [p for pattern in getattr(self, which).split() for p in root.glob(pattern)]
        assert found and all(p.exists() for p in found), f"{self.key} {which}: {found}"
        return found


LAYERS: dict[str, Layer] = {
    "gatekeeper": Layer(
        "frontDoor",
        "vllm-key",
        "infra/plan/frontdoor.py components/manifests/gatekeeper*",
        "tests/plan/test_frontdoor.py tests/components/test_gatekeeper*.py",
    ),
    "chat page": Layer("chatPage", False, "components/manifests/chat", "tests/*/test_chat_page.py"),
    # The elasticity keys turn it on; a fixed stack sets `replicas` instead.
    "elastic": Layer(
        "minGroups",
        None,
        "infra/*/elastic*.py infra/plan/sleep.py components/autoscaling.py components/manifests/"
        "door.py components/manifests/asleep.* components/manifests/scaling.py",
        "tests/*/test_elastic*.py tests/components/test_door.py tests/components/test_scaling.py",
    ),
    "monitoring": Layer(
        "monitoring",
        False,
        "infra/*/monitoring*.py infra/plan/watching.py components/monitoring.py "
        "components/watch.py components/manifests/metrics.py",
        "tests/*/test_monitoring*.py tests/components/test_metrics_collector.py "
        "tests/components/test_watch.py",
    ),
    "quantize": Layer(
        "weightsSource",
        "hub",
        "infra/quantize infra/*/quantize*.py components/manifests/quantize.py",
        "tests/quantize tests/components/test_quantize_job.py",
    ),
    "existing cluster": Layer(
        "existingCluster",
        None,
        "infra/*/existing_cluster.py infra/plan/existing*.py components/existing_cluster.py",
        "tests/program/test_existing_cluster.py",
    ),
    "moe": Layer("model", "google/gemma-4-12B-it", "infra/plan/moe*.py", "tests/plan/test_moe*.py"),
}

#: What the copy needs to plan and to run the program under the mocks.
TREE = ("infra", "components", "policies", "stacks", "Pulumi.yaml", "tests/fakes", "tests/program")


def _without(layer: Layer, root: Path) -> Path:
    for name in TREE:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, root / name)
    (root / "tests" / "__init__.py").touch()
    for path in layer.files(root, "product"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return root


@pytest.mark.parametrize("name", LAYERS)
def test_deleting_a_layer_leaves_the_minimal_stack_planning_and_running(
    name: str, tmp_path: Path
) -> None:
    LAYERS[name].files(REPO, "tests")  # the registry names its real tests
    root = _without(LAYERS[name], tmp_path)
    for command in (["-m", "infra.plan", "--stack", "minimal"], ["-c", _COUNT, "minimal"]):
        result = subprocess.run(
            [sys.executable, "-B", *command], cwd=root, capture_output=True, text=True
        )
        assert result.returncode == 0, f"{name} deleted, {command[:2]}: {result.stderr[-3000:]}"
