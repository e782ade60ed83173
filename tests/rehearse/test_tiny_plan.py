"""The tiny model keeps the stack profile's layer pattern and ratios on every rank, and the
planner sees it with the same KV layout as the 12B (`tools.rehearse.group.tiny_plan`)."""

from __future__ import annotations

import dataclasses

import pytest

from infra.plan.catalog import ModelProfile
from infra.plan.config import ConfigError
from infra.plan.kv_cache import group_kv, stage_layers
from infra.plan.loading import load_config
from infra.plan.stackfile import stack_values
from tests.rehearse.support import TINY_CHECKPOINT_BYTES, TWELVE_B
from tools.rehearse.group import tiny_plan
from tools.rehearse.group.tiny_checkpoint import FULL, SLIDING, tiny_text_config
from tools.rehearse.group.tiny_plan import tiny_model_config, tiny_profile, tiny_stack_values


def per_rank_kinds(config: dict, stages: int) -> list[tuple[int, int]]:
    kinds = config["layer_types"]
    return [
        (sum(kinds[i] == SLIDING for i in layers), sum(kinds[i] == FULL for i in layers))
        for layers in stage_layers(config["num_hidden_layers"], stages)
    ]


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_tiny_model_keeps_the_12b_pattern_and_ratios_on_every_rank(stages: int) -> None:
    config = tiny_model_config(TWELVE_B, stages)
    period = TWELVE_B.sliding_per_full + 1
    assert config["num_hidden_layers"] == stages * period
    assert per_rank_kinds(config, stages) == [(TWELVE_B.sliding_per_full, 1)] * stages
    # 8 : 1 KV heads and 256 : 512 head dims, as the 12B.
    assert config["num_key_value_heads"] * TWELVE_B.full_kv_heads == (
        config["num_global_key_value_heads"] * TWELVE_B.sliding_kv_heads
    )
    assert config["head_dim"] * TWELVE_B.full_head_dim == (
        config["global_head_dim"] * TWELVE_B.sliding_head_dim
    )
    assert config["sliding_window"] < tiny_plan.REHEARSAL_MAX_MODEL_LEN


def test_tiny_model_for_the_dev_split_is_the_model_the_fixtures_were_logged_with() -> None:
    assert tiny_model_config(TWELVE_B, 2) == tiny_text_config()


def test_tiny_model_reduces_another_profiles_ratios() -> None:
    other = dataclasses.replace(
        TWELVE_B,
        sliding_per_full=3,
        sliding_kv_heads=4,
        full_kv_heads=2,
        sliding_head_dim=128,
        full_head_dim=384,
    )
    config = tiny_model_config(other, 2)
    assert (config["num_key_value_heads"], config["num_global_key_value_heads"]) == (2, 1)
    assert (config["head_dim"], config["global_head_dim"]) == (32, 96)
    assert per_rank_kinds(config, 2) == [(3, 1), (3, 1)]


def test_tiny_model_needs_sliding_layers() -> None:
    flat = dataclasses.replace(TWELVE_B, sliding_per_full=0)
    with pytest.raises(ConfigError) as error:
        tiny_model_config(flat, 2)
    assert str(error.value) == (
        "`modelProfile.slidingPerFull` is 0, and the rehearsal's Gemma 4 builder needs at least "
        "one sliding layer per full layer; rehearse a model with a sliding:full pattern, or skip "
        "the rehearsal"
    )


def test_tiny_profile_gives_the_planner_the_same_kv_layout_as_the_12b() -> None:
    config = tiny_model_config(TWELVE_B, 2)
    profile = load_config(
        tiny_stack_values(stack_values("dev", {}), tiny_profile(config, TINY_CHECKPOINT_BYTES), 2)
    ).profile()
    assert isinstance(profile, ModelProfile)
    assert profile.name == tiny_plan.TINY_MODEL_NAME
    assert profile.checkpoint_bytes == TINY_CHECKPOINT_BYTES
    tiny_kv, real_kv = group_kv(profile, 2), group_kv(TWELVE_B, 2)
    assert len(tiny_kv.groups) == len(real_kv.groups) == 6
    assert [g.kind for g in tiny_kv.groups] == [g.kind for g in real_kv.groups]
    # A full layer's block holds 4x the tokens of a sliding one, as for the 12B.
    assert [g.block_tokens for g in tiny_kv.groups] == [g.block_tokens for g in real_kv.groups]


def test_model_cache_key_follows_the_config() -> None:
    config = tiny_model_config(TWELVE_B, 2)
    assert tiny_plan.model_cache_key(config) == tiny_plan.model_cache_key(dict(config))
    assert tiny_plan.model_cache_key(config) != tiny_plan.model_cache_key(
        tiny_model_config(TWELVE_B, 3)
    )
    assert tiny_plan.model_cache_key(config, seed=1) != tiny_plan.model_cache_key(config)


@pytest.mark.parametrize("weights", ["int8", "int4"])
def test_a_quantized_stack_rehearses_one_rank_with_single_node_arguments(weights: str) -> None:
    """int8 and int4 fit one m7g.2xlarge: the stack plans one rank, and the tiny group, its
    command line and its launches follow with one rank and no group wiring."""
    from infra.adapters.wiring import server_spec
    from infra.plan.sizing import plan
    from tools.rehearse.group.ranks import rank_launches

    values = stack_values("dev", {"weights": weights})
    real = plan(load_config(values))
    assert real.stages == 1
    config = tiny_model_config(TWELVE_B, real.stages)
    profile = tiny_profile(config, TINY_CHECKPOINT_BYTES)
    cfg = load_config(tiny_stack_values(values, profile, real.stages))
    tiny_plan = plan(cfg, "rehearsal")
    assert (tiny_plan.stages, tiny_plan.weights) == (1, weights)
    (launch,) = rank_launches(server_spec(cfg, tiny_plan).engine(), "vllm", "/m", (8000, 8001), "k")
    assert "--pipeline-parallel-size=1" in launch.argv and "--headless" not in launch.argv
    assert not any(a.startswith(("--nnodes", "--node-rank", "--master")) for a in launch.argv)
