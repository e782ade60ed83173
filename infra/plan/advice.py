"""Refusals that name the key the user set with a fix that is itself accepted, and the loud lines a
plan ends with: a what-if that changes the node count or cost, and a cheaper type for the job.

The planner refuses in terms of what it was deciding (often `instanceType`, which a stack may never
have set). Here a refusal is checked against the keys the user did set: when putting one of them
back to its default lets the stack start, that key is named instead; a refusal that names a type
suggests one that has been planned and starts.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

from pydantic_core import PydanticUndefined

from infra.plan import addons, catalog, readiness
from infra.plan.compare import Need, compare
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


def checked_plan(cfg: StackConfig, stack: str, user_keys: Sequence[str], today: dt.date) -> Plan:
    """`plan`, with any refusal passed through `explain`."""
    try:
        result = plan(cfg, stack)
    except PlanError as error:
        raise explain(error, cfg, stack, user_keys, today) from None
    addons.check_pinned(cfg.kubernetes_version)
    readiness.check_quota(cfg, result)
    return result


def change_warning(
    base_cfg: StackConfig,
    cfg: StackConfig,
    p: Plan,
    econ: Economics,
    overrides: dict[str, object],
    stack: str,
    today: dt.date,
) -> str | None:
    """A loud line when `--set` values change the node count, the type or the cost against the
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
    return f"WARNING {head}: {what}{reason}{delta}"


def cheaper_line(
    cfg: StackConfig, p: Plan, econ: Economics, stack: str, today: dt.date
) -> str | None:
    """One line naming the cheapest type that does the same job for less, if there is one."""
    month = econ.costs.usd_per_month
    if month is None:
        return None
    need = Need(p.max_model_len, max(1, math.floor(p.max_concurrency)))
    cheaper = [
        c
        for c in compare(cfg, need, stack, today).ranked
        if c.econ is not None
        and c.econ.costs.usd_per_month is not None
        and c.econ.costs.usd_per_month < month - 0.005
    ]
    if not cheaper:
        return None
    best = min(cheaper, key=lambda c: c.econ.costs.usd_per_month)  # type: ignore[union-attr]
    assert best.econ is not None and best.plan is not None
    return (
        f"cheaper: {best.instance_type} ({best.plan.nodes} node(s)) serves the same "
        f"{need.describe()} for ${best.econ.costs.usd_per_month:,.2f}/month instead of "
        f"${month:,.2f} (${best.econ.usd_per_million_full:.2f} vs ${econ.usd_per_million_full:.2f} "
        f"per million tokens): --set instanceType={best.instance_type}"
    )
