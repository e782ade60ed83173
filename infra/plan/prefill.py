"""One prefill model: how long a step of prompt tokens takes, from one rate with one range.

Every figure of a plan that depends on prefill speed comes from here: the longest step
(`step_seconds`), and from it the engine's step timeout, the probe's stall bound and the batch cap
(`infra.plan.liveness`); a prompt's time to first token (`prefill_seconds`), and from it the
first-byte bound, the gatekeeper's reply timeout (`infra.plan.frontdoor`) and `--compare`'s
column (`infra.plan.throughput`).

A step of `b` prompt tokens ending at context position `p` costs, on each pipeline stage in turn:

    t_stage = (2 x params x b + attention(b, p)) / F  +  W / BW

- `params`: the stage's decoder-layer parameters (one multiply-add each per token); for a
  mixture of experts, the dense reference's x the measured prefill ratio (`infra.plan.moe`);
- `attention(b, p)`: each of the `b` query tokens reads up to `p` keys on a full-attention layer
  and up to the window on a sliding one: 4 x query heads x head dim FLOP per key (scores and
  values). An upper bound: it counts every query token as the last one. It grows with the
  context, so the slowest step is the last chunk of a maximum-length prompt;
- `W / BW`: the stage's weights streamed once per step at the node's decode bandwidth
  (`catalog.decode_bandwidth`: calibrated on the measured type, else a range whose low end the
  slow end and the middle use, and its high end the fast end);
- `F`: the node's prefill arithmetic rate, `catalog.PREFILL_GFLOPS_PER_VCPU` x the pod's cores,
  a range (slow, fast) for the linear path the plan assumes (`prefillPath`: vLLM's oneDNN
  matmul, or torch's fallback), whose provenance `catalog.PREFILL_SOURCES` states.

Which end is used where: a bound that can kill or cut off work (the engine's step timeout, the
liveness stall bound, the first-byte bound and so the reply timeout) uses the SLOW end, so a
healthy request is never killed for being slow even if the fast end is wrong. Estimates shown as
"~" use the middle, ranges show both ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.plan import catalog
from infra.plan.catalog import InstanceType, ModelProfile
from infra.plan.weights import weight_format


@dataclass(frozen=True)
class StageWork:
    """What one pipeline stage computes and streams per prefill step."""

    #: Decoder-layer parameters (the output head runs for one token per sequence: left out).
    params: float
    #: Bytes streamed once per step (layers, and on the last stage the output head).
    weight_bytes: float
    sliding_layers: int
    full_layers: int


@dataclass(frozen=True)
class Node:
    """What one rank's pod computes with: arithmetic rate (FLOP/s) and decode bandwidth (B/s)."""

    flops: float
    bandwidth: float


def stage_work(profile: ModelProfile, layers: list[tuple[int, int]]) -> list[StageWork]:
    """Per stage (sliding, full) layer counts -> its prefill work."""
    work = []
    for rank, (sliding, full) in enumerate(layers):
        layer_bytes = (sliding + full) * profile.layer_bytes
        read = layer_bytes + (profile.embedding_bytes if rank == len(layers) - 1 else 0)
        params = (sliding + full) * profile.layer_params
        if profile.is_moe:
            from infra.plan import moe  # the MoE layer, for a mixture-of-experts model only

            params = (sliding + full) * moe.prefill_layer_params(profile)
        work.append(StageWork(params, read, sliding, full))
    return work


def gflops_range(
    generation: str, weights: str = "bf16", path: str = "onednn"
) -> tuple[float, float]:
    """The prefill rate per vCPU of a generation in a weight format on a linear path, (slow,
    fast), GFLOP/s. A quantized format keeps bf16's slow end
    (`infra.plan.weights.PREFILL_SOURCE`)."""
    low, high = catalog.PREFILL_GFLOPS_PER_VCPU[path][generation]
    return low, high * weight_format(weights).prefill_fast_factor


def nodes(
    instance: InstanceType, cpu: int, weights: str = "bf16", path: str = "onednn"
) -> tuple[Node, Node, Node]:
    """The pod's rate at the slow end, the middle and the fast end of the range, with the node's
    decode bandwidth (`catalog.decode_bandwidth`): its low end at the slow end and the middle,
    which every bound and promise uses, its high end at the fast end."""
    low, high = gflops_range(instance.generation, weights, path)
    band = catalog.decode_bandwidth(instance, cpu)
    return (
        Node(low * cpu * 1e9, band.low * 1e9),
        Node((low + high) / 2 * cpu * 1e9, band.low * 1e9),
        Node(high * cpu * 1e9, band.high * 1e9),
    )


def attention_flops(profile: ModelProfile, work: StageWork, tokens: int, context: int) -> float:
    """Upper bound of a stage's attention arithmetic for `tokens` queries ending at `context`."""
    heads = profile.query_heads
    sliding = work.sliding_layers * profile.sliding_head_dim * min(profile.sliding_window, context)
    full = work.full_layers * profile.full_head_dim * context
    return 4.0 * heads * tokens * (sliding + full)


def step_seconds(
    profile: ModelProfile, work: list[StageWork], node: Node, tokens: int, context: int
) -> float:
    """One step of `tokens` prompt tokens ending at position `context`, through every stage."""
    return sum(
        (2 * w.params * tokens + attention_flops(profile, w, tokens, context)) / node.flops
        + w.weight_bytes / node.bandwidth
        for w in work
    )


def prefill_seconds(
    profile: ModelProfile, work: list[StageWork], node: Node, prompt: int, batched: int
) -> float:
    """A `prompt`-token prompt prefilled in chunks of `batched`, each through every stage."""
    total, done = 0.0, 0
    while done < prompt:
        chunk = min(batched, prompt - done)
        done += chunk
        total += step_seconds(profile, work, node, chunk, done)
    return total
