"""The EKS add-on versions a stack deploys: one pinned row per supported Kubernetes version.

Nothing is looked up at deploy time (no `get_addon_version`, no `mostRecent`): a `pulumi up` with
no change deploys the same add-ons, and an add-on upgrade is a reviewed edit of this table that
shows in the preview diff. Changing `kubernetesVersion` moves every add-on to that version's row.

Each pin carries where it was read and when. `confirmed` is False where the source read lists the
version but not for this Kubernetes version: the plan warns, naming the command that confirms it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from infra.plan.config import ConfigError

VPC_CNI = "vpc-cni"
KUBE_PROXY = "kube-proxy"
COREDNS = "coredns"
EBS_CSI = "aws-ebs-csi-driver"
CLOUDWATCH = "amazon-cloudwatch-observability"
IDENTITY_AGENT = "eks-pod-identity-agent"
#: Every add-on the program installs (pulumi-eks installs vpc-cni and kube-proxy with the
#: cluster; the program installs the others).
ADDONS = (VPC_CNI, KUBE_PROXY, COREDNS, EBS_CSI, CLOUDWATCH, IDENTITY_AGENT)


@dataclass(frozen=True)
class AddonPin:
    """One add-on version for one Kubernetes version, with where it was read."""

    version: str
    source: str
    read: dt.date
    #: True when the source lists this version for this Kubernetes version.
    confirmed: bool = True


_READ = dt.date(2026, 12, 1)
_COREDNS_SRC = "docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-coredns.md, versions table"
_PROXY_SRC = "docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md, versions table"
_CNI_SRC = (
    "docs.aws.amazon.com/ja_jp/eks/latest/userguide/pod-networking.html, versions table (one "
    "version for every row, 1.27-1.33)"
)
#: Two public configurations, independent of each other, read 2026-12-03, that list one version
#: per add-on per Kubernetes version; both give kube-proxy v1.34.6-eksbuild.13 and
#: v1.35.3-eksbuild.13, this table's own pins from AWS's page, so they were written in the same
#: weeks as it: an EKS upgrade guide's "Version Reference" table for 1.33, 1.34 and 1.35 ("All
#: addon versions sourced live from `aws eks describe-addon-versions`"), and an aws-cdk-lib
#: aws-eks-v2 cluster's add-on map (`addonVersions`, KubernetesVersion.V1_30 to V1_35). Both
#: list vpc-cni v1.22.2-eksbuild.1 and aws-ebs-csi-driver v1.61.1-eksbuild.1 for 1.34 and 1.35;
#: the upgrade guide lists the same for 1.33, the CDK map for 1.30 to 1.35, and the CDK map
#: amazon-cloudwatch-observability v6.2.0-eksbuild.1 for 1.30 to 1.35. A third, a 1.35 cluster's
#: tfvars kept by a script that reads describe-addon-versions (github.com/devopscoop/
#: project1-dev), has the builds before them: vpc-cni v1.22.1-eksbuild.2, aws-ebs-csi-driver
#: v1.60.1-eksbuild.1. (The vpc-cni page AWS keeps, read 2026-12-01, stops at 1.33.)
_PUBLIC_READ = dt.date(2026, 12, 3)
_PUBLIC_SRC = (
    "two independent public configurations read 2026-12-03: an EKS 1.33-1.35 upgrade guide's "
    "version table (from `aws eks describe-addon-versions`) and an aws-cdk-lib aws-eks-v2 "
    "cluster's add-on map per KubernetesVersion, both listing this version for this Kubernetes "
    "version"
)
_CNI_PUBLIC = AddonPin("v1.22.2-eksbuild.1", _PUBLIC_SRC, _PUBLIC_READ)
_EBS = AddonPin("v1.61.1-eksbuild.1", _PUBLIC_SRC, _PUBLIC_READ)
_CW_SRC = (
    "docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/install-CloudWatch-Observability-"
    "EKS-addon.md (names v6.2.0-eksbuild.1); its chart, aws-observability/helm-charts 6.x, has "
    "manager.applicationSignals.autoMonitor (values.yaml)"
)
_CW_PUBLIC_SRC = (
    f"{_CW_SRC}; listed for this Kubernetes version by an aws-cdk-lib aws-eks-v2 cluster's "
    "add-on map, read 2026-12-03"
)


_CW = AddonPin("v6.2.0-eksbuild.1", _CW_PUBLIC_SRC, _PUBLIC_READ)
#: One build for 1.32 to 1.35: awslabs/cdk-eks-blueprints lib/addons/eks-pod-identity-agent/
#: index.ts `versionMap` (commit 2ae00be3 of 2026-02-19, "Update EKS addon versions to match
#: describe-addon-versions defaults", for 1.32 to 1.34; commit 0b82904e of 2026-04-08 adds 1.35),
#: and a public 1.35 cluster's Terraform add-on map beside kube-proxy v1.35.0-eksbuild.2; read
#: 2026-12-03.
_AGENT = AddonPin(
    "v1.3.10-eksbuild.2",
    "awslabs/cdk-eks-blueprints eks-pod-identity-agent versionMap (describe-addon-versions "
    "defaults, 2026-02 and 2026-04) and a public 1.35 configuration, read 2026-12-03",
    _PUBLIC_READ,
)


def _row(coredns: str, kube_proxy: str, *, public_cni: bool) -> dict[str, AddonPin]:
    """One Kubernetes version's pins; `public_cni`: vpc-cni as the public configurations list
    it (AWS's own vpc-cni table has no row for this version)."""
    return {
        VPC_CNI: _CNI_PUBLIC if public_cni else AddonPin("v1.20.1-eksbuild.3", _CNI_SRC, _READ),
        KUBE_PROXY: AddonPin(kube_proxy, _PROXY_SRC, _READ),
        COREDNS: AddonPin(coredns, _COREDNS_SRC, _READ),
        EBS_CSI: _EBS,
        CLOUDWATCH: _CW,
        IDENTITY_AGENT: _AGENT,
    }


#: Kubernetes version -> add-on -> pin. Only versions EKS still runs on 2026-12-01 (1.30 and
#: 1.31 left extended support; `rules.check_dates` refuses them).
#: AWS recommends moving vpc-cni one minor version at a time (docs.aws.amazon.com/ko_kr/eks/
#: latest/userguide/cni-metrics-helper.html, read 2026-12-03): a 1.33 -> 1.34 change moves it
#: from v1.20 to v1.22 in one add-on update, so update it to a v1.21 build by hand first there.
#: 1.32 and 1.33 keep the vpc-cni build AWS's table lists for them; their aws-ebs-csi-driver and
#: CloudWatch add-on are the public configurations' (the CDK map lists both for 1.30 to 1.35).
ADDON_VERSIONS: dict[str, dict[str, AddonPin]] = {
    "1.32": _row("v1.11.4-eksbuild.40", "v1.32.13-eksbuild.16", public_cni=False),
    "1.33": _row("v1.12.4-eksbuild.18", "v1.33.10-eksbuild.13", public_cni=False),
    "1.34": _row("v1.13.2-eksbuild.11", "v1.34.6-eksbuild.13", public_cni=True),
    "1.35": _row("v1.14.3-eksbuild.3", "v1.35.3-eksbuild.13", public_cni=True),
}


def pinned(kubernetes_version: str) -> dict[str, str] | None:
    """Add-on name -> version for `kubernetes_version`, or None when the table has no row."""
    row = ADDON_VERSIONS.get(kubernetes_version)
    return None if row is None else {name: pin.version for name, pin in row.items()}


def unconfirmed(kubernetes_version: str) -> list[str]:
    """`name version` of each pin whose source does not list it for `kubernetes_version`."""
    row = ADDON_VERSIONS.get(kubernetes_version, {})
    return [f"{name} {pin.version}" for name, pin in row.items() if not pin.confirmed]


def warnings(kubernetes_version: str) -> list[str]:
    """The plan's warning about pins the source read does not list for this version."""
    loose = unconfirmed(kubernetes_version)
    if not loose:
        return []
    return [
        f"add-on pins not listed for Kubernetes {kubernetes_version} by the source read: "
        f"{', '.join(loose)}; confirm each with `aws eks describe-addon-versions "
        f"--kubernetes-version {kubernetes_version} --addon-name <name>` before the first "
        "`pulumi up` and correct infra/plan/addons.py"
    ]


def check_pinned(kubernetes_version: str) -> None:
    """Refuse a Kubernetes version whose add-ons the table does not pin."""
    if pinned(kubernetes_version) is None:
        newest = max(ADDON_VERSIONS, key=lambda v: int(v.split(".")[1]))
        raise ConfigError(
            "kubernetesVersion",
            f"{kubernetes_version} has no pinned EKS add-on versions (infra/plan/addons.py)",
            f"use {newest}, or add its row with the versions EKS lists for it",
        )
