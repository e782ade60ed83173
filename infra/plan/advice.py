"""Refusals that name the key the user set with a fix that is itself accepted, and the advice a
plan gives: a what-if that changes the node count or cost, the stack's own keys to change first,
and another type that does the job for less or faster for the same money.

The planner refuses in terms of what it was deciding (often `instanceType`, which a stack may never
have set). Here a refusal is checked against the keys the user did set: when putting one of them
back to its default lets the stack start, that key is named instead; a refusal that names a type
suggests one that has been planned and starts.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from pydantic_core import PydanticUndefined

from infra.plan import catalog
from infra.plan.compare import SIZE_FIELDS, Need, candidate_config, compare
from infra.plan.config import ConfigError, StackConfig
from infra.plan.economics import Economics, economics
from infra.plan.sizing import Plan, PlanError, plan

#: Keys that describe the stack rather than size it: never reset to find the culprit.
_IDENTITY = {"owner", "end_date", "region", "availability_zone", "control_plane_zone", "tags"}


def _field(key: str) -> str | None:
    for name, info in StackConfig.model_fields.items():
        if (info.alias or name) == key:
            return name
    return None


def _text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _starts(cfg: StackConfig, stack: str) -> Plan | None:
    try:
        return plan(cfg, stack)
    except ConfigError:
        return None


def _cheapest_type(cfg: StackConfig, stack: str, today: dt.date) -> tuple[str, Economics] | None:
    """The lowest $/month catalogue type on which this exact stack starts."""
    best: tuple[str, Economics] | None = None
    for name in catalog.INSTANCE_TYPES:
        candidate = cfg.model_copy(update={"instance_type": name})
        p = _starts(candidate, stack)
        if p is None:
            continue
        econ = economics(candidate, p, today)
        month = econ.costs.usd_per_month
        if month is not None and (best is None or month < best[1].costs.usd_per_month):  # type: ignore[operator]
            best = (name, econ)
    return best


def explain(
    error: PlanError, cfg: StackConfig, stack: str, user_keys: Sequence[str], today: dt.date
) -> ConfigError:
    """`error`, re-aimed at the key the user set, with a fix that has been checked to start."""
    if error.key not in user_keys:
        for key in user_keys:
            name = _field(key)
            if name is None or name in _IDENTITY:
                continue
            default = StackConfig.model_fields[name].default
            if default is PydanticUndefined or getattr(cfg, name) == default:
                continue
            if _starts(cfg.model_copy(update={name: default}), stack) is not None:
                return ConfigError(
                    key,
                    f"{_text(getattr(cfg, name))} stops this stack from starting (with it, "
                    f"`{error.key}` {error.rule})",
                    f"remove it or set it to {_text(default)}",
                )
    if error.key == "instanceType":
        lowered = cfg.instance_type.lower()
        if (
            lowered != cfg.instance_type
            and lowered in catalog.INSTANCE_TYPES
            and _starts(cfg.model_copy(update={"instance_type": lowered}), stack) is not None
        ):
            return PlanError(error.key, error.rule, f"use {lowered}")
        best = _cheapest_type(cfg, stack, today)
        if best is None:
            fix = "no catalogue type starts this stack as set; put its size keys back to auto"
        else:
            name, econ = best
            fix = (
                f"choose {name}, the cheapest type that starts this stack "
                f"(${econ.costs.usd_per_month:,.2f}/month; `--compare` ranks them all)"
            )
        return PlanError(error.key, error.rule, fix)
    return error


def change_warning(
    base_cfg: StackConfig,
    cfg: StackConfig,
    p: Plan,
    econ: Economics,
    overrides: dict[str, object],
    stack: str,
    today: dt.date,
) -> str | None:
    """A warning when `--set` values change the node count, the type or the cost against the
    stack as written."""
    if not overrides:
        return None
    base = _starts(base_cfg, stack)
    if base is None:
        return None
    base_econ = economics(base_cfg, base, today)
    if base.nodes == p.nodes and base.instance_type == p.instance_type:
        return None
    what = ", ".join(f"{k}={_text(v)}" for k, v in overrides.items())
    head = f"{p.nodes} x {p.instance_type} instead of {base.nodes} x {base.instance_type}"
    reason = ""
    if p.instance_type == base.instance_type and p.stages > base.stages:
        try:
            fewer = plan(cfg.model_copy(update={"pipeline_stages": base.stages}), stack)
        except ConfigError as error:
            reason = f" leaves {base.stages} stage(s) unable to start (`{error.key}` {error.rule})"
        else:
            reason = (
                f" leaves too little KV for {base.stages} stages: {fewer.max_model_len:,} tokens "
                f"at {fewer.max_concurrency:.2f}x there, {p.max_model_len:,} at "
                f"{p.max_concurrency:.2f}x with {p.stages}"
            )
    month, base_month = econ.costs.usd_per_month, base_econ.costs.usd_per_month
    delta = (
        ""
        if month is None or base_month is None
        else f"; {'+' if month >= base_month else '-'}${abs(month - base_month):,.2f}/month"
    )
    return f"{head}: {what}{reason}{delta}"


@dataclass(frozen=True)
class Offer:
    """What one type gives a stack, in the figures advice weighs: its need (context, concurrency,
    single-stream tokens/s, time to first token) and its price (per month, per million tokens)."""

    instance_type: str
    nodes: int
    context: int
    concurrency: float
    one_stream: float
    ttft_1k_s: float
    ttft_max_s: float
    usd_per_month: float
    usd_per_million_full: float
    usd_per_million_one: float
    #: Whether `one_stream` is calibrated on this type; else the low end of an extrapolated range.
    measured: bool = True

    @classmethod
    def of(cls, p: Plan, e: Economics) -> Offer | None:
        """The offer of a planned stack; None when it has no price."""
        month, full, one = e.costs.usd_per_month, e.usd_per_million_full, e.usd_per_million_one
        if month is None or full is None or one is None:
            return None
        s = e.served
        return cls(
            p.instance_type,
            p.nodes,
            p.max_model_len,
            p.max_concurrency,
            s.one.aggregate_tokens_per_s,
            s.ttft_1k_s,
            s.ttft_max_len_s,
            month,
            full,
            one,
            s.bandwidth_measured,
        )

    @classmethod
    def from_json(cls, row: dict[str, object]) -> Offer:
        """The offer of one `--compare --json` row that starts."""
        return cls(
            **{name: row[key] for name, key in _JSON_KEYS.items()}  # type: ignore[arg-type]
        )


#: Offer field -> its key in a `--compare --json` row.
_JSON_KEYS = {
    "instance_type": "instance_type",
    "nodes": "nodes",
    "context": "max_model_len",
    "concurrency": "max_concurrency",
    "one_stream": "decode_tokens_per_s_one_stream",
    "ttft_1k_s": "ttft_s_at_1k",
    "ttft_max_s": "ttft_s_at_max_len",
    "usd_per_month": "usd_per_month",
    "usd_per_million_full": "usd_per_million_tokens_full_load",
    "usd_per_million_one": "usd_per_million_tokens_one_stream",
    "measured": "bandwidth_measured",
}

#: Figures are compared as the plan prints them (cents, hundredths of a token/s); closer than
#: this is a tie, never a reason to move.
_CENT = 0.005
#: "The same money" per month: the load balancer's capacity line grows with the tokens a plan
#: serves, by cents, so a plan that serves more is not dearer for that.
_SAME_MONEY = 1.0


def no_worse(offer: Offer, stack: Offer) -> bool:
    """`offer` meets everything the stack does: its context, its whole concurrency, its
    single-stream rate and its time to first token, short prompt and longest."""
    return (
        offer.context >= stack.context
        and math.floor(offer.concurrency) >= max(1, math.floor(stack.concurrency))
        and offer.one_stream >= stack.one_stream
        and offer.ttft_1k_s <= stack.ttft_1k_s
        and offer.ttft_max_s <= stack.ttft_max_s
    )


def better_buy(stack: Offer, offers: Iterable[Offer]) -> tuple[str, Offer] | None:
    """("cheaper", o): the lowest $/month offer no worse than the stack that costs less per month
    AND per million tokens; else ("faster for the same money", o): the fastest single stream no
    worse than the stack at no more per month; else None."""
    fit = [o for o in offers if o.instance_type != stack.instance_type and no_worse(o, stack)]
    cheaper = [
        o
        for o in fit
        if o.usd_per_month < stack.usd_per_month - _CENT
        and o.usd_per_million_full < stack.usd_per_million_full - _CENT
        and o.usd_per_million_one < stack.usd_per_million_one - _CENT
    ]
    if cheaper:
        return "cheaper", min(cheaper, key=lambda o: (o.usd_per_month, o.usd_per_million_full))
    faster = [
        o
        for o in fit
        if o.usd_per_month <= stack.usd_per_month + _SAME_MONEY and o.one_stream > stack.one_stream
    ]
    if faster:
        return "faster for the same money", max(
            faster, key=lambda o: (o.one_stream, -o.usd_per_month)
        )
    return None


def offer_text(offer: Offer, basis: str = "") -> str:
    """An offer's figures, as a verdict line quotes them: price first (on `basis`, the month the
    verdict prices the stack on), then the need."""
    return (
        f"{offer.nodes} x {offer.instance_type}, ${offer.usd_per_month:,.2f}/month{basis}, "
        f"${offer.usd_per_million_full:.2f} per million tokens; {offer.context:,} tokens x "
        f"{offer.concurrency:.2f}, {offer.one_stream:.2f} tokens/s per stream"
        f"{'' if offer.measured else ' (extrapolated: the low end)'}, first token "
        f"~{offer.ttft_max_s:.0f} s"
    )


def _sets(pairs: Sequence[tuple[str, object]]) -> str:
    return " ".join(f"--set {key}={_text(value)}" for key, value in pairs)


def buy_line(cfg: StackConfig, p: Plan, econ: Economics, stack: str, today: dt.date) -> str | None:
    """`cheaper: ...` or `faster for the same money: ...` with the `--set` that gets it, or None.

    Every catalogue type is planned as `--compare` plans it (the stack's node-size keys back to
    auto), so the `--set` names those keys too when the stack pins them."""
    own = _on_basis(cfg, p, Offer.of(p, econ), today)
    if own is None:
        return None
    need = Need(p.max_model_len, max(1, math.floor(p.max_concurrency)))
    offers = [
        o
        for c in compare(cfg, need, stack, today).ranked
        if c.plan is not None and c.econ is not None
        for o in [
            _on_basis(
                candidate_config(cfg, c.instance_type, need),
                c.plan,
                Offer.of(c.plan, c.econ),
                today,
            )
        ]
        if o is not None
    ]
    found = better_buy(own, offers)
    if found is None:
        return None
    kind, offer = found
    pinned = candidate_config(cfg, offer.instance_type, need)
    reset = [name for name in SIZE_FIELDS if getattr(cfg, name) != getattr(pinned, name)]
    keys = [("instanceType", offer.instance_type)] + [(_alias(n), "auto") for n in reset]
    return f"{kind}: {offer_text(offer, _basis(cfg))} ({_sets(keys)})"


def _basis(cfg: StackConfig) -> str:
    """The month an offer is priced on, as the verdict's cost line prices the stack's own: an
    elastic stack's schedule month (else its most groups'), system nodes included."""
    if not cfg.elastic:
        return ""
    if cfg.schedule is not None:
        return " on its schedule, system nodes included"
    return f" with {cfg.most_groups} groups, system nodes included"


def _on_basis(cfg: StackConfig, p: Plan, offer: Offer | None, today: dt.date) -> Offer | None:
    """`offer` with its month on `_basis`: a fixed stack's as planned; an elastic stack's (or an
    alternative type's under the same elasticity keys) its schedule month, else its most
    groups' month. None when that month has no price or the type cannot scale so."""
    if offer is None or not cfg.elastic:
        return offer
    from infra.plan import elastic  # the elastic figures, for an elastic stack only

    try:
        scaled = elastic.elastic_plan(cfg, p, today)
    except ConfigError:
        return None
    assert scaled is not None  # an elastic stack has its elastic plan
    month = scaled.usd_month_schedule if cfg.schedule is not None else scaled.usd_month_most
    return None if month is None else replace(offer, usd_per_month=month)


def _alias(name: str) -> str:
    info = StackConfig.model_fields[name]
    return info.alias or name


#: Keys the plan sizes from memory; `change_first` tries putting the user's values back.
_SIZE_KEYS = (
    "weight_prefetch",
    "pod_memory_gib",
    "pipeline_stages",
    "kv_cache_bytes",
    "max_num_batched_tokens",
    "max_model_len",
)
#: What the memory guard sees follows from these two; every other size key is derived from what
#: it sees. So they are named first: a KV budget sized for a starved guard was a consequence.
_CAUSES = ("weight_prefetch", "pod_memory_gib")


def change_first(
    cfg: StackConfig, p: Plan, econ: Economics, stack: str, today: dt.date
) -> str | None:
    """`change first: ...`: the stack's own size keys that, put back to their defaults, serve at
    least as long a context to at least as many requests for no more money, and better on one;
    the set that serves most (then costs least, then names fewest keys), its causes first."""
    own = Offer.of(p, econ)
    if own is None:
        return None
    changed = [
        name for name in _SIZE_KEYS if getattr(cfg, name) != StackConfig.model_fields[name].default
    ]
    best: tuple[tuple[float, ...], tuple[str, ...], Plan, Offer] | None = None
    for mask in range(1, 2 ** len(changed)):
        names = tuple(n for i, n in enumerate(changed) if mask >> i & 1)
        trial = cfg.model_copy(update={n: StackConfig.model_fields[n].default for n in names})
        q = _starts(trial, stack)
        offer = None if q is None else Offer.of(q, economics(trial, q, today))
        if q is None or offer is None or not _improves(offer, own):
            continue
        rank = (-offer.context, -offer.concurrency, offer.usd_per_month, len(names))
        if best is None or rank < best[0]:
            best = (rank, names, q, offer)
    if best is None:
        return None
    _, names, q, offer = best
    ordered = sorted(names, key=lambda n: (n not in _CAUSES, _SIZE_KEYS.index(n)))
    keys = [(_alias(n), StackConfig.model_fields[n].default) for n in ordered]
    guard = (
        f"; the memory guard then sees {q.guard_available_gib:.2f} GiB, not "
        f"{p.guard_available_gib:.2f}"
        if q.guard_available_gib != p.guard_available_gib
        else ""
    )
    return f"change first: {_sets(keys)}: {offer_text(offer)}{guard}"


def _improves(offer: Offer, own: Offer) -> bool:
    """At least as long a context to at least as many requests for no more money, and strictly
    better on one. (Single-stream speed is not weighed: it falls a little as the context grows.)"""
    if not (
        offer.context >= own.context
        and offer.concurrency >= own.concurrency
        and offer.usd_per_month <= own.usd_per_month + _SAME_MONEY
    ):
        return False
    return (
        offer.context > own.context
        or math.floor(offer.concurrency) > math.floor(own.concurrency)
        or offer.usd_per_month < own.usd_per_month - _CENT
    )
