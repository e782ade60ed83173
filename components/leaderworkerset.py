"""The LeaderWorkerSet controller, its webhooks and CRD, from the pinned upstream Helm chart, and a
gate that completes only once those webhooks admit objects."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.manifests import access, gate
from components.objects import create

LWS_CHART = "oci://registry.k8s.io/lws/charts/lws"
LWS_CHART_VERSION = "0.10.0"
#: The model namespace's levels: the chart's controller meets baseline (non-root, no
#: capabilities) but sets no seccomp profile, which restricted requires (charts/lws/values.yaml
#: v0.10.0); the gate Job meets restricted.
POD_SECURITY_LABELS = access.POD_SECURITY_LABELS


@dataclass(frozen=True)
class LwsControllerArgs:
    """Where and which version of the controller to install."""

    #: Namespace of the controller; the chart's webhook certificates are issued for it.
    namespace: str = "lws-system"
    #: Chart version, pinned; the CRD comes from the chart's crds/ folder of this version.
    chart_version: str = LWS_CHART_VERSION
    #: What gives the controller somewhere to run (the node group). Without it the chart's
    #: Deployment starts its await while nodes are still launching, and on destroy the nodes
    #: could go before the controller that finalises LeaderWorkerSets.
    nodes: pulumi.Resource | None = None
    #: How long the webhook gate retries before it fails the deployment.
    gate_deadline_seconds: int = 600
    #: Keep the chart's CRDs on delete (a cluster the stack does not own): deleting a CRD
    #: deletes every object of its kind in the cluster, other teams' LeaderWorkerSets too.
    retain_crds: bool = False


def retain_crds(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """A transform that marks each CustomResourceDefinition `retain_on_delete`. lws v0.10.0's
    CRDs (charts/lws/crds/) carry no `helm.sh/resource-policy: keep`, the one mark Chart v4
    turns into `RetainOnDelete` (pulumi-kubernetes provider/pkg/provider/helm/v4/chart.go
    `preregister`, v4.32.0 and main), so without it `pulumi destroy` deletes them."""
    if args.type_ != "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition":
        return None
    return pulumi.ResourceTransformResult(
        args.props,
        pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(retain_on_delete=True)),
    )


class LwsController(pulumi.ComponentResource):
    """Installs the LWS controller. Its webhooks are mandatory (LWS objects are refused while the
    controller is down), so everything that creates a LeaderWorkerSet depends on this component,
    whose last child is the webhook gate Job (see `components.manifests.gate`).

    Helm does not upgrade CRDs on a chart upgrade; the CRD here is created with the release and
    changes only when this component replaces it. With `retain_crds` `pulumi destroy` leaves
    the CRDs (and any LeaderWorkerSet still in the cluster) behind.
    """

    namespace: pulumi.Output[str]
    """The controller's namespace."""
    chart: k8s.helm.v4.Chart
    """The chart release."""
    webhooks_ready: k8s.batch.v1.Job
    """Completes once a server-side dry-run create of a LeaderWorkerSet passes both webhooks;
    depend on it (or on this component) before creating LWS objects."""

    def __init__(
        self, name: str, args: LwsControllerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:leaderworkerset:LwsController", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        on_nodes = [args.nodes] if args.nodes is not None else []
        ns = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={
                "name": args.namespace,
                "labels": {"app.kubernetes.io/part-of": "lws", **POD_SECURITY_LABELS},
            },
            opts=child,
        )
        self.chart = k8s.helm.v4.Chart(
            f"{name}-chart",
            chart=LWS_CHART,
            version=args.chart_version,
            namespace=ns.metadata.name,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=on_nodes,
                transforms=[retain_crds] if args.retain_crds else None,
            ),
        )
        self.webhooks_ready = self._gate(name, args, ns, on_nodes)
        self.namespace = ns.metadata.name
        self.register_outputs({"namespace": self.namespace})

    def _gate(
        self,
        name: str,
        args: LwsControllerArgs,
        ns: k8s.core.v1.Namespace,
        on_nodes: list[pulumi.Resource],
    ) -> k8s.batch.v1.Job:
        """The gate's RBAC, probe object and Job, the Job after the chart and the nodes."""
        objects = gate.webhook_gate(
            args.namespace, f"{name}-webhook-gate", args.gate_deadline_seconds
        )
        by_kind = {obj["kind"]: obj for obj in objects}
        child = {"parent": self, "depends_on": [ns]}
        sa = create(by_kind["ServiceAccount"], f"{name}-gate-sa", **child)
        role = create(by_kind["Role"], f"{name}-gate-role", **child)
        binding = create(
            by_kind["RoleBinding"], f"{name}-gate-binding", parent=self, depends_on=[sa, role]
        )
        probe = create(by_kind["ConfigMap"], f"{name}-gate-probe", **child)
        # No data flows from these: the Job must run after the chart's webhooks are registered
        # and on a node, with its RBAC and probe in place.
        return create(
            by_kind["Job"],
            f"{name}-webhook-gate",
            parent=self,
            depends_on=[self.chart, binding, probe, *on_nodes],
        )
