"""Persistent per-rank volumes for the weights: the EBS CSI driver add-on and a gp3 class.

With weights on a volume, a restarted rank verifies the files instead of downloading 24 GB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import manifests
from components.addons import ClusterRef, addon_with_role, aws_managed_policy

ADDON = "aws-ebs-csi-driver"


@dataclass(frozen=True)
class ModelVolumesArgs:
    """The cluster that gets the driver, and the storage class the model's claims name."""

    #: The cluster the add-on goes into.
    cluster: ClusterRef
    #: Storage class name; the LeaderWorkerSet's volumeClaimTemplates refer to it.
    storage_class: str
    #: gp3 throughput in MiB/s.
    throughput_mibps: int
    #: Tags for every volume the driver creates (the provider's default tags do not reach them).
    volume_tags: Mapping[str, str] = field(default_factory=dict)


class ModelVolumes(pulumi.ComponentResource):
    """EBS CSI add-on with its IAM role, and an encrypted gp3 StorageClass bound in the pod's AZ.

    Pass the cluster's `k8s.Provider` in `opts.providers`.
    """

    storage_class: pulumi.Output[str]
    """Name of the StorageClass."""
    driver: aws.eks.Addon
    """The CSI driver add-on; claims bind only once it runs."""

    def __init__(
        self, name: str, args: ModelVolumesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:storage:ModelVolumes", name, None, opts)
        self.driver = addon_with_role(
            f"{name}-csi",
            args.cluster,
            addon=ADDON,
            namespace="kube-system",
            service_account="ebs-csi-controller-sa",
            managed_policy_arns=[aws_managed_policy("service-role/AmazonEBSCSIDriverPolicy", self)],
            parent=self,
        )
        obj = manifests.storage_class(args.storage_class, args.throughput_mibps, args.volume_tags)
        sc = k8s.storage.v1.StorageClass(
            f"{name}-gp3",
            metadata=obj["metadata"],
            provisioner=obj["provisioner"],
            parameters=obj["parameters"],
            volume_binding_mode=obj["volumeBindingMode"],
            reclaim_policy=obj["reclaimPolicy"],
            allow_volume_expansion=obj["allowVolumeExpansion"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.driver]),
        )
        self.storage_class = sc.metadata.name
        self.register_outputs({"storageClass": self.storage_class})
