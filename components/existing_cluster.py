"""The model's nodes in an EKS cluster the stack does not own: the cluster is read, never changed.

The stack adds one managed node group of the planned Graviton type in one subnet of the planned
zone, tainted so that only the stack's model pods run there (the launch template of
`components.cluster`: IMDSv2 with hop limit 1, the static CPU manager, the stack's tags on what
it launches), the Pod Identity agent when the cluster lacks it, and a Kubernetes provider for
the cluster's endpoint. Everything else of the cluster (its network, control plane, access
entries, other add-ons and nodes) is its owner's: `pulumi destroy` removes the node group and
what the stack put on it, nothing more, but leaves one thing the node group caused. In a cluster
of `API` or `API_AND_CONFIG_MAP` authentication mode (the only ones the stack takes) EKS gives
the node role an `EC2_LINUX` access entry as it creates the group and does not delete it with
the group (aws/containers-roadmap#2631); the owner does, once no group uses the role: `aws eks
delete-access-entry --cluster-name <cluster> --principal-arn <node role ARN>`.

With `lwsInstalled` the cluster's own LeaderWorkerSet controller runs the groups: its CRD is read
and checked to hold what they set (`installed_controller`) before the nodes are made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import (
    AMI_TYPE,
    IDENTITY_AGENT,
    launched_from,
    model_scaling,
    node_launch_template,
)
from components.manifests.spec import Manifest


def kubeconfig(cluster: str, endpoint: str, certificate: str, region: str) -> dict[str, Any]:
    """A kubeconfig for `cluster` that authenticates with `aws eks get-token` (the shape
    pulumi-eks and `aws eks update-kubeconfig` write), as whoever runs the program."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {"server": endpoint, "certificate-authority-data": certificate},
            }
        ],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
        "current-context": cluster,
        "users": [
            {
                "name": cluster,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": [
                            "--region",
                            region,
                            "eks",
                            "get-token",
                            "--cluster-name",
                            cluster,
                            "--output",
                            "json",
                        ],
                    }
                },
            }
        ],
    }


@dataclass(frozen=True)
class ExistingClusterArgs:
    """The cluster as the program read it, and the node group the plan asks for."""

    #: The cluster's name (`existingCluster`).
    name: str
    #: Its API endpoint and certificate authority (base64 PEM), as EKS describes them.
    endpoint: str
    certificate_authority: str
    region: str
    #: The cluster's Kubernetes version: the nodes run it too.
    kubernetes_version: str
    #: The one subnet of the planned zone the nodes go into (checked for zone and room).
    node_subnet_id: str
    instance_type: str
    node_count: int
    node_disk_gib: int
    #: Labels the model pods select.
    node_labels: Mapping[str, str]
    #: The bootstrap's node role, read by name.
    node_role: aws.iam.Role
    #: The nodes' NoSchedule taint (`spec.stack_taint`): only the pods that must run there
    #: tolerate it, so the cluster's other pods cannot take the memory the plan sized.
    node_taint: Mapping[str, str]
    #: Nodes a rollout's surge groups need above `node_count`.
    surge_nodes: int = 0
    #: Tags for each node's instance, root volume and network interfaces.
    instance_tags: Mapping[str, str] = field(default_factory=dict)
    #: The Pod Identity agent's pinned version when the stack creates it (the cluster runs
    #: none); None when the cluster's own agent serves the pods.
    identity_agent_version: str | None = None
    #: A group the cluster's own LeaderWorkerSet controller must hold (`lwsInstalled`): its CRD
    #: is read and checked before the nodes are made (`installed_controller`); None: the stack
    #: installs the controller.
    lws_group: Manifest | None = None


class ExistingCluster(pulumi.ComponentResource):
    """The node group, the agent if the cluster lacks it, and the provider, in a cluster read
    by name; the cluster itself is no resource of the stack."""

    cluster_name: pulumi.Output[str]
    """The cluster's name."""
    kubeconfig: pulumi.Output[str]
    """A JSON kubeconfig (``aws eks get-token`` exec auth), marked secret."""
    provider: k8s.Provider
    """The Kubernetes provider for the cluster's endpoint; pass it to in-cluster resources."""
    node_group: aws.eks.NodeGroup
    """The model's managed node group, for ``depends_on`` of what must run on it and go first."""
    identity_agent: aws.eks.Addon | None
    """The Pod Identity agent the stack created, or None when the cluster runs its own."""
    installed_lws: tuple[k8s.apiextensions.v1.CustomResourceDefinition, pulumi.Output[str]] | None
    """With `lws_group`: the cluster's LeaderWorkerSet CRD and its `installed_controller` check."""
    lws_checked: pulumi.Output[pulumi.Resource] | None
    """That CRD once the check passed: ``depends_on`` it, and a refusal creates nothing."""

    def __init__(
        self, name: str, args: ExistingClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:cluster:ExistingCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        config = json.dumps(
            kubeconfig(args.name, args.endpoint, args.certificate_authority, args.region)
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=config,
            enable_server_side_apply=True,
            # As the created cluster's provider (`components.cluster`): a rotated Secret is
            # patched in place, and so is a ConfigMap.
            enable_secret_mutable=True,
            enable_config_map_mutable=True,
            opts=child,
        )
        self.installed_lws = self.lws_checked = None
        made = child
        if args.lws_group is not None:
            # Not the component's child: the read keeps the name the program gave it before.
            crd, check = installed_controller(
                "lws", args.lws_group, pulumi.ResourceOptions(provider=self.provider)
            )
            self.installed_lws = (crd, check)
            self.lws_checked = check.apply(lambda _: crd)
            # A failed Output in `depends_on` fails the registration before it is sent (pulumi
            # sdk/python/lib/pulumi/runtime/resource.py `prepare_resource` awaits
            # `_depends_on.py` `_resolve_depends_on`, which awaits each entry's value, v3.272.0),
            # so a refused CRD leaves the launch template and the nodes unmade, though
            # `up --skip-preview` (CI's `pulumi/actions` `command: up`) never ran a preview.
            made = pulumi.ResourceOptions(parent=self, depends_on=[self.lws_checked])
        template = node_launch_template(name, args.node_disk_gib, args.instance_tags, made)
        self.node_group = aws.eks.NodeGroup(
            f"{name}-nodes",
            cluster_name=args.name,
            node_role_arn=args.node_role.arn,
            ami_type=AMI_TYPE,
            # The cluster's version, so that its owner's next control-plane upgrade is not
            # refused for nodes behind it.
            version=args.kubernetes_version,
            instance_types=[args.instance_type],
            capacity_type="ON_DEMAND",
            **model_scaling(args.node_count, args.surge_nodes, None),
            subnet_ids=[args.node_subnet_id],
            labels=dict(args.node_labels),
            taints=[
                aws.eks.NodeGroupTaintArgs(
                    key=args.node_taint["key"], value=args.node_taint["value"], effect="NO_SCHEDULE"
                )
            ],
            launch_template=launched_from(template),
            opts=made,
        )
        self.identity_agent = (
            None
            if args.identity_agent_version is None
            else aws.eks.Addon(
                f"{name}-pod-identity-agent",
                cluster_name=args.name,
                addon_name=IDENTITY_AGENT,
                addon_version=args.identity_agent_version,
                # NONE: should an agent appear meanwhile, creating ours fails rather than
                # overwriting what the cluster's owner configured.
                resolve_conflicts_on_create="NONE",
                resolve_conflicts_on_update="OVERWRITE",
                # Never deleted by the stack: once made, other teams' pod roles may need it, and
                # a stack that no longer reads it as its own (the owner replaced it, the stack
                # was renamed) would otherwise delete it by name.
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=[self.node_group], retain_on_delete=True
                ),
            )
        )
        self.cluster_name = pulumi.Output.from_input(args.name)
        self.kubeconfig = pulumi.Output.secret(config)
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})


#: The CRD of a LeaderWorkerSet controller the cluster already runs (`lwsInstalled`).
CRD_NAME = "leaderworkersets.leaderworkerset.x-k8s.io"


#: The Python names pulumi-kubernetes gives a read CRD's schema keywords (its output types), by
#: the keyword the API serves; field names under `properties` keep their own spelling.
_SDK_NAMES = {
    "openAPIV3Schema": "open_apiv3_schema",
    "additionalProperties": "additional_properties",
    "x-kubernetes-preserve-unknown-fields": "x_kubernetes_preserve_unknown_fields",
}


def _key(schema: Mapping[str, Any], keyword: str) -> Any:
    """A schema keyword as the API serves it or as the SDK names it."""
    for name in (keyword, _SDK_NAMES[keyword]):
        if name in schema:
            return schema[name]
    return None


def fields_unknown(schema: Mapping[str, Any], obj: Any, path: str = "") -> list[str]:
    """Every field of `obj` that `schema` (an openAPIV3Schema) does not declare, as a dotted
    path. The API server prunes such a field of a custom resource without a word (Kubernetes
    docs, "Extend the Kubernetes API with CustomResourceDefinitions", field pruning), so a
    controller older than the fields the groups set would run them without those settings."""
    if _key(schema, "x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(obj, Mapping):
        properties = schema.get("properties")
        values = _key(schema, "additionalProperties")
        found: list[str] = []
        for key, value in obj.items():
            here = f"{path}.{key}" if path else str(key)
            if properties is not None:
                if key not in properties:
                    found.append(here)
                    continue
                found += fields_unknown(properties[key], value, here)
            elif isinstance(values, Mapping):
                found += fields_unknown(values, value, here)
        return found
    if isinstance(obj, list) and isinstance(schema.get("items"), Mapping):
        return [f for item in obj for f in fields_unknown(schema["items"], item, f"{path}[]")]
    return []


def installed_lws_refusal(crd_spec: Mapping[str, Any], group: Manifest) -> str | None:
    """Why the cluster's LeaderWorkerSet CRD cannot hold `group` (one line naming the fix), or
    None: it must serve the version the groups are written in, with every field they set."""
    version = str(group["apiVersion"]).rsplit("/", 1)[-1]
    served = [v for v in crd_spec.get("versions") or [] if v.get("name") == version]
    fix = (
        f"upgrade the cluster's LeaderWorkerSet controller to {LWS_MIN_VERSION} or later, or "
        "deploy into a cluster without one and set `lwsInstalled` to false"
    )
    if not served or not served[0].get("served"):
        return f"`lwsInstalled` the cluster's CRD {CRD_NAME} does not serve {version}; {fix}"
    schema = _key(served[0].get("schema") or {}, "openAPIV3Schema") or {}
    unknown = fields_unknown(schema, {k: group[k] for k in ("apiVersion", "kind", "spec")})
    if unknown:
        shown = ", ".join(unknown[:3]) + (
            f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        )
        return (
            f"`lwsInstalled` the cluster's CRD {CRD_NAME} has no {shown}, which the groups set "
            f"(the API server would drop them); {fix}"
        )
    return None


#: The controller version whose CRD the groups are written against (the chart the stack
#: installs otherwise, `components.leaderworkerset.LWS_CHART_VERSION`).
LWS_MIN_VERSION = "v0.10.0"


def installed_controller(
    name: str, group: Manifest, opts: pulumi.ResourceOptions
) -> tuple[k8s.apiextensions.v1.CustomResourceDefinition, pulumi.Output[str]]:
    """The cluster's own LeaderWorkerSet CRD (`lwsInstalled`), read, never changed, and the
    check that it holds `group`: an Output that fails the program with one line when the CRD
    serves no version of it or lacks a field it sets, else names the CRD's served versions.
    Export it (an export is awaited, so `pulumi preview`, which reads the CRD, refuses), and
    make everything the stack creates wait for it (`ExistingCluster.lws_checked`): an
    `up --skip-preview` then refuses before creating anything. A CRD that is missing fails the
    read itself: the cluster runs no controller, so `lwsInstalled` must be false."""
    crd = k8s.apiextensions.v1.CustomResourceDefinition.get(name, CRD_NAME, opts=opts)

    def checked(spec: dict) -> str:
        refusal = installed_lws_refusal(spec, group)
        if refusal is not None:
            raise pulumi.RunError(refusal)
        served = [v["name"] for v in spec.get("versions") or [] if v.get("served")]
        return f"the cluster's ({CRD_NAME}, serving {', '.join(served)})"

    return crd, crd.spec.apply(checked)
