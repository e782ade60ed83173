"""A mixture-of-experts model's decode and prefill, from its measured ratio against a dense one.

The planner's decode model for a dense model: a step streams the stage's weights at the node's
decode bandwidth (`catalog.decode_bandwidth`, calibrated on the field report's 4.0 tokens/s on
m7g.2xlarge, the low end of an extrapolated range on any other type). A mixture of experts
reads only its shared parts and the experts a token routes to, so on paper it decodes as fast as
its active parameters allow; vLLM's CPU MoE kernels read experts scattered and route every token,
and nothing says they get near that. So a MoE model's step is never derived from its active
parameters alone: it is the dense reference model's per-layer time on the node
(`ModelProfile.decode_reference`, in the same weight format)
times the per-layer ratio the MoE probe measured on real vLLM (`infra.plan.moe_measured`), and
the head (the tied embedding, read for every token) as bytes at the bandwidth, as for the dense
model. Per layer, not per model: the measured whole-model ratio carries the probe machine's fixed
cost per step, which the calibrated dense figure already holds.

What each figure is:
- one stream: `MoeDecodeRatio.layer_ratio` x the reference's per-layer bytes;
- several streams: `layer_ratio_n` (measured at `streams` streams) for any batch above one;
- never below what the step reads (`read_bytes`: shared parts and the distinct experts the
  batch routes to, uniform routing modelled), so no plan promises a stream faster than the
  node's bandwidth allows for the bytes it reads; bytes per token reported for a MoE are those
  active bytes;
- prefill: the reference's per-layer arithmetic x the measured prefill ratio, never below the
  active parameters (each token computes its top-k experts); a prefill step streams every
  expert (hundreds of tokens route to all of them), so the step's weight bytes are resident.

A format without a measured ratio (`moe_measured.NOT_MEASURED`) is refused with its reason.
The probe ran on x86 (AVX-512, no AMX), not on Graviton, where vLLM picks other MoE kernels:
the ratio is the best evidence to hand, labelled so wherever a plan shows it.
"""

from __future__ import annotations

from dataclasses import replace

from infra.plan import catalog, moe_measured, weights
from infra.plan.catalog import ModelProfile
from infra.plan.config_parts import ConfigError
from infra.plan.moe_measured import MoeDecodeRatio


def ratio(profile: ModelProfile) -> MoeDecodeRatio:
    """The measured figures for `profile`'s weight format; ConfigError (key `weights`) naming
    the reason and a fix when there are none."""
    measured = moe_measured.decode_ratio(profile.weights)
    if min(measured.dense_layer_s, measured.dense_layer_n_s) <= 0:
        raise ConfigError(
            "weights",
            f"{profile.weights}'s measured dense layer time for {profile.name} is zero, so no "
            "MoE/dense ratio follows from it",
            "measure it again with `make rehearse-moe` on a quieter machine",
        )
    return measured


def reference(profile: ModelProfile) -> ModelProfile:
    """The dense model whose calibrated decode the ratio scales, in `profile`'s format."""
    if profile.decode_reference is None:
        raise ValueError(f"{profile.name} names no dense decode reference")
    return replace(catalog.MODELS[profile.decode_reference], weights=profile.weights)


def check(profile: ModelProfile) -> None:
    """Refuse a mixture-of-experts model in a format with no measured ratio, or with no dense
    model whose calibrated decode the ratio could scale (ConfigError)."""
    if not profile.is_moe:
        return
    if profile.decode_reference not in catalog.MODELS:
        raise ConfigError(
            "model",
            f"{profile.name} is a mixture of experts with no dense catalogue model whose "
            "calibrated decode its measured ratio scales",
            "name one in its catalogue entry's `decode_reference`, such as google/gemma-4-12B-it",
        )
    ratio(profile)


def distinct_experts(profile: ModelProfile, streams: int) -> float:
    """Expected distinct experts of one layer that `streams` tokens route to, each picking
    `experts_per_token` of `experts` uniformly (modelled: real routing is not uniform)."""
    share = profile.experts_per_token / profile.experts
    return profile.experts * (1 - (1 - share) ** max(1, streams))


def layer_parts(profile: ModelProfile) -> dict[str, float]:
    """Parameters of one decoder layer by part, from the catalogue's layout (average over the
    sliding and full layers): the routed experts a token runs (`experts_per_token` of them),
    the router (hidden x experts), the dense MLP every token runs (gate, up and down: 3 x hidden
    x `intermediate_size`; Gemma 4's shared part: it has no shared experts besides it) and the
    attention, the rest of the layer (`layer_params`, from the checkpoint's shapes)."""
    router = profile.hidden_size * profile.experts
    mlp = 3 * profile.hidden_size * (profile.intermediate_size or 0)
    every_expert = profile.experts * profile.expert_params
    return {
        "attention": profile.layer_params - every_expert - router - mlp,
        "dense MLP": mlp,
        "routed experts": profile.experts_per_token * profile.expert_params,
        "router": router,
    }


def read_bytes(profile: ModelProfile, layers: int, streams: int = 1) -> float:
    """Weight bytes a decode step of `streams` tokens reads in `layers` decoder layers: all of a
    dense layer; a MoE layer's attention, dense MLP and router, and the distinct experts the
    step's tokens route to. Attention, dense MLP and experts are in the served format; the
    router stays bf16 in a quantized checkpoint (`infra.quantize.scheme.IGNORE`)."""
    if not profile.is_moe:
        return layers * profile.layer_bytes
    per_param = weights.weight_format(profile.weights).resident_bytes
    parts = layer_parts(profile)
    experts = distinct_experts(profile, streams) * profile.expert_params
    quantized = (parts["attention"] + parts["dense MLP"] + experts) * per_param
    return layers * (quantized + parts["router"] * profile.dtype_bytes)


def token_bytes(profile: ModelProfile) -> dict[str, float]:
    """Weight bytes one stream's token reads in the whole model, by part: each layer part in
    the format the checkpoint keeps it, and the output head, which Gemma ties to the embedding
    and every format keeps bf16 (`lm_head` in the quantizer's `ignore`; vLLM quantizes no
    embedding), read for every token."""
    per_param = weights.weight_format(profile.weights).resident_bytes
    parts = {name: profile.layers * params for name, params in layer_parts(profile).items()}
    read = {name: params * per_param for name, params in parts.items()}
    read["router"] = parts["router"] * profile.dtype_bytes
    read["output head"] = float(profile.embedding_bytes)
    return read


def ceiling_tokens_per_s(profile: ModelProfile, bandwidth_gbps: float) -> float:
    """The fastest one stream can decode: the node's bandwidth over what a token reads."""
    return bandwidth_gbps * 1e9 / sum(token_bytes(profile).values())


def describe_ceiling(profile: ModelProfile, bandwidth_gbps: float) -> str:
    """The plan's line: the one-stream ceiling and the bytes it rests on, part by part."""
    read = token_bytes(profile)
    total = sum(read.values())
    parts = ", ".join(f"{name} {size / 1e9:.2f}" for name, size in read.items())
    return (
        f"{ceiling_tokens_per_s(profile, bandwidth_gbps):.1f} tokens/s for one stream: "
        f"{total / 1e9:.2f} GB a token ({parts}; head {read['output head'] / total:.0%}, bf16 "
        f"as the checkpoint keeps it) at {bandwidth_gbps:.0f} GB/s (modelled from the layout)"
    )


def step_weight_bytes(profile: ModelProfile, layers: int, streams: int = 1) -> float:
    """Bytes whose streaming at the node's decode bandwidth takes as long as the weights' part
    of a decode step of `streams` tokens through `layers` layers: for a dense model what it
    reads (the calibrated model); for a MoE the reference's per-layer bytes x the measured
    ratio, never below what the step reads (`read_bytes`)."""
    if not profile.is_moe:
        return layers * profile.layer_bytes
    measured = ratio(profile)
    factor = measured.layer_ratio if streams <= 1 else measured.layer_ratio_n
    derived = layers * factor * reference(profile).layer_bytes
    return max(derived, read_bytes(profile, layers, streams))


#: The compiled ops vLLM 0.31 serves a mixture of experts with, per weight format, where the op
#: is not in every build: int8's Arm kernel (`ArmCPUExpertsInt8`, fused_moe/experts/cpu_moe.py)
#: is taken only when `hasattr(torch.ops._C, "cpu_fused_moe_int8")`, an op registered only in
#: builds for CPUs with i8mm and bf16 (csrc/cpu/torch_bindings.cpp, `ARM_I8MM_SUPPORT`). An
#: image without it fails at model load, after the checkpoint is made: the quantize Job checks
#: the image first (components/manifests/quantize.py).
KERNEL_OPS: dict[str, tuple[str, ...]] = {"int8": ("cpu_fused_moe_int8",)}


def kernel_ops(profile: ModelProfile) -> tuple[str, ...]:
    """The ops the image's vLLM must carry to serve `profile` in its format (none for a dense
    model)."""
    return KERNEL_OPS.get(profile.weights, ()) if profile.is_moe else ()


def prefill_layer_params(profile: ModelProfile) -> float:
    """Parameters whose multiply-adds one prompt token costs in one layer, for the prefill
    model: a dense layer's own; a MoE layer's the reference's x the measured prefill ratio,
    never below its active parameters."""
    if not profile.is_moe:
        return profile.layer_params
    derived = ratio(profile).prefill_ratio * reference(profile).layer_params
    return max(derived, profile.active_layer_params)


def decode_source(profile: ModelProfile) -> str:
    """How a MoE plan's single-stream decode is known, for every place that shows it."""
    measured = ratio(profile)
    return (
        f"derived from a measured MoE/dense ratio: a layer decodes in {measured.layer_ratio:.2f}x "
        f"the time of a {reference(profile).name} layer in {profile.weights}, applied to its "
        f"rate on the node ({measured.source})"
    )


def prefill_source(profile: ModelProfile) -> str:
    measured = ratio(profile)
    return (
        f"derived: {reference(profile).name}'s per-layer prefill arithmetic x the measured "
        f"MoE/dense prefill ratio {measured.prefill_ratio:.2f} ({measured.source}; not Graviton)"
    )
