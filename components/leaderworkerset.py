"""The LeaderWorkerSet controller, its webhooks and CRD, from the pinned upstream Helm chart."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

LWS_CHART = "oci://registry.k8s.io/lws/charts/lws"
LWS_CHART_VERSION = "0.10.0"


@dataclass(frozen=True)
class LwsControllerArgs:
    """Where and which version of the controller to install."""

    #: Namespace of the controller; the chart's webhook certificates are issued for it.
    namespace: str = "lws-system"
    #: Chart version, pinned; the CRD comes from the chart's crds/ folder of this version.
    chart_version: str = LWS_CHART_VERSION


class LwsController(pulumi.ComponentResource):
    """Installs the LWS controller. Its webhooks are mandatory (LWS objects are refused while the
    controller is down), so everything that creates a LeaderWorkerSet depends on this component.

    Helm does not upgrade CRDs on a chart upgrade; the CRD here is created with the release and
    changes only when this component replaces it.
    """

    namespace: pulumi.Output[str]
    """The controller's namespace."""
    chart: k8s.helm.v4.Chart
    """The chart release; depend on it (or on this component) before creating LWS objects."""

    def __init__(
        self, name: str, args: LwsControllerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:leaderworkerset:LwsController", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        ns = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={"name": args.namespace, "labels": {"app.kubernetes.io/part-of": "lws"}},
            opts=child,
        )
        self.chart = k8s.helm.v4.Chart(
            f"{name}-chart",
            chart=LWS_CHART,
            version=args.chart_version,
            namespace=ns.metadata.name,
            opts=child,
        )
        self.namespace = ns.metadata.name
        self.register_outputs({"namespace": self.namespace})
