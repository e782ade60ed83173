"""`--compare`: every catalogue type planned for a stack's model, in each weight format asked
for, ranked by dollars per million output tokens among those that meet a need, with the ones that
cannot start and why.

Each candidate is the stack with only `instanceType` (and `weights`) changed and its sizes (pod
memory, stages, KV budget, batch tokens) left to the planner, so every type is planned at its
best. A quantized candidate's quality is unmeasured here, and says so; the plan's own advice
(`infra.plan.advice`) compares types in the stack's own format only.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from infra.plan import catalog, prefill, throughput
from infra.plan.config import ConfigError, StackConfig
from infra.plan.economics import Economics, economics
from infra.plan.sizing import Plan, plan
from infra.plan.weights import QUALITY_UNMEASURED, weight_format

#: Keys whose value follows from the node size; candidates leave them to the planner.
SIZE_FIELDS = ("pod_memory_gib", "pipeline_stages", "kv_cache_bytes", "max_num_batched_tokens")


@dataclass(frozen=True)
class Need:
    """What a type must serve: context tokens, concurrent requests at that context, and decode
    tokens/s per stream at that concurrency."""

    context: int
    concurrency: int = 1
    decode: float = 0.0

    def describe(self) -> str:
        text = f"{self.context:,} tokens at {self.concurrency}x"
        return text + (f", {self.decode:g} tokens/s per stream" if self.decode else "")


def parse_need(text: str, default: Need) -> Need:
    """`context=N,concurrency=X,decode=T` (any subset) over `default`."""
    values = {"context": default.context, "concurrency": default.concurrency}
    decode = default.decode
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep or name not in ("context", "concurrency", "decode"):
            raise ConfigError(
                "--need",
                f"{part!r} is not context=N, concurrency=X or decode=T",
                "write e.g. --need context=8192,concurrency=4",
            )
        try:
            number = float(raw)
        except ValueError:
            number = -1.0
        if number <= 0 or (name != "decode" and number != int(number)):
            kind = "a positive number" if name == "decode" else "a positive whole number"
            raise ConfigError(
                "--need", f"{name} must be {kind} (got {raw!r})", f"write e.g. {name}=4"
            )
        if name == "decode":
            decode = number
        else:
            values[name] = int(number)
    return Need(values["context"], values["concurrency"], decode)


@dataclass(frozen=True)
class Candidate:
    """One type: its plan and economics, or why it cannot start; and whether it meets the need."""

    instance_type: str
    #: The weight format planned (`weights`).
    weights: str
    plan: Plan | None
    econ: Economics | None
    refusal: str | None
    shortfall: str | None
    decode_at_need: float | None
    #: The model planned (`model`).
    model: str = ""

    @property
    def meets(self) -> bool:
        return self.plan is not None and self.shortfall is None

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "model": self.model,
            "instance_type": self.instance_type,
            "weights": self.weights,
            "quality": weight_format(self.weights).quality,
            "starts": self.plan is not None,
            "meets_need": self.meets,
            "refusal": self.refusal,
            "shortfall": self.shortfall,
        }
        if self.plan is not None and self.econ is not None:
            data |= {
                "nodes": self.plan.nodes,
                "stages": self.plan.stages,
                "max_model_len": self.plan.max_model_len,
                "max_concurrency": self.plan.max_concurrency,
                "decode_tokens_per_s_one_stream": self.econ.served.one.aggregate_tokens_per_s,
                "decode_bytes_per_token_one_stream": self.econ.served.one_stream_bytes_per_token,
                "decode_tokens_per_s_one_stream_high": (
                    self.econ.served.one_stream_high_tokens_per_s
                ),
                "node_bandwidth_gbps": self.econ.served.node_bandwidth_gbps,
                "node_bandwidth_high_gbps": self.econ.served.node_bandwidth_high_gbps,
                "bandwidth_measured": self.econ.served.bandwidth_measured,
                "bandwidth_bound": self.econ.served.bandwidth_bound,
                "decode_tokens_per_s_full_load": self.econ.served.planned.aggregate_tokens_per_s,
                "decode_tokens_per_s_per_stream_at_need": self.decode_at_need,
                "ttft_s_at_max_len": self.econ.served.ttft_max_len_s,
                "ttft_s_at_1k": self.econ.served.ttft_1k_s,
                "usd_per_hour": self.econ.costs.usd_per_hour,
                "usd_per_month": self.econ.costs.usd_per_month,
                "usd_per_million_tokens_full_load": self.econ.usd_per_million_full,
                "usd_per_million_tokens_one_stream": self.econ.usd_per_million_one,
            }
        return data


@dataclass(frozen=True)
class Comparison:
    need: Need
    ranked: tuple[Candidate, ...]
    short: tuple[Candidate, ...]
    refused: tuple[Candidate, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "need": {
                "context": self.need.context,
                "concurrency": self.need.concurrency,
                "decode": self.need.decode,
            },
            "ranked_by": "usd_per_million_tokens_full_load",
            "ranked": [c.to_json() for c in self.ranked],
            "starts_but_misses_need": [c.to_json() for c in self.short],
            "cannot_start": [c.to_json() for c in self.refused],
        }


def candidate_config(
    cfg: StackConfig,
    instance_type: str,
    need: Need,
    weights: str | None = None,
    model: str | None = None,
) -> StackConfig:
    """The stack on `instance_type` (in `weights`, default the stack's; serving `model`, default
    the stack's), node-size keys back to auto, the context cap at the need. A quantized format
    the stack does not name a checkpoint for is produced (`weightsSource: quantize`); another
    catalogue model is served at the catalogue's revision."""
    update: dict[str, object] = {"instance_type": instance_type}
    if model is not None and model != cfg.model:
        update |= {
            "model": model,
            "model_profile": None,
            "model_revision": "auto",
            "weights_source": "quantize",
        }
    if weights is not None and weights != cfg.weights:
        update |= {"weights": weights, "weights_source": "quantize"}
    update |= {name: "auto" for name in SIZE_FIELDS}
    if cfg.max_model_len == "auto":
        update["max_context_cap"] = max(cfg.max_context_cap, need.context)
    return cfg.model_copy(update=update)


def _per_stream(cfg: StackConfig, p: Plan, sequences: int) -> float:
    profile = cfg.profile()
    instance = catalog.INSTANCE_TYPES[p.instance_type]
    loads = throughput.stage_loads(profile, [(r.sliding_layers, r.full_layers) for r in p.ranks])
    _, mid, _ = prefill.nodes(instance, p.pod_cpu, profile.weights)
    point = throughput.decode_point(
        profile, loads, mid.bandwidth, mid.flops, sequences, p.max_model_len
    )
    return point.per_stream_tokens_per_s


def evaluate(
    cfg: StackConfig,
    instance_type: str,
    need: Need,
    stack: str,
    today: dt.date,
    weights: str | None = None,
    model: str | None = None,
) -> Candidate:
    """Plan one type for the stack (in `weights`, default the stack's; serving `model`, default
    the stack's) and judge it against the need."""
    candidate = candidate_config(cfg, instance_type, need, weights, model)
    fmt, name = candidate.weights, candidate.model
    try:
        p = plan(candidate, stack)
    except ConfigError as error:
        refusal = f"`{error.key}` {error.rule}"
        return Candidate(instance_type, fmt, None, None, refusal, None, None, name)
    econ = economics(candidate, p, today)
    decode = _per_stream(candidate, p, need.concurrency)
    shortfall = None
    if p.max_model_len < need.context:
        shortfall = f"serves {p.max_model_len:,} tokens, not {need.context:,}"
    elif p.max_concurrency < need.concurrency:
        shortfall = (
            f"holds {p.max_concurrency:.2f}x at {p.max_model_len:,} tokens, not {need.concurrency}x"
        )
    elif decode < need.decode:
        shortfall = (
            f"decodes {decode:.2f} tokens/s per stream at {need.concurrency}x, not {need.decode:g}"
        )
    elif econ.usd_per_million_full is None:
        shortfall = "no price in the catalogue"
    return Candidate(instance_type, fmt, p, econ, None, shortfall, round(decode, 3), name)


def default_need(cfg: StackConfig, stack: str) -> Need:
    """The job the stack's own plan does (its context and whole concurrency), or, when it cannot
    start, its context cap at one request."""
    try:
        p = plan(cfg, stack)
    except ConfigError:
        length = cfg.max_context_cap if cfg.max_model_len == "auto" else cfg.max_model_len
        return Need(length, 1)
    return Need(p.max_model_len, max(1, math.floor(p.max_concurrency)))


def compare(
    cfg: StackConfig,
    need: Need,
    stack: str,
    today: dt.date,
    formats: tuple[str, ...] | None = None,
    models: tuple[str, ...] | None = None,
) -> Comparison:
    """Every catalogue type for the stack in each of `formats` (default: the stack's own), for
    each of `models` (default: the stack's own): ranked, short of the need, or refused."""
    candidates = [
        evaluate(cfg, name, need, stack, today, fmt, model)
        for model in models or (cfg.model,)
        for fmt in formats or (cfg.weights,)
        for name in catalog.INSTANCE_TYPES
    ]
    ranked = sorted(
        (c for c in candidates if c.meets),
        key=lambda c: (
            c.econ.usd_per_million_full,  # type: ignore[union-attr]
            c.econ.costs.usd_per_month,  # type: ignore[union-attr]
            c.instance_type,
            c.weights,
            c.model,
        ),
    )
    short = [c for c in candidates if c.plan is not None and not c.meets]
    refused = [c for c in candidates if c.plan is None]
    return Comparison(need, tuple(ranked), tuple(short), tuple(refused))


#: Column width of the model in `format_comparison` when it ranks more than one.
MODEL_COLUMN = 22


def _model_cell(c: Candidate, many: bool) -> str:
    return f"{c.model.rsplit('/', 1)[-1]:<{MODEL_COLUMN}} " if many else ""


def _bandwidth_cell(e: Economics) -> str:
    s = e.served
    if s.bandwidth_measured:
        return f"{s.node_bandwidth_gbps:.0f}"
    return f"{s.node_bandwidth_gbps:.0f}-{s.node_bandwidth_high_gbps:.0f}"


def format_comparison(result: Comparison, current: tuple[str, ...]) -> str:
    """The human view: the ranking, then the types that miss the need, then those that cannot
    start, one line each. `current` is the stack's (type, format) or (type, format, model); a
    comparison of several models has a model column."""
    every = (*result.ranked, *result.short, *result.refused)
    many = len({c.model for c in every}) > 1
    model_head = f"{'model':<{MODEL_COLUMN}} " if many else ""
    header = (
        f"{'':2}{model_head}{'type':<12} {'weights':<7} {'nodes':>5} {'$/month':>9} "
        f"{'context':>8} {'conc':>6} {'tok/s 1':>8} {'tok/s full':>10} {'$/Mtok full':>11} "
        f"{'$/Mtok 1':>9} {'ttft max':>9} {'GB/s':>8} quality"
    )
    moe_note = ""
    if any(catalog.MODELS.get(c.model) and catalog.MODELS[c.model].is_moe for c in every):
        from infra.plan import moe_measured  # the MoE layer, a mixture-of-experts model only

        moe_note = (
            "; mixture-of-experts decode and prefill derived from a measured MoE/dense ratio ("
            + "; ".join(f"{w}: {source}" for w, source in moe_measured.SOURCES.items())
            + ")"
        )
    lines = [
        f"need: {result.need.describe()}; ranked by $ per million output tokens at full load "
        f"(on-demand list prices; bf16 decode calibrated on {catalog.MEASURED_DECODE_TYPE}, the "
        "one type measured, and on every other type extrapolated, at the low end of its "
        "bandwidth range; int8 and int4 decode, arithmetic and prefill modelled; int8 and int4 "
        f"quality {QUALITY_UNMEASURED}{moe_note})",
        "",
        header,
    ]
    for i, c in enumerate(result.ranked, 1):
        p, e = c.plan, c.econ
        assert p is not None and e is not None  # ranked candidates always have both
        own = (c.instance_type, c.weights, c.model)[: len(current)]
        mark = "*" if own == tuple(current) else " "
        cell = _model_cell(c, many)
        lines.append(
            f"{i:>2}{mark}{cell}{c.instance_type:<11} {c.weights:<7} {p.nodes:>5} "
            f"{e.costs.usd_per_month:>9.2f} "
            f"{p.max_model_len:>8,} {p.max_concurrency:>5.2f}x "
            f"{e.served.one.aggregate_tokens_per_s:>8.2f} "
            f"{e.served.planned.aggregate_tokens_per_s:>10.2f} "
            f"{e.usd_per_million_full:>11.2f} {e.usd_per_million_one:>9.2f} "
            f"{e.served.ttft_max_len_s:>8.0f}s {_bandwidth_cell(e):>8} "
            f"{weight_format(c.weights).quality}"
        )
    if result.short:
        lines += ["", "start but miss the need:"]
        lines += [
            f"  {_model_cell(c, many)}{c.instance_type:<12} {c.weights:<7} {c.shortfall}"
            for c in result.short
        ]
    if result.refused:
        lines += ["", "cannot start:"]
        lines += [
            f"  {_model_cell(c, many)}{c.instance_type:<12} {c.weights:<7} {c.refusal}"
            for c in result.refused
        ]
    lines += [
        "",
        "* the stack's type and format"
        + (" and model" if many else "")
        + ". tok/s: aggregate decode at 1 stream and at the planned concurrency; ttft max: "
        "modelled prefill of a max-length prompt; GB/s: the node's decode bandwidth, one "
        f"figure where calibrated ({catalog.MEASURED_DECODE_TYPE}), else its extrapolated range, "
        "low-high, whose low end every tok/s and $ figure uses; one `make bench` on a type "
        "settles its range.",
    ]
    return "\n".join(lines)
