"""Who reaches what: the namespace, the credentials, the leaders-only Service to the gatekeeper
and the NetworkPolicy that keeps the ranks' ports inside their group (the gatekeeper's config
is `gatekeeper_map`)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from components.manifests.drain import DrainSpec
from components.manifests.spec import (
    API_KEY_KEY,
    ENGINE_KEY_KEY,
    FRONT_DOOR_LABEL,
    HF_TOKEN_KEY,
    LWS_NAME_LABEL,
    Manifest,
    ServerSpec,
    leaders_selector,
    object_labels,
    object_meta,
)

#: Pod Security Admission for the model's namespace: the model pods meet `baseline` (every
#: container runs the runtime's default seccomp profile, non-root, no capabilities), which is
#: enforced; `restricted` is audited and warned about, so anything that drifts shows up in the
#: audit log and in the LWS controller's warnings before it could be enforced.
POD_SECURITY_LABELS = {
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}


def namespace(spec: ServerSpec) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": spec.namespace,
            "labels": {**object_labels(spec, "namespace"), **POD_SECURITY_LABELS},
        },
    }


def secret(
    spec: ServerSpec,
    which: Literal["hf-token", "api-key"],
    value: str,
    engine_key: str = "",
    previous: str | None = None,
    previous_until: dt.datetime | None = None,
) -> Manifest:
    """The HF token, or the API key with the gatekeeper's key files made from it (the accepted
    keys' digests, the previous key's with its end; the engine key vLLM checks). Only the
    program builds these, with the real values: rendered files hold no Secret."""
    if which == "hf-token":
        name, data = spec.hf_secret_name, {HF_TOKEN_KEY: value}
    else:
        name = spec.api_key_secret_name
        data = {API_KEY_KEY: value, ENGINE_KEY_KEY: engine_key}
        if not spec.vllm_key:
            from components.manifests import gatekeeper  # the gatekeeper's key files

            data[gatekeeper.KEY_FILE] = gatekeeper.key_file_text(value, previous, previous_until)
            data[gatekeeper.ENGINE_FILE] = gatekeeper.engine_map_entry(engine_key)
    metadata = object_meta(spec, name, "credentials")
    # Tells the policy pack the value is a Pulumi secret (policies see secrets decrypted).
    metadata["labels"]["gemma-graviton.dev/secret-source"] = "pulumi-secret"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "stringData": data,
    }


#: The cloud provider's annotation for tags on the NLB, its target groups and security group, as
#: "k=v,k=v" (cloud-provider-aws pkg/providers/v1/aws.go
#: `ServiceAnnotationLoadBalancerAdditionalTags`).
NLB_TAGS_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"


#: cloud-provider-aws pkg/providers/v1/aws.go
#: `ServiceAnnotationLoadBalancerCrossZoneLoadBalancingEnabled`, read for NLBs too.
CROSS_ZONE_ANNOTATION = (
    "service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled"
)


#: The NLB health check (`HEALTH_CHECK_PREFIX` + interval, healthy-threshold,
#: unhealthy-threshold), read by the in-tree provider this cluster runs (cloud-provider-aws
#: pkg/providers/v1/aws.go `ServiceAnnotationLoadBalancerHC*`, v1.35.2 read 2026-12-07).
HEALTH_CHECK_PREFIX = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-"


def drain_annotations(drain: DrainSpec) -> dict[str, str]:
    """The NLB's health check the drain's accept window is built on (the provider's own
    defaults for `externalTrafficPolicy: Local`, stated)."""
    return {
        f"{HEALTH_CHECK_PREFIX}interval": str(drain.health_check_interval_s),
        f"{HEALTH_CHECK_PREFIX}healthy-threshold": str(drain.health_check_threshold),
        f"{HEALTH_CHECK_PREFIX}unhealthy-threshold": str(drain.health_check_threshold),
    }


def target_group_attributes(drain: DrainSpec) -> dict[str, str]:
    """The target groups' side of the drain (`components.manifests.drain`), which
    `components.balancer` sets once the NLB exists: a draining leader's node keeps its streams.
    Without `connection_termination.enabled=false` the NLB resets every connection of a node
    whose health check fails, which a draining leader's node does at once (ELB target group
    attributes, docs.aws.amazon.com/elasticloadbalancing/latest/network/
    edit-target-group-attributes.html, read 2026-12-02: on by default; the draining interval
    0-360000 s, settable only with termination off)."""
    return {
        "deregistration_delay.timeout_seconds": str(drain.deregistration_delay_s),
        "target_health_state.unhealthy.connection_termination.enabled": "false",
        "target_health_state.unhealthy.draining_interval_seconds": str(drain.unhealthy_draining_s),
    }


#: Internal ("true") or internet-facing ("false"), as both the in-tree controller and the AWS
#: Load Balancer Controller read it (`service`).
INTERNAL_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-internal"
#: "k=v,k=v": the nodes that carry every label are the NLB's targets; without it every node of the
#: cluster is one (cloud-provider-aws v1.35.2 pkg/providers/v1/aws.go:238-242,
#: aws_loadbalancer.go:1785-1837 `filterTargetNodes`). The AWS Load Balancer Controller reads it
#: for instance targets (v2.17.1 pkg/service/model_build_target_group.go:839-853).
TARGET_NODES_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-target-node-labels"


#: What `pulumi up` waits for on the model Service: its load balancer's hostname, which the stack
#: exports, and nothing else. Without it pulumi-kubernetes waits, on every create and update, for
#: the Service's endpoints to be ready with none pending, 10 minutes by default
#: (pulumi/pulumi-kubernetes v4.32.0 provider/pkg/await/service.go, `checkAndLogStatus`,
#: `DefaultServiceTimeoutMins`), so an update that touches the Service while a group cold-starts
#: (about 6 minutes, longer on a slow hub) fails with the pods still loading. A `waitFor`
#: annotation replaces that built-in wait (await.go, `Update`: "Use our built-in await logic only
#: if the user hasn't specified any await overrides"); a JSONPath without a value waits for the
#: field to exist (provider/pkg/jsonpath/jsonpath.go, `Matches`). `skipAwait` would not wait for
#: the hostname either, and the first `up` would export an empty endpoint.
SERVICE_WAIT_FOR = "jsonpath={.status.loadBalancer.ingress[0].hostname}"


def service(spec: ServerSpec) -> Manifest:
    """An NLB, made by EKS's cloud controller (in-tree annotations), to the leaders' gatekeeper
    port (the door's on an elastic stack), or with `vllm-key` to vLLM's own, which checks the key.
    With a certificate the NLB ends TLS on 443 and forwards plain TCP inside the VPC.

    The scheme is always stated, `aws-load-balancer-internal` "true" (every admitted range is
    private) or "false": the in-tree controller reads "false" as internet-facing (cloud-provider-
    aws v1.35.2 pkg/providers/v1/aws.go:2420-2426) and sets a scheme on create only
    (aws_loadbalancer.go:148-170), so a live NLB is untouched. The AWS Load Balancer Controller,
    whose webhook may take the Service in a cluster the stack does not own (v2.17.1
    webhooks/core/service_mutator.go:40-51), defaults to internal (pkg/config/
    controller_config.go:165) but reads the same annotation (model_build_load_balancer.go:282).
    """
    annotations = {
        "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
        # The NLB gets an address in every zone with a load-balancer subnet (the control
        # plane's zone too), but every target is in the node zone; cross-zone off, the
        # controller's default (pkg/providers/v1/aws_loadbalancer.go `reconcileLBAttributes`,
        # master at 63ec440 read 2026-12-01), leaves clients that resolve the other address
        # without an answer. On, that address forwards to the node zone.
        CROSS_ZONE_ANNOTATION: "true",
        "pulumi.com/waitFor": SERVICE_WAIT_FOR,
        **drain_annotations(spec.drain),
    }
    # Internal: the controller picks the subnets tagged kubernetes.io/role/internal-elb.
    annotations[INTERNAL_ANNOTATION] = "true" if spec.internal_load_balancer else "false"
    # Only the nodes the selected pods run on, not every node (`TARGET_NODES_ANNOTATION`).
    pool = spec.door.node_selector if spec.door else spec.node_pool
    annotations[TARGET_NODES_ANNOTATION] = ",".join(f"{k}={v}" for k, v in sorted(pool.items()))
    if spec.aws_tags:
        # "k=v,k=v" (the config refuses ',' and '=' in tags).
        tags = sorted(spec.aws_tags.items())
        annotations[NLB_TAGS_ANNOTATION] = ",".join(f"{key}={value}" for key, value in tags)
    # With `vllm-key` the load balancer reaches vLLM's own port, by number (it declares none).
    target = spec.port if spec.vllm_key else "gatekeeper"  # `gatekeeper.PORT_NAME`
    port = {"name": "http", "port": 80, "targetPort": target, "protocol": "TCP"}
    if spec.tls_certificate_arn:
        annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] = (
            spec.tls_certificate_arn
        )
        annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] = "https"
        # TLS 1.2 and 1.3 only (ELB's named policy).
        annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy"] = (
            "ELBSecurityPolicy-TLS13-1-2-2021-06"
        )
        port = {"name": "https", "port": 443, "targetPort": target, "protocol": "TCP"}
    metadata = object_meta(spec, spec.name, "endpoint", annotations=annotations)
    if spec.vllm_key:
        metadata["labels"][FRONT_DOOR_LABEL] = "vllm-key"
    if spec.door:
        from components.manifests import door  # the elastic layer, elastic stacks only
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "type": "LoadBalancer",
            "selector": door.selector(spec) if spec.door else leaders_selector(spec),
            "ports": [port],
            "loadBalancerSourceRanges": list(spec.allowed_cidrs),
            # Keep the client address, so the source ranges apply to the real client.
            "externalTrafficPolicy": "Local",
        },
    }


def network_policy(spec: ServerSpec) -> Manifest:
    """Ranks of a group talk to each other on any TCP port (gloo and vLLM's ZMQ use ephemeral
    ports); everyone else reaches only the gatekeeper's port, which asks for the key. The
    gatekeeper's metrics port admits the metrics collector's pods alone (its namespace and
    labels); no Service targets it, so the load balancer never reaches it. (vLLM's own port is
    on loopback and unreachable from the network at all.) With `vllm-key`, vLLM's port takes
    the gatekeeper's place: the load balancer's clients and the collector reach it."""
    group = {"matchLabels": {LWS_NAME_LABEL: spec.lws_name}}
    if spec.door:
        from components.manifests import door  # the elastic layer, elastic stacks only

        ingress = door.group_ingress(spec)
    elif not spec.vllm_key:
        from components.manifests import gatekeeper_map  # the gatekeeper layer

        ingress = gatekeeper_map.group_ingress(spec, group)
    else:
        ingress = [
            {"from": [{"podSelector": group}]},
            {"ports": [{"port": spec.port, "protocol": "TCP"}]},
        ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(spec, f"{spec.name}-group", "network-policy"),
        "spec": {
            "podSelector": group,
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }
