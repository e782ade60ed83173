"""The tiny MoE keeps gemma-4-26B-A4B-it's attention layout and has a MoE block; the planner
plans it from a `modelProfile` with experts and refuses what it cannot rate
(`tools.rehearse.group.tiny_moe`, `tools.rehearse.measure.moe_group`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.plan.catalog import MODELS
from infra.plan.config import ConfigError
from infra.plan.kv_cache import group_kv
from infra.plan.loading import load_config
from infra.plan.sizing import plan
from infra.plan.stackfile import stack_values
from tests.rehearse.support import TINY_CHECKPOINT_BYTES, TWELVE_B
from tools.rehearse.group import tiny_moe
from tools.rehearse.group.tiny_checkpoint import FULL, SLIDING
from tools.rehearse.measure import moe_group

MOE = MODELS["google/gemma-4-26B-A4B-it"]


@pytest.mark.parametrize("stages", [1, 2])
def test_tiny_moe_keeps_the_26b_attention_ratios_and_has_a_moe_block(stages: int) -> None:
    config = tiny_moe.tiny_moe_config(stages)
    assert config["num_hidden_layers"] == 6 * stages
    assert config["layer_types"] == ([SLIDING] * 5 + [FULL]) * stages
    # The 26B's 8 : 2 KV heads and 256 : 512 head dims, in lowest terms.
    assert (config["num_key_value_heads"], config["num_global_key_value_heads"]) == (4, 1)
    assert (config["head_dim"], config["global_head_dim"]) == (32, 64)
    assert config["enable_moe_block"] is True
    assert (config["num_experts"], config["top_k_experts"]) == (4, 2)
    assert config["moe_intermediate_size"] == tiny_moe.TINY_EXPERT_WIDTH


def test_a_dense_profile_is_not_a_tiny_moe() -> None:
    with pytest.raises(ValueError, match="has no experts"):
        tiny_moe.tiny_moe_config(1, TWELVE_B)


def test_the_profile_carries_the_experts_and_the_dense_reference() -> None:
    config = tiny_moe.tiny_moe_config(2)
    profile = load_config(
        tiny_moe.tiny_moe_values(stack_values("dev", {}), config, TINY_CHECKPOINT_BYTES, 2)
    ).profile()
    assert profile.name == tiny_moe.TINY_MOE_NAME
    assert profile.is_moe
    assert (profile.experts, profile.experts_per_token) == (4, 2)
    assert profile.expert_intermediate_size == 64
    assert profile.decode_reference == "google/gemma-4-12B-it"
    # The 26B's KV groups: block sizes in the same ratio, one group per kind and rank.
    tiny_kv, real_kv = group_kv(profile, 2), group_kv(MOE, 2)
    assert [g.kind for g in tiny_kv.groups] == [g.kind for g in real_kv.groups]
    assert [g.block_tokens for g in tiny_kv.groups] == [g.block_tokens for g in real_kv.groups]


def test_a_config_without_a_moe_block_has_no_moe_profile() -> None:
    config = {**tiny_moe.tiny_moe_config(1), "enable_moe_block": False}
    with pytest.raises(ValueError, match="no MoE block"):
        tiny_moe.tiny_moe_profile(config, TINY_CHECKPOINT_BYTES)


@pytest.mark.parametrize(("stages", "tokens"), [(1, 74_898), (2, 55_188)])
def test_the_planner_plans_the_tiny_moe_in_bf16(stages: int, tokens: int) -> None:
    """The KV tokens the rehearsal holds vLLM's log to (64 MiB of KV, 2,048 max length)."""
    config = tiny_moe.tiny_moe_config(stages)
    values = tiny_moe.tiny_moe_values(stack_values("dev", {}), config, 3_000_000, stages)
    tiny = plan(load_config(values), "rehearsal")
    assert tiny.stages == stages
    assert tiny.kv_cache_tokens == tokens
    assert tiny.model == tiny_moe.TINY_MOE_NAME


def test_the_planner_plans_the_tiny_moe_in_int8_and_refuses_int4_with_the_reason() -> None:
    config = tiny_moe.tiny_moe_config(1)
    int8 = tiny_moe.tiny_moe_values(stack_values("dev", {}), config, 3_000_000, 1, "int8")
    assert plan(load_config(int8), "rehearsal").weights == "int8"
    int4 = tiny_moe.tiny_moe_values(stack_values("dev", {}), config, 3_000_000, 1, "int4")
    with pytest.raises(ConfigError) as error:
        plan(load_config(int4), "rehearsal")
    assert error.value.key == "weights"
    assert "no CPU int4 MoE kernel for Gemma 4's GELU-tanh experts" in str(error.value)


def _profile(**moe: object) -> dict[str, object]:
    base = tiny_moe.tiny_moe_profile(tiny_moe.tiny_moe_config(1), TINY_CHECKPOINT_BYTES)
    return {**base, **moe}


@pytest.mark.parametrize(
    ("moe", "key"),
    [
        ({"expertsPerToken": 0}, "modelProfile.expertsPerToken"),
        ({"expertsPerToken": 5}, "modelProfile.expertsPerToken"),
        ({"expertIntermediateSize": 0}, "modelProfile.expertIntermediateSize"),
        ({"experts": 0}, "modelProfile.experts"),
        # A MoE profile is rated on a catalogue model's decode: one outside it is refused.
        ({"decodeReference": "x/other"}, "model"),
        ({"expertsPerToken": 4}, None),  # every expert per token is valid
    ],
)
def test_a_moe_profile_is_refused_only_where_its_expert_fields_disagree(
    moe: dict[str, object], key: str | None
) -> None:
    values = {**stack_values("dev", {}), "model": "x/tiny", "modelProfile": _profile(**moe)}
    if key is None:
        assert load_config(values).profile().experts_per_token == 4
        return
    with pytest.raises(ConfigError) as error:
        plan(load_config(values), "dev")
    assert error.value.key == key


# -- the run's verdict pieces -----------------------------------------------------------------

BACKEND = (
    "(EngineCore pid=1) INFO 12-03 12:00:00 [fused_moe/oracle/unquantized.py:1] Using CPU "
    "Unquantized MoE backend out of potential backends: ['CPU'].\n"
)
GEMM = (
    "(EngineCore pid=1) DEBUG 12-03 12:00:00 [layers/utils.py:1] CPU unquantized GEMM dispatch: "
    "using oneDNN onednn_mm\n"
)


PASSED_OVER = (
    "(Worker pid=1) DEBUG 12-03 12:00:14 [fused_moe/oracle/unquantized.py:367] Unquantized MoE "
    "backend CPU does not support the deployment configuration since kernel does not support "
    "current device cpu.\n"
)


def test_kernels_row_passes_only_when_every_rank_names_its_moe_backend() -> None:
    both = moe_group.kernels_check("2 ranks bf16", [PASSED_OVER + BACKEND + GEMM, BACKEND])
    assert both.ok is True
    assert "Using CPU Unquantized MoE backend" in both.observed
    assert "onednn_mm" in both.observed
    assert "does not support" not in both.observed
    assert moe_group.kernels_check("1 rank bf16", [PASSED_OVER + GEMM]).ok is False
    one = moe_group.kernels_check("2 ranks bf16", [BACKEND, GEMM])
    assert one.ok is False


INT8_LOG = "".join(
    f"(Worker pid=1) DEBUG 12-03 12:04:18 [fused_moe/oracle/int8.py:169] Int8 MoE backend {name} "
    "does not support the deployment configuration since kernel does not support current device "
    "cpu.\n"
    for name in ("TRITON", "HUMMING", "CPU", "CPU")
)


def test_an_int8_moe_refusal_is_not_runnable_not_passed() -> None:
    quote = (
        "rank 0 log: NotImplementedError: No Int8 MoE backend supports the deployment "
        "configuration (weight_key=QuantKey(i8))"
    )
    row = moe_group.not_runnable("1 rank int8", quote, INT8_LOG)
    assert row is not None
    assert row.ok is None
    assert row.observed == (
        "not runnable on this CPU: NotImplementedError: No Int8 MoE backend supports the "
        "deployment configuration"
    )
    assert row.note == (
        "Int8 MoE backend TRITON: kernel does not support current device cpu; "
        "Int8 MoE backend HUMMING: kernel does not support current device cpu; "
        "Int8 MoE backend CPU: kernel does not support current device cpu"
    )
    assert moe_group.not_runnable("1 rank int8", "ValueError: something else") is None


def _built(tmp_path: Path, stages: int) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(tiny_moe.tiny_moe_config(stages)))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 3_000_000)
    return tmp_path


def test_the_planner_row_shows_a_plan_in_both_formats(tmp_path: Path) -> None:
    values = stack_values("dev", {})
    model_dir = _built(tmp_path, 1)
    for weights in ("bf16", "int8"):
        check = moe_group.planner_check(f"1 rank {weights}", values, model_dir, 1, weights)
        assert (check.ok, check.observed) == (True, "planned"), weights


def test_bad_formats_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert moe_group.main(["--formats", "int4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "`--formats` 'int4'" in err
