"""Warnings about a stack that will deploy but should not stay as it is: pure, dated by the caller.

The plan CLI prints them; the program logs them with `pulumi.log.warn`, so they show in every
preview. Support dates and prices: `infra.plan.prices` (`EKS_VERSIONS`, `SERVICES`).
"""

from __future__ import annotations

import datetime as dt

from infra.plan import catalog, prices
from infra.plan.config import StackConfig


def _newest_supported(today: dt.date) -> str | None:
    current = [v for v in prices.EKS_VERSIONS.values() if v.end_of_standard > today]
    return max(current, key=lambda v: v.end_of_standard).version if current else None


def warnings(cfg: StackConfig, today: dt.date) -> list[str]:
    """What the operator should act on, each with the key to change."""
    found: list[str] = []
    version = cfg.kubernetes
    newest = _newest_supported(today)
    upgrade = f"set `kubernetesVersion` to {newest}" if newest else "upgrade"
    extended, standard = (prices.SERVICES[f"eks_{s}"].usd for s in ("extended", "standard"))
    rates = f"${extended:.2f}/h instead of ${standard:.2f}/h"
    if version is not None:
        left = (version.end_of_standard - today).days
        if left < 0:
            found.append(
                f"`kubernetesVersion` {version.version} left EKS standard support on "
                f"{version.end_of_standard}: the control plane costs {rates}; {upgrade}"
            )
        elif left <= catalog.SUPPORT_WARNING_DAYS:
            found.append(
                f"`kubernetesVersion` {version.version} leaves EKS standard support on "
                f"{version.end_of_standard} (in {left} days); after that the control plane "
                f"costs {rates}; {upgrade}"
            )
    if cfg.revision is None:
        found.append(
            f"`modelRevision` is not pinned and the catalogue holds no checked commit of "
            f"{cfg.model}: every rank downloads `main` on its own and two ranks can load "
            "different commits; set it to a 40-character commit SHA"
        )
    if any(net.prefixlen == 0 for net in cfg.endpoint_public_access_cidrs or ()):
        found.append(
            "`endpointPublicAccessCidrs` admits the whole internet to the EKS API endpoint; "
            "list only your operators' and CI runners' ranges"
        )
    return found
