"""The model cache's volumes (`modelCache: volume`): the StorageClass the claims use and the
PersistentVolume bound to each EBS volume the program creates (`components.storage`)."""

from __future__ import annotations

from collections.abc import Mapping

from components.manifests.spec import Manifest


def static_volume_name(claim: tuple[str, str]) -> str:
    """The PersistentVolume the program makes for `claim` (namespace, name)."""
    return f"{claim[0]}-{claim[1]}"


def static_volume(
    name: str,
    claim: tuple[str, str],
    storage_class: str,
    size_gib: int,
    volume_id: str,
    zone: str,
) -> Manifest:
    """A PersistentVolume for one EBS volume the program created, bound to `claim` (namespace,
    name) only. `Retain`: the volume is Pulumi's, which deletes it after this object and before
    the CSI driver that detaches it (terraform-provider-aws internal/service/ec2/ebs_volume.go
    `resourceEBSVolumeDelete` retries DeleteVolume while the volume is in use, within the delete
    timeout). A volume the driver provisioned dynamically would instead be deleted by the driver
    after its claim, possibly after Pulumi had already removed the driver, and be left billing.
    """
    namespace, claim_name = claim
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "gemma-graviton"}},
        "spec": {
            "capacity": {"storage": f"{size_gib}Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "claimRef": {"namespace": namespace, "name": claim_name},
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": volume_id, "fsType": "ext4"},
            # EBS volumes attach only in their own zone.
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "topology.kubernetes.io/zone",
                                    "operator": "In",
                                    "values": [zone],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def storage_class(
    name: str, throughput_mibps: int, tags: Mapping[str, str] | None = None
) -> Manifest:
    """Encrypted gp3 through the EBS CSI driver, bound where the pod lands (the node's zone).

    `tags` go on every volume the driver creates: parameters named `tagSpecification_<n>` with
    "key=value" values (aws-ebs-csi-driver docs/tagging.md, v1.6.0 and later); the provider's
    default tags never reach volumes the driver creates.
    """
    parameters = {"type": "gp3", "encrypted": "true", "throughput": str(throughput_mibps)}
    for index, (key, value) in enumerate(sorted((tags or {}).items()), start=1):
        parameters[f"tagSpecification_{index}"] = f"{key}={value}"
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "gemma-graviton"}},
        "provisioner": "ebs.csi.aws.com",
        "parameters": parameters,
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": True,
    }
