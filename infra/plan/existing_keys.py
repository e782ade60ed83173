"""The checks of a stack read into a cluster it does not own (`existingCluster`): the keys of
the network and cluster it would create are refused, and so is an elastic stack. The config
model runs them only when `existingCluster` is set."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.plan.config_parts import ConfigError

if TYPE_CHECKING:
    from infra.plan.config import StackConfig

#: Keys that shape the network and the cluster the stack creates; with `existingCluster`
#: it creates neither, and an access entry or an endpoint range would change the owner's.
NOT_WITH_EXISTING_CLUSTER = (
    "vpcCidr",
    "nodeSubnets",
    "controlPlaneZone",
    "endpointPublicAccessCidrs",
    "clusterAdminArns",
    "clusterViewerArns",
)


def check(cfg: StackConfig) -> None:
    """`lwsInstalled` written, no key of the network or cluster the stack would create, and no
    elasticity."""
    given = {type(cfg).model_fields[n].alias or n for n in cfg.model_fields_set}
    if "lwsInstalled" not in given:
        # Its default (false) installs a second controller beside one the cluster may run,
        # whose CRDs and webhooks the chart would then fight over (components.leaderworkerset).
        # A stack deployed before the key was required installed its own (the default): it
        # must say false, since true would delete that controller and, for a stack that never
        # recorded the CRDs as kept, the CRDs and every LeaderWorkerSet with them.
        raise ConfigError(
            "lwsInstalled",
            f"must be written with `existingCluster` ({cfg.existing_cluster}): false installs "
            "the stack's LeaderWorkerSet controller, which clashes with one the cluster runs; "
            "true uses the cluster's",
            "write false if `pulumi stack --show-urns` lists an LwsController (this stack "
            "installed LWS already) or the cluster runs no LWS; true only where the cluster's "
            "owner runs it (`kubectl get deploy -A | grep lws-controller-manager`, not the "
            "stack's)",
        )
    for key in NOT_WITH_EXISTING_CLUSTER:
        if key in given:
            raise ConfigError(
                key,
                f"shapes the network or cluster the stack creates, but with "
                f"`existingCluster` ({cfg.existing_cluster}) it creates neither and changes "
                "nothing of the cluster's",
                "remove it (the cluster's owner manages its network, endpoint and access)",
            )
    if cfg.elastic:
        raise ConfigError(
            "minGroups",
            f"makes the stack elastic, which installs a Cluster Autoscaler and KEDA that "
            f"`existingCluster` {cfg.existing_cluster} may already run",
            "set `replicas` instead of `minGroups` and `maxGroups`",
        )
