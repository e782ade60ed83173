"""The measured MoE figures: derived from the probe's raw timings as the probe derives them."""

from __future__ import annotations

import pytest

from infra.plan import moe_measured
from infra.plan.config_parts import ConfigError
from infra.plan.moe_measured import MOE_DECODE_RATIO, RAW, decode_ratio
from tools.rehearse.measure import moe_probe
from tools.rehearse.measure.moe_probe import DENSE_12B, MOE_26B, Timing, row


def _timings(weights: str) -> dict[tuple[str, int], Timing]:
    return {
        key: Timing(key[0], weights, key[1], pre, 256, one, many, moe_measured.STREAMS)
        for key, (pre, one, many) in RAW[weights].items()
    }


def test_the_catalogue_matches_the_probes_layout_and_slices() -> None:
    assert (MOE_26B["name"], DENSE_12B["name"]) == (moe_measured.MOE, moe_measured.DENSE)
    assert (MOE_26B["layers"], DENSE_12B["layers"]) == (30, 48)
    assert moe_measured.SLICES == moe_probe.SLICE_LAYERS
    assert moe_measured.STREAMS == moe_probe.STREAMS


@pytest.mark.parametrize("weights", sorted(RAW))
def test_figures_are_the_probes_arithmetic_on_its_raw_timings(weights: str) -> None:
    measured, probe = MOE_DECODE_RATIO[weights], row(_timings(weights), weights)
    assert measured.layer_ratio == pytest.approx(probe.layer_ratio)
    assert measured.layer_ratio_n == pytest.approx(probe.layer_ratio_n)
    assert measured.prefill_ratio == pytest.approx(probe.prefill_ratio)
    assert measured.bytes_ratio == pytest.approx(probe.bytes_ratio, abs=1e-3)


def test_every_format_has_a_figure_or_a_reason_said_in_one_line() -> None:
    assert set(MOE_DECODE_RATIO) | set(moe_measured.NOT_MEASURED) >= {"bf16", "int8", "int4"}
    assert not set(MOE_DECODE_RATIO) & set(moe_measured.NOT_MEASURED)
    with pytest.raises(ConfigError) as error:
        decode_ratio("int4")
    text = str(error.value)
    assert text.startswith(
        "`weights` int4 has no measured MoE decode ratio for google/gemma-4-26B-A4B-it "
        "(vLLM 0.31 has no CPU int4 MoE kernel for Gemma 4's GELU-tanh experts, on Arm or x86"
    )
    # No kernel to measure: the fix is a format that runs.
    assert text.endswith("; choose one of bf16, int8")
    assert "\n" not in text


def test_int8_is_measured_on_an_int8_expert_kernel_and_says_which_and_where() -> None:
    """int8 has its own run (zentorch's fused MoE on AMD Zen), not bf16's figures: its kernels
    and its source name the backend, the machine, the day and what Graviton runs instead."""
    int8, bf16 = MOE_DECODE_RATIO["int8"], MOE_DECODE_RATIO["bf16"]
    assert int8.layer_ratio != bf16.layer_ratio and int8.prefill_ratio != bf16.prefill_ratio
    assert "[zen_cpu] Using zentorch_fused_moe for W8A8 INT8 MoE" in int8.kernels
    for text in ("ZenCPUExpertsInt8", "2026-12-07", "ArmCPUExpertsInt8", "cpu_fused_moe_int8"):
        assert text in int8.source
    assert "CPUUnquantizedExperts" in bf16.source and "2026-12-03" in bf16.source
