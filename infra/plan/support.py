"""Warnings about a stack that will deploy but should not stay as it is: pure, dated by the caller.

The plan CLI prints them; the program logs them with `pulumi.log.warn`, so they show in every
preview.
"""

from __future__ import annotations

import datetime as dt

from infra.plan import catalog
from infra.plan.config import StackConfig


def kubernetes_support(cfg: StackConfig, today: dt.date) -> str:
    """One line on the pinned version's support window, as the plan shows it."""
    version = cfg.kubernetes
    left = (version.standard_support_end - today).days
    if left >= 0:
        return (
            f"{version.version}: standard support until {version.standard_support_end} "
            f"({left} days), then extended support until {version.extended_support_end}"
        )
    return (
        f"{version.version}: EXTENDED support since {version.standard_support_end}, until "
        f"{version.extended_support_end}"
    )


def warnings(cfg: StackConfig, today: dt.date) -> list[str]:
    """What the operator should act on, each with the key to change."""
    found: list[str] = []
    version = cfg.kubernetes
    left = (version.standard_support_end - today).days
    newer = sorted(
        (v for v in catalog.KUBERNETES_VERSIONS.values() if v.standard_support_end > today),
        key=lambda v: v.standard_support_end,
    )
    upgrade = f"set `kubernetesVersion` to {newer[-1].version}" if newer else "upgrade"
    if left < 0:
        found.append(
            f"`kubernetesVersion` {version.version} left EKS standard support on "
            f"{version.standard_support_end}: the control plane costs "
            f"${catalog.EKS_EXTENDED_USD_PER_HOUR:.2f}/h instead of "
            f"${catalog.EKS_STANDARD_USD_PER_HOUR:.2f}/h; {upgrade}"
        )
    elif left <= catalog.SUPPORT_WARNING_DAYS:
        found.append(
            f"`kubernetesVersion` {version.version} leaves EKS standard support on "
            f"{version.standard_support_end} (in {left} days); after that the control plane "
            f"costs ${catalog.EKS_EXTENDED_USD_PER_HOUR:.2f}/h instead of "
            f"${catalog.EKS_STANDARD_USD_PER_HOUR:.2f}/h; {upgrade}"
        )
    if cfg.revision is None:
        found.append(
            f"`modelRevision` is not pinned and the catalogue holds no checked commit of "
            f"{cfg.model}: every rank downloads `main` on its own and two ranks can load "
            "different commits; set it to a 40-character commit SHA"
        )
    if any(net.prefixlen == 0 for net in cfg.endpoint_public_access_cidrs):
        found.append(
            "`endpointPublicAccessCidrs` admits the whole internet to the EKS API endpoint; "
            "list only your operators' and CI runners' ranges"
        )
    return found
