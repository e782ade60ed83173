"""The quantize Job's plan: how long it runs, how much memory it may take, when it is given up.

A stack with `weights` int8 or int4 and `weightsSource: quantize` produces its checkpoint once:
a Job on a model node downloads the pinned bf16 revision, quantizes it with llm-compressor
(`python -m infra.quantize`, round-to-nearest of the weights, no calibration data), and writes the
checkpoint with a content-hash marker to every rank's weights volume, before the group exists.

All figures are MODELLED (no 12B quantization has run on Graviton here):
- memory: the Job gets the model pod's whole budget (requests = limits), the safe end for a limit
  that kills. The heaviest way to quantize, loading the whole bf16 model through transformers
  (llm-compressor `oneshot`), peaks near the bf16 checkpoint plus the runtime
  (`peak_gib`); llm-compressor's `model_free_ptq` works one safetensors shard at a time and stays
  far below (its docs, "model_free_ptq": "without ever loading the full model into memory").
- time: install the pinned quantizer, download the bf16 checkpoint at `downloadMBps`, quantize at
  `QUANTIZE_MBPS` (the slow end assumed for round-to-nearest on a few cores: a handful of
  elementwise passes over every weight), write and hash the result at the volume's throughput,
  and copy it to every other rank's volume.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from components.manifests.quantize import QuantizeSpec
from infra.plan import catalog, moe
from infra.plan.catalog import GIB, ModelProfile
from infra.plan.config import ConfigError
from infra.plan.weights import weight_format

if TYPE_CHECKING:
    from infra.plan.config import StackConfig

#: Installing the pinned quantizer (llm-compressor and its dependencies) into the Job's scratch
#: space from PyPI: a few hundred MB of wheels. ASSUMED, slow end.
INSTALL_SECONDS = 300
#: Round-to-nearest over the bf16 weights, MB of weights per second. ASSUMED slow end: a few
#: passes (absolute maximum per row or group, scale, round, clamp, cast) of torch elementwise
#: work on 5 cores, each pass well above 1 GB/s.
QUANTIZE_MBPS = 200.0
#: The runtime besides the weights: Python, torch, transformers, the largest layer's fp32
#: temporaries. ASSUMED.
RUNTIME_GIB = 2.0
#: The installed quantizer in the scratch space (torch's CPU wheel, transformers, llm-compressor
#: and their dependencies). ASSUMED, high end.
INSTALL_GIB = 6
#: Room on the scratch space beyond what it holds, as a fraction.
SCRATCH_MARGIN = 0.2
#: The deadline is this many times the modelled run, and never below `MIN_DEADLINE_SECONDS`:
#: a Job that is killed must be far past anything healthy (the safe end of a bound that kills).
DEADLINE_FACTOR = 3
MIN_DEADLINE_SECONDS = 45 * 60


def scratch_gib(profile: ModelProfile) -> int:
    """The Job's scratch space: the bf16 checkpoint downloaded, and the quantizer installed."""
    return math.ceil(profile.checkpoint_bytes / GIB * (1 + SCRATCH_MARGIN)) + INSTALL_GIB


def plan_job(
    profile: ModelProfile,
    scheme: str,
    volumes: int,
    memory_gib: float,
    cpu: int,
    download_mbps: float,
    volume_mibps: int,
    required_ops: tuple[str, ...] = (),
) -> QuantizeSpec:
    """The Job for `profile` (in its served format) writing to `volumes` volumes."""
    bf16 = profile.checkpoint_bytes
    out = profile.download_bytes
    write = out * (1 + 2 * (volumes - 1)) / (volume_mibps * 2**20)  # write, then read + write
    seconds = (
        INSTALL_SECONDS
        + bf16 / (download_mbps * 1e6)
        + bf16 / (QUANTIZE_MBPS * 1e6)
        + write
        + out / (volume_mibps * 2**20)  # the content hash reads the result once
    )
    modelled = math.ceil(seconds)
    deadline = max(MIN_DEADLINE_SECONDS, math.ceil(DEADLINE_FACTOR * modelled / 60) * 60)
    return QuantizeSpec(
        scheme=scheme,
        volumes=volumes,
        modelled_seconds=modelled,
        deadline_seconds=deadline,
        memory_gib=memory_gib,
        cpu=cpu,
        peak_gib=round(bf16 / GIB + RUNTIME_GIB, 2),
        scratch_gib=scratch_gib(profile),
        required_ops=required_ops,
    )


def stack_job(
    cfg: StackConfig, profile: ModelProfile, pod_gib: float, cpu: int, stages: int
) -> QuantizeSpec | None:
    """The Job that writes a produced checkpoint to every rank's volume, with the pod's memory
    and the image's kernel check of the MoE ops (`moe.kernel_ops`)."""
    scheme = weight_format(cfg.weights).scheme
    if scheme is None:
        return None
    job = plan_job(
        profile,
        scheme,
        stages * cfg.replicas,
        pod_gib,
        cpu,
        cfg.download_mbps,
        catalog.WEIGHTS_VOLUME_MIBPS,
        moe.kernel_ops(profile),
    )
    if job.peak_gib > job.memory_gib:
        # The Job's limit kills: one that cannot hold its own modelled peak would be OOM-killed
        # on every try, each after downloading the whole bf16 checkpoint again.
        raise ConfigError(
            "weightsSource",
            f"is quantize, but the quantize Job loads {profile.name}'s bf16 checkpoint whole "
            f"(llm-compressor oneshot): {job.peak_gib:g} GiB at its peak (modelled), over the "
            f"{job.memory_gib:g} GiB a {cfg.instance_type} pod may take",
            "set `weightsSource` to a compressed-tensors checkpoint as owner/name@<40-character "
            "commit SHA>, or choose an `instanceType` whose pod holds the peak",
        )
    return job
