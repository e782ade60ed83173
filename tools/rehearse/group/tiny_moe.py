"""The tiny mixture of experts that stands in for gemma-4-26B-A4B-it, and the planner's plan of it.

As `tiny_plan` does for the dense model, this keeps the MoE model's attention layout in lowest
terms (5 sliding : 1 full, sliding 8 KV heads : full 2, head dims 256 : 512, so 4 : 1 KV heads
and 32 : 64 dims here) over one pattern period per pipeline rank, and adds a small Gemma 4 MoE
block: `TINY_EXPERTS` experts of `TINY_EXPERT_WIDTH`, `TINY_TOP_K` per token, beside the dense
MLP, as the 26B has 128 experts of 704, 8 per token, beside a dense MLP of 2112 (the config keys
`enable_moe_block`, `num_experts`, `top_k_experts`, `moe_intermediate_size`, which transformers'
`Gemma4TextConfig` and vLLM 0.31's `models/gemma4.py` read, as `moe_probe.moe_slice_config`
writes them). Random weights and the tiny dense model's locally trained tokenizer
(`tiny_checkpoint.build`).

The planner sizes it from a `modelProfile` with its experts and a dense `decodeReference`
(gemma-4-12B-it, whose calibrated decode the measured MoE ratio scales; `infra.plan.moe`), so its
KV cache tokens are the planner's own arithmetic on the same attention layout.

Pure apart from the reads of a built model in `plan_tiny_moe`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from infra.plan import catalog
from infra.plan.config import StackConfig
from infra.plan.loading import load_config
from infra.plan.sizing import Plan, plan
from tools.rehearse.group.tiny_plan import (
    checkpoint_bytes,
    model_config,
    tiny_model_config,
    tiny_profile,
    tiny_stack_values,
)

#: The catalogue model the tiny MoE rehearses, and the dense one its decode is scaled from.
MOE_MODEL = "google/gemma-4-26B-A4B-it"
DENSE_REFERENCE = "google/gemma-4-12B-it"
#: The served name of the tiny MoE model.
TINY_MOE_NAME = "rehearsal/tiny-gemma4-moe"
TINY_EXPERTS = 4
TINY_TOP_K = 2
TINY_EXPERT_WIDTH = 64


def tiny_moe_config(stages: int, profile: catalog.ModelProfile | None = None) -> dict[str, Any]:
    """The `config.json` of the tiny MoE model rehearsing `profile` (default the 26B) over
    `stages` pipeline ranks: `tiny_plan.tiny_model_config`'s attention layout, plus the MoE
    block."""
    profile = profile or catalog.MODELS[MOE_MODEL]
    if not profile.is_moe:
        raise ValueError(f"{profile.name} has no experts: rehearse it with tiny_plan")
    config = tiny_model_config(profile, stages)
    config.update(
        enable_moe_block=True,
        num_experts=TINY_EXPERTS,
        top_k_experts=TINY_TOP_K,
        moe_intermediate_size=TINY_EXPERT_WIDTH,
    )
    return config


def tiny_moe_profile(config: Mapping[str, Any], weights_bytes: int) -> dict[str, Any]:
    """The stack's `modelProfile` of a built tiny MoE model: the dense fields from its config
    (`tiny_plan.tiny_profile`), its experts, and the dense model its decode is scaled from."""
    if not config.get("enable_moe_block"):
        raise ValueError("config has no MoE block (enable_moe_block is not set)")
    return {
        **tiny_profile(config, weights_bytes),
        "attentionHeads": config["num_attention_heads"],
        "intermediateSize": config["intermediate_size"],
        "experts": config["num_experts"],
        "expertsPerToken": config["top_k_experts"],
        "expertIntermediateSize": config["moe_intermediate_size"],
        "decodeReference": DENSE_REFERENCE,
    }


def tiny_moe_values(
    stack_values: Mapping[str, Any],
    config: Mapping[str, Any],
    weights_bytes: int,
    stages: int,
    weights: str = "bf16",
) -> dict[str, Any]:
    """The stack's values with the tiny MoE model, at `stages` ranks and in `weights`."""
    profile = tiny_moe_profile(config, weights_bytes)
    values = tiny_stack_values(stack_values, profile, stages)
    return {**values, "model": TINY_MOE_NAME, "weights": weights}


def plan_tiny_moe(
    stack_values: Mapping[str, Any], model_dir: Path, stages: int, weights: str = "bf16"
) -> tuple[StackConfig, Plan]:
    """Config and plan of the built tiny MoE model (its bf16 checkpoint), through the stack's
    config model and planner; ConfigError when the planner refuses it (a format with no MoE
    kernel, `infra.plan.moe_measured.NOT_MEASURED`)."""
    values = tiny_moe_values(
        stack_values, model_config(model_dir), checkpoint_bytes(model_dir), stages, weights
    )
    cfg = load_config(values)
    return cfg, plan(cfg, "rehearsal")
