"""Persistent per-rank volumes for the weights: the EBS CSI driver add-on, a gp3 class, and one
EBS volume with its PersistentVolume per rank's claim.

With weights on a volume, a restarted rank verifies the files instead of downloading 24 GB. The
volumes are the program's own (not provisioned by the driver), so `pulumi destroy` deletes each
one after its claim and PersistentVolume and before the driver that detaches it: nothing is left
billing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.addons import ClusterRef, addon_with_role
from components.manifests import volumes
from components.manifests.identity import CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT
from components.objects import create

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
    #: The claims (namespace, name) that each get a volume of their own, one per rank.
    claims: Sequence[tuple[str, str]] = ()
    #: Size of each volume in GiB.
    size_gib: int = 0
    #: The nodes' availability zone (EBS volumes attach only there).
    zone: pulumi.Input[str] = ""
    #: Create the driver add-on; False where the cluster runs its own (an existing cluster's,
    #: which the stack never changes).
    install_driver: bool = True


class ModelVolumes(pulumi.ComponentResource):
    """EBS CSI add-on with its IAM role, and an encrypted gp3 StorageClass bound in the pod's AZ.

    Pass the cluster's `k8s.Provider` in `opts.providers`.
    """

    storage_class: pulumi.Output[str]
    """Name of the StorageClass."""
    volume_names: dict[str, pulumi.Output[str]]
    """Claim name -> the PersistentVolume bound to it (the claim's `volumeName`)."""
    driver: aws.eks.Addon | None
    """The CSI driver add-on; claims bind only once it runs. None: the cluster's own."""

    def __init__(
        self, name: str, args: ModelVolumesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:storage:ModelVolumes", name, None, opts)
        self.driver = (
            addon_with_role(
                f"{name}-csi",
                args.cluster,
                addon=ADDON,
                namespace=CONTROLLER_NAMESPACE,
                service_account=CONTROLLER_SERVICE_ACCOUNT,
                parent=self,
            )
            if args.install_driver
            else None
        )
        after_driver = [self.driver] if self.driver is not None else []
        obj = volumes.storage_class(args.storage_class, args.throughput_mibps, args.volume_tags)
        sc = create(obj, f"{name}-gp3", parent=self, depends_on=after_driver)
        self.volume_names = {
            claim[1]: self._volume(name, args, claim, sc.metadata.name, after_driver)
            for claim in args.claims
        }
        self.storage_class = sc.metadata.name
        self.register_outputs({"storageClass": self.storage_class})

    def _volume(
        self,
        name: str,
        args: ModelVolumesArgs,
        claim: tuple[str, str],
        storage_class: pulumi.Output[str],
        after_driver: list[pulumi.Resource],
    ) -> pulumi.Output[str]:
        """One encrypted gp3 volume and the PersistentVolume that binds it to `claim` only."""
        volume = aws.ebs.Volume(
            f"{name}-{claim[1]}",
            availability_zone=args.zone,
            size=args.size_gib,
            type="gp3",
            throughput=args.throughput_mibps,
            encrypted=True,
            # Created after the driver, so deleted before it: the driver detaches the volume
            # from a node that still runs it while Pulumi retries the deletion.
            opts=pulumi.ResourceOptions(parent=self, depends_on=after_driver),
        )
        pv_name = volumes.static_volume_name(claim)

        def manifest(parts: list[str]) -> dict[str, object]:
            volume_id, zone, class_name = parts
            return volumes.static_volume(pv_name, claim, class_name, args.size_gib, volume_id, zone)

        obj = pulumi.Output.all(volume.id, args.zone, storage_class).apply(manifest)
        pv = k8s.core.v1.PersistentVolume(
            f"{name}-{claim[1]}-pv",
            metadata=obj.apply(lambda o: o["metadata"]),
            spec=obj.apply(lambda o: o["spec"]),
            opts=pulumi.ResourceOptions(parent=self, depends_on=after_driver),
        )
        return pv.metadata.name
