"""The prefill probe: how fast vLLM prefills the served model's layers on this CPU, measured.

The planner's one prefill rate (`catalog.PREFILL_GFLOPS_PER_VCPU`, `infra.plan.prefill`) is a
peak times an efficiency; this probe measures the efficiency. It serves a shape-true slice of the
stack's model (the catalogue's hidden size, head layout, MLP width and one sliding:full pattern
period, e.g. 5 sliding + 1 full layers of gemma-4-12B-it; random weights built locally, the small
local tokenizer of `tiny_checkpoint`) with the real vLLM build as one rank on every core, and sends
one prompt of exactly the stack's planned `max_num_batched_tokens` tokens (one prefill step), asking
for one token. It reports:

- prefill tokens/s per layer: prompt tokens x layers / the step's wall time;
- warm-up vs step: the warm-up vLLM logs ("Warming up model" to "Warming up done": its profile
  run is one forward of `max_num_batched_tokens` tokens plus the compile,
  `v1/worker/cpu_model_runner.py` `warming_up_model` -> `profile_run`) against the step. The
  warm-up bounds a step when it is at least as long: the assumption the field report's ~50 s
  warm-up was once read with;
- GFLOP/s per core against this CPU's peak: the step's arithmetic (`infra.plan.prefill`: 2 x
  parameters x tokens plus attention) over the CPU-seconds the engine's processes used during it
  (so a machine shared with other work does not count as slowness), against the peak
  `PEAK_FORMULA` reads from /proc/cpuinfo;
- measured vs modelled, side by side: the step's seconds against what the plan's formula gives
  this slice on this CPU at the catalogue's efficiency range, and the efficiency against that
  range's slow end (the end every bound that can kill work rests on).

`make rehearse` serves the short slice (`QUICK_SLIDING`: one sliding and one full layer, every
matrix at full width; about three minutes here, model build and warm-up included);
`--prefill` (`make rehearse-prefill`) serves one whole period of the pattern.

Pure apart from `run_probe`; the figures are computed by `figures` from what was measured.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.manifests.programs.liveness import FALLBACK_LINE
from infra.adapters.wiring import server_spec
from infra.plan import catalog, prefill
from infra.plan.catalog import ModelProfile
from infra.plan.config import ConfigError
from infra.plan.loading import load_config
from infra.plan.sizing import plan
from tools.rehearse.checks import Check
from tools.rehearse.group.endpoint import json_request
from tools.rehearse.group.ranks import RankGroup, group_cpu_seconds, loopback_ports, rank_launches
from tools.rehearse.group.tiny_checkpoint import tiny_text_config
from tools.rehearse.group.tiny_plan import (
    TINY_MODEL_NAME,
    TINY_VOCAB,
    checkpoint_bytes,
    ensure_tiny_model,
    model_config,
    tiny_profile,
)
from tools.rehearse.group.workspace import LOGS_DIR, RehearsalError

#: bf16/fp32 FLOP per cycle per core by the widest matrix instructions the flags show, assuming
#: two vector FMA pipes (AMX: one 16 x 32 bf16 tile multiply per cycle).
FLOP_PER_CYCLE = (
    ("amx_bf16", 1024, "AMX bf16 tile: 1024"),
    ("avx512_bf16", 128, "AVX-512 BF16 dot, 2 pipes x 16 lanes x 2 x 2: 128"),
    ("avx512f", 64, "AVX-512 fp32 FMA, 2 pipes x 16 lanes x 2: 64"),
    ("avx2", 32, "AVX2 fp32 FMA (bf16 is widened to fp32), 2 pipes x 8 lanes x 2: 32"),
)
PEAK_FORMULA = "peak per core = cpu MHz (/proc/cpuinfo) x FLOP per cycle of the widest ISA"
#: Sliding layers in a plain rehearsal's slice, before its one full layer: both kinds of layer
#: at full width, a third of the 5 + 1 period's minutes (on 2026-12-02 here a 512-token step of
#: 5 + 1 layers took 85.6 s and its warm-up 99 s). Attention is a few percent of a step at
#: these lengths, so the per-layer rate and the efficiency barely depend on the mix.
QUICK_SLIDING = 1
#: A slice whose step takes longer than this is stopped (a CPU far slower than planned).
STEP_TIMEOUT_S = 1800.0
#: The slice's start-up (load, then a warm-up that is itself one step) is given at least this.
READY_S = 2400.0
_STAMP = re.compile(r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")
#: How vLLM 0.31 names the kernel it picks for each unquantized linear on the CPU
#: (vllm/model_executor/layers/utils.py `dispatch_cpu_unquantized_gemm`: "CPU unquantized GEMM
#: dispatch: using ...", logged once per kernel at debug level, so the probe runs vLLM with
#: VLLM_LOGGING_LEVEL=DEBUG), and the warning it logs when oneDNN cannot be built for a layer and
#: torch's generic linear runs instead (seen in the probe's log on a CPU without bf16
#: instructions, 2026-12-02). torch's linear is also the path, with no warning, when vLLM's
#: build has no oneDNN (`ops._supports_onednn`).
DISPATCH = re.compile(r"CPU unquantized GEMM dispatch: using ([^\n(]+?)\s*(?:\(|$)", re.M)
FALLBACK_KERNEL = "torch.nn.functional.linear"
FAST_PATH = "oneDNN"
FALLBACK_PATH = "torch fallback"
#: /proc/cpuinfo flags of bf16 matrix instructions: x86 (`flags`) and AArch64 (`Features`).
BF16_FLAGS = {"avx512_bf16", "amx_bf16", "bf16"}


@dataclass(frozen=True)
class Peak:
    """This CPU's peak matrix rate per core and how it was read."""

    gflops_per_core: float
    mhz: float
    flop_per_cycle: int
    why: str


def linear_kernels(log_text: str) -> list[str]:
    """Every kernel vLLM's log names for the unquantized linears, in first-seen order."""
    return list(dict.fromkeys(name.strip() for name in DISPATCH.findall(log_text)))


def linear_path(log_text: str) -> str:
    """The linear path vLLM took for the slice's layers, from its own log: the torch fallback
    when it ran torch's generic linear for any layer (or warned that oneDNN failed), the
    kernels it named otherwise, "oneDNN" when it named none."""
    kernels = linear_kernels(log_text)
    if FALLBACK_LINE in log_text or FALLBACK_KERNEL in kernels:
        return FALLBACK_PATH
    return ", ".join(kernels) if kernels else FAST_PATH


def on_fast_path(path: str) -> bool:
    return path != FALLBACK_PATH


def cpu_model(cpuinfo: str) -> str:
    """The CPU's name (x86 `model name`; AArch64 `CPU part` when no name is given)."""
    named = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    if named:
        return named.group(1).strip()
    part = re.search(r"^CPU part\s*:\s*(\S+)", cpuinfo, re.M)
    return f"Arm CPU part {part.group(1)}" if part else "unknown CPU"


def has_bf16(cpuinfo: str) -> bool:
    """Whether the first processor's flags (or AArch64 features) show bf16 instructions."""
    found = re.search(r"^(?:flags|Features)\s*:(.*)$", cpuinfo, re.M)
    return bool(found) and bool(BF16_FLAGS & set(found.group(1).split()))  # type: ignore[union-attr]


def cpu_path(progress: Callable[[str], None], cpuinfo: str | None = None) -> dict[str, str]:
    """The stack key for the linear path vLLM takes on this CPU: `prefillPath: fallback` where it
    has no bf16 instructions, since vLLM then refuses oneDNN's linear ("Failed to create oneDNN
    linear", seen on an AVX2-only AMD EPYC on 2026-12-06) and a leader planned on oneDNN does not
    start; none where it has them (the plan's own oneDNN)."""
    cpuinfo = cpuinfo or Path("/proc/cpuinfo").read_text(encoding="utf-8")
    if has_bf16(cpuinfo):
        return {}
    progress(f"{cpu_model(cpuinfo)} has no bf16 instructions: planned with prefillPath=fallback")
    return {"prefillPath": "fallback"}


def cpu_peak(cpuinfo: str) -> Peak:
    """The peak from /proc/cpuinfo's first processor: its flags and its current clock."""
    flags = set(re.search(r"^flags\s*:(.*)$", cpuinfo, re.M).group(1).split())  # type: ignore[union-attr]
    mhz = float(re.search(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, re.M).group(1))  # type: ignore[union-attr]
    for flag, per_cycle, why in FLOP_PER_CYCLE:
        if flag in flags:
            return Peak(mhz * per_cycle / 1000, mhz, per_cycle, why)
    return Peak(mhz * 8 / 1000, mhz, 8, "SSE fp32, 2 pipes x 4 lanes: 8")


def slice_config(profile: ModelProfile, sliding: int | None = None) -> dict[str, Any]:
    """`sliding` sliding layers then one full layer of `profile`, at full width (the probe's
    model); by default one period of the model's own pattern (gemma-4-12B-it: 5 + 1; a shorter
    slice, `QUICK_SLIDING`, keeps every matrix's shape)."""
    sliding = profile.sliding_per_full if sliding is None else sliding
    if profile.attention_heads is None or profile.intermediate_size is None:
        raise ConfigError(
            "modelProfile.attentionHeads",
            f"{profile.name} has no query-head count or MLP width, which the prefill probe "
            "needs to build a shape-true slice",
            "set `modelProfile.attentionHeads` and `modelProfile.intermediateSize`",
        )
    return tiny_text_config(
        num_layers=sliding + 1,
        sliding_per_full=sliding,
        sliding_kv_heads=profile.sliding_kv_heads,
        full_kv_heads=profile.full_kv_heads,
        sliding_head_dim=profile.sliding_head_dim,
        full_head_dim=profile.full_head_dim,
        sliding_window=profile.sliding_window,
        hidden_size=profile.hidden_size,
        vocab_size=TINY_VOCAB,
        intermediate_size=profile.intermediate_size,
        num_attention_heads=profile.attention_heads,
        max_position_embeddings=profile.max_context,
        # Gemma 4 full layers share K and V weights (FACTS.md), as the tiny model does.
        attention_k_eq_v=True,
    )


def warmup_seconds(log_text: str) -> float | None:
    """Seconds between vLLM's "Warming up model" and "Warming up done." lines (1 s stamps)."""
    began = done = None
    for line in log_text.splitlines():
        stamp = _STAMP.search(line)
        if stamp is None:
            continue
        _month, day, hour, minute, second = (int(x) for x in stamp.groups())
        when = ((day * 24 + hour) * 60 + minute) * 60 + second
        if "Warming up model" in line:
            began = when
        elif "Warming up done" in line and began is not None:
            done = when
    return None if began is None or done is None else float(done - began)


@dataclass(frozen=True)
class Measured:
    """What one probe run saw."""

    tokens: int
    layers: int
    step_s: float
    cpu_s: float
    warmup_s: float | None
    flop: float
    load: float
    peak: Peak
    date: dt.date
    #: Cores the engine's threads were bound to (every core of this machine).
    cores: int = 1
    #: The linear path vLLM logged (`linear_path`), the CPU's bf16 support and its name.
    path: str = FAST_PATH
    bf16: bool = False
    cpu: str = "unknown CPU"


@dataclass(frozen=True)
class Figures:
    """The probe's figures, derived from `Measured`."""

    tokens_per_s_per_layer: float
    gflops_per_core: float
    efficiency: float
    warmup_bounds_step: bool | None


def figures(m: Measured) -> Figures:
    per_core = m.flop / m.cpu_s / 1e9 if m.cpu_s > 0 else 0.0
    return Figures(
        tokens_per_s_per_layer=m.tokens * m.layers / m.step_s,
        gflops_per_core=per_core,
        efficiency=per_core / m.peak.gflops_per_core,
        warmup_bounds_step=None if m.warmup_s is None else m.warmup_s >= m.step_s,
    )


def step_flop(profile: ModelProfile, config: Mapping[str, Any], weights: int, tokens: int) -> float:
    """The step's arithmetic: decoder-layer parameters (the checkpoint less its embeddings) and
    attention at a context of `tokens` (`infra.plan.prefill`)."""
    params = (weights - config["vocab_size"] * config["hidden_size"] * 2) / 2
    kinds = list(config["layer_types"])
    work = prefill.StageWork(
        params, weights, kinds.count("sliding_attention"), kinds.count("full_attention")
    )
    return 2 * params * tokens + prefill.attention_flops(profile, work, tokens, tokens)


def modelled_step_s(m: Measured, efficiency: float) -> float:
    """The plan's formula for this step on this CPU: its arithmetic over `efficiency` x the peak
    x the cores it ran on (the weights of a slice stream in well under a second: left out)."""
    return m.flop / (efficiency * m.peak.gflops_per_core * 1e9 * m.cores)


def probe_checks(m: Measured) -> list[Check]:
    """The verdict's rows, the modelled figure (expected) beside the measured one (observed):
    tokens/s per layer and the step, warm-up vs step, GFLOP/s per core vs peak, and the
    efficiency against the catalogue's slow end."""
    f = figures(m)
    when = f"{m.date.isoformat()}, load {m.load:.1f} on {m.cores} cores"
    # The measured fraction is judged against the slow end of the path vLLM took.
    path_key = "onednn" if on_fast_path(m.path) else "fallback"
    slow, fast = catalog.PREFILL_EFFICIENCY[path_key]
    bounds = {True: "yes", False: "NO", None: "no warm-up line"}[f.warmup_bounds_step]
    # The fallback is expected only where the CPU has no bf16 instructions; on a bf16 CPU it
    # means the measured fraction is not of the path the deployment takes.
    expected_path = FAST_PATH if m.bf16 else FALLBACK_PATH
    return [
        Check(
            "prefill linear path",
            f"{expected_path} ({'bf16' if m.bf16 else 'no bf16'} on {m.cpu})",
            f"{m.path}"
            + (" (torch's generic linear)" if not on_fast_path(m.path) else "")
            + f"; bf16 instructions: {'yes' if m.bf16 else 'no'}",
            on_fast_path(m.path) or not m.bf16,
        ),
        Check(
            "prefill tokens/s per layer",
            f"{m.tokens}-token step of {m.layers} full-width layers: modelled "
            f"{modelled_step_s(m, fast):.0f}-{modelled_step_s(m, slow):.0f} s",
            f"{m.step_s:.1f} s, {f.tokens_per_s_per_layer:.0f} tok/s/layer ({when})",
            True,
        ),
        Check(
            "warm-up vs step",
            "warm-up >= one step",
            f"warm-up {m.warmup_s if m.warmup_s is not None else '?'} s, step {m.step_s:.1f} s: "
            f"bounds a step: {bounds}",
            f.warmup_bounds_step is not None,
        ),
        Check(
            "GFLOP/s per core vs peak",
            f"peak {m.peak.gflops_per_core:.0f} ({m.peak.mhz:.0f} MHz x {m.peak.flop_per_cycle})",
            f"{f.gflops_per_core:.1f} per CPU-second ({100 * f.efficiency:.1f}% of peak)",
            True,
            note=f"{PEAK_FORMULA}; {m.peak.why}",
        ),
        Check(
            "prefill: measured vs modelled",
            f"modelled {100 * slow:.0f}-{100 * fast:.0f}% of peak on the {path_key} path; "
            f"bounds use {100 * slow:.0f}%",
            f"{100 * f.efficiency:.1f}% measured",
            f.efficiency >= slow,
        ),
    ]


# --------------------------------------------------------------------------------------------
# The run


def slice_env() -> dict[str, str]:
    """The engine environment of a timed slice (this probe's and the MoE probe's): every core,
    and a step timeout far above vLLM's default 300 s: on a busy 2-core x86 runner (2026-12-01,
    load average 12-28) a 512-token step of two full-width layers outlived the default, and the
    engine killed the probe's own healthy step. The linear kernels vLLM picks are logged at
    debug level only (`DISPATCH`)."""
    return {
        "VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}",
        "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": str(int(STEP_TIMEOUT_S)),
        "VLLM_LOGGING_LEVEL": "DEBUG",
    }


def slice_group(
    values: Mapping[str, Any],
    model_dir: Path,
    weights: int,
    batched: int,
    python: Path,
    log_dir: Path,
    progress: Callable[[str], None],
    extra_env: Mapping[str, str] | None = None,
) -> tuple[RankGroup, int, str]:
    """The slice in `model_dir` (`weights` bytes of checkpoint) as one rank on every core
    (`slice_env`, and `extra_env`), `batched` tokens a step: its group (not yet started), its
    port and its key."""
    cfg = load_config(
        {
            **values,
            "model": TINY_MODEL_NAME,
            "modelProfile": tiny_profile(model_config(model_dir), weights),
            "pipelineStages": 1,
            "replicas": 1,
            "kvCacheBytes": 256 * 1024 * 1024,
            "maxModelLen": 2 * batched,
            "maxNumBatchedTokens": batched,
            "weightPrefetch": True,
            "maxReplyTokens": 8,
            "firstByteTimeoutSeconds": "auto",
        }
    )
    ports, key = loopback_ports(), os.urandom(12).hex()
    vllm = str(python.parent / "vllm")
    engine = server_spec(cfg, plan(cfg, "slice-probe")).engine()
    env = {**slice_env(), **(extra_env or {})}
    launches = rank_launches(engine, vllm, model_dir, ports, key, engine_env=env)
    return RankGroup(launches, log_dir, progress=progress), ports[0], key


def prompt_ids(tokens: int, seed: int) -> list[int]:
    """`tokens` ids of the tiny vocabulary above its first ones, a different run per `seed`."""
    return [8 + (seed * 7919 + i * 31) % (TINY_VOCAB - 8) for i in range(tokens)]


def post_completion(port: int, api_key: str, body: Mapping[str, Any]) -> Any:
    """The open response of one `/v1/completions` POST to a timed slice on loopback."""
    url = f"http://127.0.0.1:{port}/v1/completions"
    return urllib.request.urlopen(json_request(url, api_key, body), timeout=STEP_TIMEOUT_S)


def prompt_step(port: int, api_key: str, tokens: int, seed: int) -> float:
    """One completion of a `tokens`-id prompt and one output token; its wall seconds."""
    ids = prompt_ids(tokens, seed)
    body = {"model": TINY_MODEL_NAME, "prompt": ids, "max_tokens": 1, "temperature": 0}
    began = time.monotonic()
    with post_completion(port, api_key, body) as response:
        response.read()
    return time.monotonic() - began


def run_probe(
    values: Mapping[str, Any],
    batched: int,
    python: Path,
    progress: Callable[[str], None],
    timeout_s: float,
    sliding: int | None = None,
) -> Measured:
    """Build (once) and serve the slice, time one step of `batched` tokens; stop everything.

    The start-up waits at least `READY_S`: its warm-up is itself a step, minutes on a busy CPU."""
    profile = load_config(values).profile()
    config = slice_config(profile, sliding)
    model_dir = ensure_tiny_model(python, config, progress)
    built = model_config(model_dir)
    weights = checkpoint_bytes(model_dir)
    log_dir = LOGS_DIR / time.strftime("prefill-%Y%m%d-%H%M%S")
    group, port, key = slice_group(values, model_dir, weights, batched, python, log_dir, progress)
    progress(f"prefill probe: {built['num_hidden_layers']} layers of {profile.name}, {batched}")
    with group:
        group.wait_ready(f"http://127.0.0.1:{port}/health", max(timeout_s, READY_S), progress)
        load = os.getloadavg()[0]
        pgid = group.processes[0].pgid
        cpu = group_cpu_seconds(pgid)
        step = prompt_step(port, key, batched, seed=1)
        cpu = group_cpu_seconds(pgid) - cpu
        log_text = group.processes[0].log_text()
        warmup = warmup_seconds(log_text)
    if step <= 0:
        raise RehearsalError("the prefill probe's step took no time")
    cpuinfo = Path("/proc/cpuinfo").read_text()
    return Measured(
        tokens=batched,
        layers=int(built["num_hidden_layers"]),
        step_s=step,
        cpu_s=cpu,
        warmup_s=warmup,
        flop=step_flop(profile, built, weights, batched),
        load=load,
        peak=cpu_peak(cpuinfo),
        date=dt.date.today(),
        cores=os.cpu_count() or 1,
        path=linear_path(log_text),
        bf16=has_bf16(cpuinfo),
        cpu=cpu_model(cpuinfo),
    )
