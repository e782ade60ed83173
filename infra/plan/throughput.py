"""Served tokens and time to first token: what a plan's group delivers, from a stated model.

Decode, per pipeline stage and step (one token for every sequence of a micro-batch of `b`):

    t_stage = max((W + b x KV(ctx)) / BW, b x 2 x params / F)

- `W`: the stage's weight bytes, streamed once per step whatever `b` is;
- `KV(ctx)`: one sequence's cache reads on the stage at context `ctx` (a sliding layer reads at
  most its window, a full layer the whole context);
- `BW`: the node's effective decode bandwidth (`catalog.decode_bandwidth`). CALIBRATED on the
  one type measured: the field report's 4.0 tokens/s single stream (241 ms/token) on two
  m7g.2xlarge. EXTRAPOLATED on every other type, a range: at least what the measured node
  streams, at most its per-vCPU rate x the pod's cores capped at the chip's achievable bandwidth.
  Every figure here uses the low end; the single stream is also given at the high end;
- `params / F`: the same matrix arithmetic as prefill, which bounds a step once the batch is large.
  `F` is the middle of the prefill rate (`infra.plan.prefill`).

A pipeline of `P` stages keeps `m = min(N, P)` micro-batches of `N / m` sequences in flight (vLLM's
`max_concurrent_batches` is the pipeline size). One round of every micro-batch through every stage
takes `max(sum of the stages' times, m x the slowest stage's time)`: with fewer sequences than
stages the pipeline has bubbles and a single stream waits for every stage in turn. Aggregate
tokens/s is `N` over that period.

Time to first token is the plan's one prefill model (`infra.plan.prefill`): chunks of
`max_num_batched_tokens` through the stages in series, attention included; the range follows the
prefill rate's range, and its slow end is what the first-byte bound is built on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.plan import catalog, prefill, weights
from infra.plan.catalog import InstanceType, ModelProfile

#: Which parts of the figures are calibrated on measurements and which are modelled.
PROVENANCE = {
    "bandwidth": "calibrated on m7g.2xlarge, the field report's 4.0 tokens/s single stream on "
    "2 x m7g.2xlarge; on any other type extrapolated, a range whose low end every figure uses "
    "(`bandwidth_measured`, `bandwidth_bound`)",
    "batching": "modelled: weights streamed once per step per stage, plus each sequence's KV "
    "reads, pipeline bubbles below `stages` sequences, arithmetic-bound at large batches",
    "prefill": catalog.PREFILL_SOURCE,
}


#: The short request the plan quotes beside the longest one: time to first token of a prompt this
#: long, and decode with as many such requests as fit at once.
SHORT_PROMPT_TOKENS = 1000


@dataclass(frozen=True)
class StageLoad:
    """What one pipeline stage reads and computes per decode step."""

    #: Bytes whose streaming at the node's bandwidth takes as long as the weights' part of a
    #: one-stream step: what a dense stage reads; a MoE stage's from its measured ratio
    #: (`infra.plan.moe.step_weight_bytes`).
    weight_bytes: float
    #: Parameters one token computes (a MoE's active ones).
    params: float
    sliding_layers: int
    full_layers: int
    #: Weight bytes one stream reads per token (a MoE's active ones; dense: `weight_bytes`).
    read_bytes: float = 0.0
    #: The output head's bytes, on the last stage.
    head_bytes: float = 0.0

    def step_bytes(self, profile: ModelProfile, streams: int) -> float:
        """`weight_bytes` for a step of `streams` sequences (a MoE's grow with them)."""
        if streams <= 1 or not profile.is_moe:
            return self.weight_bytes
        from infra.plan import moe  # the MoE layer, for a mixture-of-experts model only

        layers = self.sliding_layers + self.full_layers
        return moe.step_weight_bytes(profile, layers, streams) + self.head_bytes


@dataclass(frozen=True)
class DecodePoint:
    """Decode at one concurrency: `sequences` streams, each at `context` tokens."""

    sequences: int
    context: int
    aggregate_tokens_per_s: float
    per_stream_tokens_per_s: float
    bound: str  # "memory" or "arithmetic"


@dataclass(frozen=True)
class Served:
    """Served output tokens at 1 stream, at the planned concurrency and with the engine full of
    short requests (`limit`), and time to first token."""

    one: DecodePoint
    planned: DecodePoint
    limit: DecodePoint
    ttft_max_len_s: float
    ttft_max_len_range_s: tuple[float, float]
    ttft_1k_s: float
    ttft_1k_range_s: tuple[float, float]
    prefill_source: str
    node_bandwidth_gbps: float
    node_prefill_gflops: tuple[float, float]
    #: What one stream reads per token at the longest context, every stage's weights and KV
    #: together (bytes): x `one.aggregate_tokens_per_s` it never exceeds `node_bandwidth_gbps`.
    one_stream_bytes_per_token: float = 0.0
    #: Where the node's bandwidth comes from (`catalog.DecodeBandwidth.basis`).
    bandwidth_bound: str = ""
    #: Whether that bandwidth was measured on this type (calibrated), not extrapolated.
    bandwidth_measured: bool = False
    #: The high end of the node's bandwidth range, and one stream's tokens/s at it; equal to
    #: `node_bandwidth_gbps` and `one` on the measured type.
    node_bandwidth_high_gbps: float = 0.0
    one_stream_high_tokens_per_s: float = 0.0


def stage_loads(profile: ModelProfile, layers: list[tuple[int, int]]) -> list[StageLoad]:
    """Per stage (sliding, full) layer counts -> what each stage streams per step.

    The last stage also reads the output head for every token (the embedding matrix, tied or not).
    """
    loads = []
    for rank, (sliding, full) in enumerate(layers):
        step = read = (sliding + full) * profile.layer_bytes
        if profile.is_moe:
            from infra.plan import moe  # the MoE layer, for a mixture-of-experts model only

            step = moe.step_weight_bytes(profile, sliding + full)
            read = moe.read_bytes(profile, sliding + full)
        params = (sliding + full) * profile.active_layer_params
        head = 0.0
        if rank == len(layers) - 1:
            head = profile.embedding_bytes
            params += profile.embedding_bytes / profile.dtype_bytes
        loads.append(StageLoad(step + head, params, sliding, full, read + head, head))
    return loads


def _kv_read_bytes(profile: ModelProfile, load: StageLoad, context: int) -> float:
    sliding = profile.sliding_kv_heads * profile.sliding_head_dim * 2 * profile.dtype_bytes
    full = profile.full_kv_heads * profile.full_head_dim * 2 * profile.dtype_bytes
    return load.sliding_layers * sliding * min(context, profile.sliding_window) + (
        load.full_layers * full * context
    )


def bytes_per_token(profile: ModelProfile, loads: list[StageLoad], context: int) -> float:
    """What one stream at `context` tokens reads per token across every stage (bytes)."""
    return sum(load.read_bytes + _kv_read_bytes(profile, load, context) for load in loads)


def decode_point(
    profile: ModelProfile,
    loads: list[StageLoad],
    bandwidth: float,
    flops: float,
    sequences: int,
    context: int,
) -> DecodePoint:
    """Aggregate decode tokens/s of `sequences` streams at `context` tokens (see the module doc)."""
    stages = len(loads)
    in_flight = min(sequences, stages)
    batch = sequences / in_flight
    times, arithmetic = [], False
    for load in loads:
        weight = load.step_bytes(profile, math.ceil(batch))
        memory = (weight + batch * _kv_read_bytes(profile, load, context)) / bandwidth
        compute = batch * 2 * load.params / flops
        arithmetic = arithmetic or compute > memory
        times.append(max(memory, compute))
    period = max(sum(times), in_flight * max(times))
    aggregate = sequences / period
    return DecodePoint(
        sequences,
        context,
        round(aggregate, 2),
        round(aggregate / sequences, 3),
        "arithmetic" if arithmetic else "memory",
    )


def served(
    profile: ModelProfile,
    instance: InstanceType,
    pod_cpu: int,
    layers: list[tuple[int, int]],
    max_model_len: int,
    max_concurrency: float,
    busiest: tuple[int, int],
    max_num_batched_tokens: int,
    path: str = "onednn",
) -> Served:
    """The served-tokens and time-to-first-token figures of one planned group.

    `busiest` is (sequences, context): the most requests of `SHORT_PROMPT_TOKENS` (or the whole
    context, if shorter) that the engine runs at once, as its KV blocks and `max_num_seqs` allow.
    """
    loads = stage_loads(profile, layers)
    slow, mid, fast = prefill.nodes(instance, pod_cpu, profile.weights, path)
    work = prefill.stage_work(profile, layers)
    planned = max(1, math.floor(max_concurrency))

    def ttft(tokens: int, node: prefill.Node) -> float:
        seconds = prefill.prefill_seconds(profile, work, node, tokens, max_num_batched_tokens)
        return round(seconds, 1)

    def decode(sequences: int, context: int, bandwidth: float = mid.bandwidth) -> DecodePoint:
        return decode_point(profile, loads, bandwidth, mid.flops, sequences, context)

    band = catalog.decode_bandwidth(instance, pod_cpu)
    if profile.is_moe:
        from infra.plan import moe  # the MoE layer, for a mixture-of-experts model only
    return Served(
        one=decode(1, max_model_len),
        planned=decode(planned, max_model_len),
        limit=decode(*busiest),
        ttft_max_len_s=ttft(max_model_len, mid),
        ttft_max_len_range_s=(ttft(max_model_len, fast), ttft(max_model_len, slow)),
        ttft_1k_s=ttft(SHORT_PROMPT_TOKENS, mid),
        ttft_1k_range_s=(ttft(SHORT_PROMPT_TOKENS, fast), ttft(SHORT_PROMPT_TOKENS, slow)),
        prefill_source=(
            moe.prefill_source(profile)
            if profile.is_moe
            else catalog.PREFILL_SOURCES[path]
            if profile.weights == "bf16"
            else weights.PREFILL_SOURCE
        ),
        node_bandwidth_gbps=round(mid.bandwidth / 1e9, 1),
        node_prefill_gflops=(round(slow.flops / 1e9), round(fast.flops / 1e9)),
        one_stream_bytes_per_token=round(bytes_per_token(profile, loads, max_model_len)),
        bandwidth_bound=band.basis,
        bandwidth_measured=band.measured,
        node_bandwidth_high_gbps=round(fast.bandwidth / 1e9, 1),
        one_stream_high_tokens_per_s=decode(
            1, max_model_len, fast.bandwidth
        ).aggregate_tokens_per_s,
    )
