"""Who reaches what: the namespace, the credentials, the leaders-only Service and the
NetworkPolicy that keeps the ranks' ports inside their group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from components.manifests.spec import (
    API_KEY_KEY,
    AUTHENTICATED_ANNOTATION,
    HF_TOKEN_KEY,
    LWS_NAME_LABEL,
    LWS_WORKER_INDEX_LABEL,
    Manifest,
    ServerSpec,
    object_labels,
    object_meta,
)

#: Pod Security Admission for the model's namespace. The engine containers run seccomp
#: `Unconfined` (see `pods._security_context`), which the baseline level already refuses
#: (pod-security-admission policy/check_seccompProfile_baseline.go), so the namespace can only
#: enforce `privileged`. It audits and warns at the levels the pods are otherwise held to (a test
#: checks the seccomp profile is their only baseline finding), so anything new shows up in the
#: audit log and in the LWS controller's warnings.
POD_SECURITY_LABELS = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/warn": "baseline",
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


def secret(spec: ServerSpec, which: Literal["hf-token", "api-key"], value: str) -> Manifest:
    """The HF token or the API key. `value` is the real secret in the program, a placeholder in
    rendered files."""
    name, key = (
        (spec.hf_secret_name, HF_TOKEN_KEY)
        if which == "hf-token"
        else (spec.api_key_secret_name, API_KEY_KEY)
    )
    metadata = object_meta(spec, name, "credentials")
    # Tells the policy pack the value is a Pulumi secret (policies see secrets decrypted).
    metadata["labels"]["gemma-graviton.dev/secret-source"] = "pulumi-secret"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "stringData": {key: value},
    }


def leaders_selector(spec: ServerSpec) -> dict[str, str]:
    """Pods a client may reach: leaders only (worker index "0"); workers serve no HTTP."""
    return {LWS_NAME_LABEL: spec.lws_name, LWS_WORKER_INDEX_LABEL: "0"}


#: The cloud provider's annotation for tags on the NLB, its target groups and security group, as
#: "k=v,k=v" (cloud-provider-aws pkg/providers/v1/aws.go
#: `ServiceAnnotationLoadBalancerAdditionalTags`).
NLB_TAGS_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"


def aws_tags_annotation(tags: Mapping[str, str]) -> str:
    """Tags in the annotation's "k=v,k=v" form (the config refuses ',' and '=' in tags)."""
    return ",".join(f"{key}={value}" for key, value in sorted(tags.items()))


def service(spec: ServerSpec) -> Manifest:
    """An internet-facing NLB, made by EKS's cloud controller (in-tree annotations).

    The in-tree controller builds an internet-facing load balancer unless the Service carries
    `aws-load-balancer-internal` (cloud-provider-aws pkg/providers/v1/aws.go); the
    `aws-load-balancer-scheme` annotation is read only by the AWS Load Balancer Controller, which
    this cluster does not run, so it is not set.
    """
    annotations = {
        "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
        AUTHENTICATED_ANNOTATION: "true",
    }
    if spec.aws_tags:
        annotations[NLB_TAGS_ANNOTATION] = aws_tags_annotation(spec.aws_tags)
    port = {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}
    if spec.tls_certificate_arn:
        annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] = (
            spec.tls_certificate_arn
        )
        annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] = "https"
        port = {"name": "https", "port": 443, "targetPort": "http", "protocol": "TCP"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(spec, spec.name, "endpoint", annotations=annotations),
        "spec": {
            "type": "LoadBalancer",
            "selector": leaders_selector(spec),
            "ports": [port],
            "loadBalancerSourceRanges": list(spec.allowed_cidrs),
            # Keep the client address, so the source ranges apply to the real client.
            "externalTrafficPolicy": "Local",
        },
    }


def network_policy(spec: ServerSpec) -> Manifest:
    """Ranks of a group talk to each other on any TCP port (gloo and vLLM's ZMQ use ephemeral
    ports); everyone else reaches only the leader's HTTP port."""
    group = {"matchLabels": {LWS_NAME_LABEL: spec.lws_name}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(spec, f"{spec.name}-group", "network-policy"),
        "spec": {
            "podSelector": group,
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"podSelector": group}]},
                {"ports": [{"port": spec.port, "protocol": "TCP"}]},
            ],
        },
    }
