"""The plan as the program and the CLI take it: `plan`, then the account's quota and the pinned
add-ons; only a refusal loads `infra.plan.advice` (and the price comparisons behind it)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from infra.plan import addons, readiness
from infra.plan.config import StackConfig
from infra.plan.sizing import Plan, PlanError, plan


def checked_plan(cfg: StackConfig, stack: str, user_keys: Sequence[str], today: dt.date) -> Plan:
    """`plan`, with any refusal passed through `advice.explain`."""
    try:
        result = plan(cfg, stack)
    except PlanError as error:
        from infra.plan import advice  # the refusal's fix, only when the plan refuses

        raise advice.explain(error, cfg, stack, user_keys, today) from None
    addons.check_pinned(cfg.kubernetes_version)
    if cfg.elastic:
        from infra.plan import elastic  # the elastic figures build on the plan

        elastic.check_quota(cfg, result)
        elastic.check_ceiling(cfg, result)
        elastic.autoscaler_tag(cfg.kubernetes_version)  # refuses a minor with no release pinned
    else:
        readiness.check_quota(cfg, result)
    return result
