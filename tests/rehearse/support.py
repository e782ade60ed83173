"""What the rehearsal tests share: the recorded vLLM logs, the 12B's profile, the real and tiny
plans of a stack as the rehearsal makes them (without building the model), and `vllm serve` argv
read as flags, and a wait for a condition.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from infra.plan.catalog import MODELS
from infra.plan.config import StackConfig
from infra.plan.loading import load_config
from infra.plan.sizing import Plan, plan
from infra.plan.stackfile import stack_values
from tests import builders
from tools.rehearse.group.tiny_plan import tiny_model_config, tiny_profile, tiny_stack_values
from tools.rehearse.group.workspace import poll

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"
TWELVE_B = MODELS["google/gemma-4-12B-it"]
#: Size of the default tiny model's safetensors file, as built for the fixtures.
TINY_CHECKPOINT_BYTES = 2_860_264


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def tiny_plan_for(stack: str) -> tuple[Plan, Plan, StackConfig, StackConfig]:
    """The real plan and the tiny plan of a stack, as the rehearsal makes them (no build)."""
    cfg, real = builders.planned(stack)
    config = tiny_model_config(cfg.profile(), real.stages)
    values = stack_values(stack, {})
    tiny_cfg = load_config(
        tiny_stack_values(values, tiny_profile(config, TINY_CHECKPOINT_BYTES), real.stages)
    )
    return real, plan(tiny_cfg, "rehearsal"), cfg, tiny_cfg


def flags(argv: list[str]) -> dict[str, str]:
    """`vllm serve` argv as {flag: value}; the positional model is "<model>"."""
    assert argv[0] == "serve"
    parsed = {"<model>": argv[1]}
    for arg in argv[2:]:
        key, _, value = arg.partition("=")
        assert key not in parsed, f"{key} given twice in {argv}"
        parsed[key] = value
    return parsed


def until(condition: Callable[[], bool], seconds: float = 10) -> bool:
    """Whether `condition` holds within `seconds`, asked every 50 ms."""
    return bool(poll(condition, bool, seconds))
