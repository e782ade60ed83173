"""The policy pack: each rule on passing and failing objects, exact messages, and the pack wiring.

Objects are the camelCase inputs pulumi-kubernetes registers. The last tests run the real
pulumi-policy `Analyze` on protobuf requests, which is how the engine calls the pack, to pin down
what a policy sees of secrets and unknowns.
"""

from __future__ import annotations

import base64
import copy
import runpy
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from policies.rules import (
    DAEMONSET,
    DEPLOYMENT,
    FRONT_DOOR_LABEL,
    JOB,
    LWS,
    NLB_REFUSED_ANNOTATIONS,
    NLB_TYPE_ANNOTATION,
    POD,
    RULES,
    SECRET,
    SECRET_SIG,
    SERVICE,
    SPECIAL_SIG_KEY,
    STATEFULSET,
    TARGET_GROUP_ATTRIBUTES_ANNOTATION,
    TARGET_NODES_ANNOTATION,
    images_pinned,
    is_pulumi_secret,
    leaders_behind_gatekeeper,
    load_balancer_names_scheme_and_targets,
    load_balancer_to_gatekeeper_over_tls,
    model_pods_requests_equal_limits,
    parse_quantity,
    ranks_spread_by_required_anti_affinity,
    secrets_not_in_plain_config,
)

POLICIES_DIR = Path(__file__).resolve().parents[2] / "policies"

NAME_KEY = "leaderworkerset.sigs.k8s.io/name"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
IMAGE = "vllm/vllm-openai-cpu:v0.31.0-arm64"
HF_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"  # shaped like a token, not a real one


def secret(value: Any) -> dict[str, Any]:
    """A value as the engine and Pulumi mocks encode a secret."""
    return {SPECIAL_SIG_KEY: SECRET_SIG, "value": value}


def spread_term(name: str = "gemma-vllm") -> dict[str, Any]:
    return {
        "labelSelector": {
            "matchExpressions": [{"key": NAME_KEY, "operator": "In", "values": [name]}]
        },
        "topologyKey": "kubernetes.io/hostname",
    }


def template(role: str, rank_args: list[str]) -> dict[str, Any]:
    """A pod template of the model group as the program builds it."""
    return {
        "metadata": {"labels": {"app.kubernetes.io/name": "vllm", "gemma-graviton.dev/role": role}},
        "spec": {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [spread_term()]
                }
            },
            "initContainers": [
                {
                    "name": "prefetch",
                    "image": IMAGE,
                    "command": ["hf", "download", "google/gemma-4-12B-it"],
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "limits": {"cpu": "1000m", "memory": "1024Mi"},
                    },
                }
            ],
            "containers": [
                {
                    "name": "vllm",
                    "image": IMAGE,
                    "args": ["--pipeline-parallel-size", "2", *rank_args],
                    "resources": {
                        "requests": {"cpu": "6", "memory": "26Gi"},
                        "limits": {"cpu": "6000m", "memory": "27917287424"},
                    },
                }
            ],
        },
    }


def lws_props() -> dict[str, Any]:
    """A passing LeaderWorkerSet: one group of two pods, one per node."""
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": "gemma-vllm",
            "namespace": "gemma",
            "annotations": {"pulumi.com/waitFor": "condition=Available"},
        },
        "spec": {
            "replicas": 1.0,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": 2.0,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": template("leader", ["--node-rank", "0"]),
                "workerTemplate": template("worker", ["--node-rank", "1", "--headless"]),
            },
        },
    }


def worker_spec(props: dict[str, Any]) -> dict[str, Any]:
    return props["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]


def leader_spec(props: dict[str, Any]) -> dict[str, Any]:
    return props["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]


def deployment_props(*images: str | None) -> dict[str, Any]:
    containers = []
    for index, image in enumerate(images):
        container: dict[str, Any] = {"name": f"c{index}"}
        if image is not None:
            container["image"] = image
        containers.append(container)
    return {
        "metadata": {"name": "bench"},
        "spec": {"template": {"spec": {"containers": containers}}},
    }


def service_props(
    ranges: list[str] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "type": "LoadBalancer",
        "selector": {NAME_KEY: "gemma-vllm", "leaderworkerset.sigs.k8s.io/worker-index": "0"},
        "ports": [{"name": "http", "port": 80.0, "targetPort": 8000.0}],
    }
    if ranges is not None:
        spec["loadBalancerSourceRanges"] = ranges
    return {"metadata": {"name": "gemma-api", "annotations": annotations or {}}, "spec": spec}


def secret_props(labels: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "hf-token", "namespace": "gemma", "labels": labels or {}},
        "type": "Opaque",
        **fields,
    }


# -- quantities --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("26Gi", "27917287424"),
        ("6", "6000m"),
        ("1Gi", "1024Mi"),
        ("1.5", "1500m"),
        ("1k", "1e3"),
        ("1M", "1000k"),
        ("0.5Gi", "512Mi"),
        ("6", 6.0),  # Pulumi passes number inputs as floats
        ("100m", 0.1),
    ],
)
def test_equal_quantities_parse_to_the_same_value(left: str, right: str | float) -> None:
    assert parse_quantity(left) == parse_quantity(right)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("26Gi", Fraction(26 * 2**30)),
        ("500m", Fraction(1, 2)),
        ("250u", Fraction(1, 4000)),
        ("7n", Fraction(7, 10**9)),
        ("2E", Fraction(2 * 10**18)),
        ("1Ei", Fraction(2**60)),
        ("1.5e-3", Fraction(3, 2000)),
        (".5", Fraction(1, 2)),
        ("+4", Fraction(4)),
        ("-1m", Fraction(-1, 1000)),
    ],
)
def test_quantity_values(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    [
        *("", "Gi", "1K", "1 Gi", " 1", "1gi", "1e", "six", "1.2.3", "0x10"),
        *(True, None, float("inf"), float("nan"), ["1"]),  # not numbers
    ],
)
def test_malformed_quantities_are_refused(text: Any) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        parse_quantity(text)


def test_quantity_refuses_huge_exponents() -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_quantity("1e999999999")


# -- 1. model-pods-requests-equal-limits -------------------------------------------------------


def test_requests_equal_limits_reports_every_container_and_init_container() -> None:
    props = lws_props()
    worker_spec(props)["containers"][0]["resources"]["requests"]["memory"] = "24Gi"
    del leader_spec(props)["initContainers"][0]["resources"]
    leader_spec(props)["containers"][0]["resources"]["requests"]["cpu"] = "six"
    del worker_spec(props)["initContainers"][0]["resources"]["limits"]["cpu"]
    worker_spec(props)["containers"].append({"image": IMAGE, "resources": {"limits": {"cpu": 1.0}}})
    assert model_pods_requests_equal_limits(LWS, props) == [
        'leaderTemplate container "vllm": cpu request "six" is not a Kubernetes quantity',
        'leaderTemplate initContainer "prefetch": memory has no request and no limit; set '
        "resources.requests.memory and resources.limits.memory to the same quantity",
        'leaderTemplate initContainer "prefetch": cpu has no request and no limit; set '
        "resources.requests.cpu and resources.limits.cpu to the same quantity",
        'workerTemplate container "vllm": memory request 24Gi differs from limit 27917287424; '
        "set the request equal to the limit so the pod is Guaranteed",
        "workerTemplate container #1: memory has no request and no limit; set "
        "resources.requests.memory and resources.limits.memory to the same quantity",
        "workerTemplate container #1: cpu has no request; set resources.requests.cpu to the "
        "limit 1.0",
        'workerTemplate initContainer "prefetch": cpu has no limit; set resources.limits.cpu to '
        "the request 1",
    ]


def test_requests_equal_limits_uses_the_worker_template_alone_when_there_is_no_leader() -> None:
    props = lws_props()
    del props["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    worker_spec(props)["containers"][0]["resources"]["limits"]["cpu"] = "7"
    assert model_pods_requests_equal_limits(LWS, props) == [
        'workerTemplate container "vllm": cpu request 6 differs from limit 7; set the request '
        "equal to the limit so the pod is Guaranteed"
    ]


# -- 2. ranks-spread-by-required-anti-affinity -------------------------------------------------

SPREAD_MISSING = (
    "{}: no podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution term with topologyKey "
    "kubernetes.io/hostname selects every pod of the group; add one whose labelSelector requires "
    "leaderworkerset.sigs.k8s.io/name In [<metadata.name>] (or with matchLabelKeys "
    "[leaderworkerset.sigs.k8s.io/group-key]) so that no two ranks share a node"
)


def set_terms(props: dict[str, Any], *terms: dict[str, Any], which: str = "both") -> None:
    specs = {"leader": [leader_spec(props)], "worker": [worker_spec(props)]}
    specs["both"] = specs["leader"] + specs["worker"]
    for spec in specs[which]:
        spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = [
            copy.deepcopy(t) for t in terms
        ]


ROLE = "gemma-graviton.dev/role"
INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
BOTH_MISSING = [SPREAD_MISSING.format("leaderTemplate"), SPREAD_MISSING.format("workerTemplate")]


def with_(*expressions: dict[str, Any], **term: Any) -> dict[str, Any]:
    """The LWS-name term plus more selector requirements and term fields."""
    base = spread_term()
    base["labelSelector"]["matchExpressions"] += list(expressions)
    return {**base, **term}


#: Required terms that select every pod of the group, whatever else they require.
WHOLE_GROUP_TERMS = {
    "matchLabels-name": {
        "labelSelector": {"matchLabels": {NAME_KEY: "gemma-vllm"}},
        "topologyKey": "kubernetes.io/hostname",
    },
    "group-key-exists": {
        "labelSelector": {"matchExpressions": [{"key": GROUP_KEY, "operator": "Exists"}]},
        "topologyKey": "kubernetes.io/hostname",
    },
    "matchLabelKeys-group-key": {
        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "vllm"}},
        "matchLabelKeys": [GROUP_KEY],
        "topologyKey": "kubernetes.io/hostname",
    },
    "own-ns": {**spread_term(), "namespaces": ["gemma"]},
    "all-ns": {**spread_term(), "namespaceSelector": {}},
    "absent-does-not-exist": with_({"key": "no-such-label", "operator": "DoesNotExist"}),
    "not-in-other-values": with_({"key": ROLE, "operator": "NotIn", "values": ["canary"]}),
    "not-in-absent-key": with_({"key": "no-such-label", "operator": "NotIn", "values": ["x"]}),
    "match-shared-key": with_(matchLabelKeys=["app.kubernetes.io/name"]),
    "match-absent-key": with_(matchLabelKeys=["no-such-label"]),
    "mismatch-absent-key": with_(mismatchLabelKeys=["no-such-label"]),
    "mismatch-differing-key": with_(mismatchLabelKeys=[ROLE]),
    "namespaces-include-own": with_(namespaces=["gemma", "default"]),
}


@pytest.mark.parametrize("term", WHOLE_GROUP_TERMS.values(), ids=WHOLE_GROUP_TERMS.keys())
def test_spread_accepts_terms_that_select_the_whole_group(term: dict[str, Any]) -> None:
    props = lws_props()
    set_terms(props, term)
    assert ranks_spread_by_required_anti_affinity(LWS, props) == []


def test_spread_reports_the_exclusive_topology_annotations() -> None:
    props = lws_props()
    props["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/exclusive-topology"] = (
        "kubernetes.io/hostname"
    )
    props["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"] = (
        "topology.kubernetes.io/zone"
    )
    assert ranks_spread_by_required_anti_affinity(LWS, props) == [
        'metadata.annotations["leaderworkerset.sigs.k8s.io/exclusive-topology"] packs each '
        "group into one kubernetes.io/hostname domain, the opposite of spreading ranks over "
        "nodes; remove it",
        'metadata.annotations["leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"] packs '
        "each group into one topology.kubernetes.io/zone domain, the opposite of spreading "
        "ranks over nodes; remove it",
    ]


def test_spread_reports_a_preferred_only_term() -> None:
    props = lws_props()
    for spec in (leader_spec(props), worker_spec(props)):
        spec["affinity"]["podAntiAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100.0, "podAffinityTerm": spread_term()}
            ]
        }
    assert ranks_spread_by_required_anti_affinity(LWS, props) == BOTH_MISSING


#: Required terms that miss some pod of the group.
PART_OF_GROUP_TERMS = {
    "other-lws": spread_term("other-lws"),
    "zone": {**spread_term(), "topologyKey": "topology.kubernetes.io/zone"},
    # Only the leader carries role=leader, so this does not select the worker.
    "leader-only": {
        "labelSelector": {"matchLabels": {NAME_KEY: "gemma-vllm", ROLE: "leader"}},
        "topologyKey": "kubernetes.io/hostname",
    },
    # Both pods must carry role=worker: the leader, judged by its own labels, does not.
    "worker-only": with_({"key": ROLE, "operator": "In", "values": ["worker"]}),
    # Selects the group's pods but does not name the group.
    "no-group-label": {
        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "vllm"}},
        "topologyKey": "kubernetes.io/hostname",
    },
    # The group-key value is a hash the template cannot know.
    "group-key-value": {
        "labelSelector": {
            "matchExpressions": [{"key": GROUP_KEY, "operator": "In", "values": ["3e2387"]}]
        },
        "topologyKey": "kubernetes.io/hostname",
    },
    "mismatch": {**spread_term(), "mismatchLabelKeys": [GROUP_KEY]},
    "other-ns": {**spread_term(), "namespaces": ["default"]},
    "no-selector": {"topologyKey": "kubernetes.io/hostname"},  # matches no pods
    "present-does-not-exist": with_({"key": ROLE, "operator": "DoesNotExist"}),
    "not-in-leader": with_({"key": ROLE, "operator": "NotIn", "values": ["leader"]}),
    "not-in-unknown-index": with_({"key": INDEX, "operator": "NotIn", "values": ["7"]}),
    "unknown-operator": with_({"key": ROLE, "operator": "Gt", "values": ["1"]}),
    "match-differing-key": with_(matchLabelKeys=[ROLE]),
    "match-unknown-index": with_(matchLabelKeys=[INDEX]),
    "mismatch-shared-key": with_(mismatchLabelKeys=["app.kubernetes.io/name"]),
    "namespace-labels": with_(namespaceSelector={"matchLabels": {"team": "ml"}}),
    "namespace-expressions": with_(
        namespaceSelector={"matchExpressions": [{"key": "team", "operator": "Exists"}]}
    ),
}


@pytest.mark.parametrize("term", PART_OF_GROUP_TERMS.values(), ids=PART_OF_GROUP_TERMS.keys())
def test_spread_reports_terms_that_miss_part_of_the_group(term: dict[str, Any]) -> None:
    props = lws_props()
    set_terms(props, term)
    assert ranks_spread_by_required_anti_affinity(LWS, props) == BOTH_MISSING


def test_spread_by_name_needs_the_lws_name_to_be_set() -> None:
    props = lws_props()
    del props["metadata"]["name"]
    assert ranks_spread_by_required_anti_affinity(LWS, props) == BOTH_MISSING
    set_terms(props, WHOLE_GROUP_TERMS["matchLabelKeys-group-key"])
    assert ranks_spread_by_required_anti_affinity(LWS, props) == []


def test_spread_checks_the_worker_template_alone_when_there_is_no_leader() -> None:
    props = lws_props()
    del props["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert ranks_spread_by_required_anti_affinity(LWS, props) == []
    del worker_spec(props)["affinity"]
    assert ranks_spread_by_required_anti_affinity(LWS, props) == [
        SPREAD_MISSING.format("workerTemplate")
    ]


# -- 3. images-pinned --------------------------------------------------------------------------

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_images_pinned_passes_tags_and_digests() -> None:
    props = deployment_props(
        "registry.k8s.io/lws/lws:v0.10.0",
        "localhost:5000/bench:1.2",
        f"python@{DIGEST}",
        f"ghcr.io/acme/bench:latest@{DIGEST}",  # the digest decides what runs
    )
    assert images_pinned(DEPLOYMENT, props) == []


@pytest.mark.parametrize("resource_type", [DEPLOYMENT, DAEMONSET, STATEFULSET, JOB])
def test_images_pinned_reports_floating_images_of_templated_workloads(resource_type: str) -> None:
    props = deployment_props(
        "nginx", "nginx:latest", "localhost:5000/bench", "python@sha256:abc", None, "busybox:"
    )
    assert images_pinned(resource_type, props) == [
        'container "c0": image "nginx" has no tag; pin a version tag or an @sha256 digest',
        'container "c1": image "nginx:latest" uses the moving tag latest; pin a version tag or '
        "an @sha256 digest",
        'container "c2": image "localhost:5000/bench" has no tag; pin a version tag or an '
        "@sha256 digest",
        'container "c3": image "python@sha256:abc" has a malformed digest; use '
        "@sha256:<64 hex digits>",
        'container "c4": has no image; set an image and pin a version tag or an @sha256 digest',
        'container "c5": image "busybox:" has no tag; pin a version tag or an @sha256 digest',
    ]


def test_images_pinned_reads_pods_and_both_lws_templates_with_init_containers() -> None:
    pod = {"spec": {"containers": [{"name": "curl", "image": "curlimages/curl:latest"}]}}
    assert images_pinned(POD, pod) == [
        'container "curl": image "curlimages/curl:latest" uses the moving tag latest; pin a '
        "version tag or an @sha256 digest"
    ]
    props = lws_props()
    leader_spec(props)["initContainers"][0]["image"] = "vllm/vllm-openai-cpu"
    worker_spec(props)["containers"][0]["image"] = "vllm/vllm-openai-cpu:latest"
    assert images_pinned(LWS, props) == [
        'leaderTemplate initContainer "prefetch": image "vllm/vllm-openai-cpu" has no tag; pin a '
        "version tag or an @sha256 digest",
        'workerTemplate container "vllm": image "vllm/vllm-openai-cpu:latest" uses the moving '
        "tag latest; pin a version tag or an @sha256 digest",
    ]


# -- 4. load-balancer-to-gatekeeper-over-tls -------------------------------------------------

SSL_CERT = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"
SSL_PORTS = "service.beta.kubernetes.io/aws-load-balancer-ssl-ports"
SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"
INTERNAL = "service.beta.kubernetes.io/aws-load-balancer-internal"
TLS = {SSL_CERT: "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d", SSL_PORTS: "https"}
TLS_FIX = (
    "over plain HTTP; terminate TLS on it (service.beta.kubernetes.io/aws-load-balancer-ssl-cert "
    "with an ACM certificate, service.beta.kubernetes.io/aws-load-balancer-ssl-ports covering "
    "every port), or admit only private ranges or single /32 addresses"
)


def gatekept(
    ranges: list[str] | None = None, annotations: dict[str, str] | None = None, name: str = "http"
) -> dict[str, Any]:
    props = service_props(ranges, annotations)
    props["spec"]["ports"] = [{"name": name, "port": 443.0, "targetPort": "gatekeeper"}]
    return props


#: Load balancers that admit the internet only over TLS, or not at all.
TO_THE_GATEKEEPER = {
    "tls": gatekept(["0.0.0.0/0"], TLS, name="https"),
    "tls-all-ports": gatekept(None, {**TLS, SSL_PORTS: "*"}),
    "private": gatekept(["10.0.0.0/8", "192.168.0.0/16"]),
    "single-address": gatekept(["203.0.113.10/32"]),
    "internal": gatekept(["0.0.0.0/0"], {INTERNAL: "true"}),
    "headless": {"metadata": {"name": "gemma-vllm"}, "spec": {"clusterIP": "None"}},
    "cluster-ip": {"metadata": {"name": "gemma-vllm"}, "spec": {"type": "ClusterIP"}},
    # Any value of the internal annotation but "false" (and "") makes it internal.
    **{
        f"internal-{v}": gatekept(None, {INTERNAL: v}) for v in ("true", "True", "0.0.0.0/0", "yes")
    },
}
# Annotations that look as if they made the load balancer internal but do not for the in-tree
# controller EKS runs (kubernetes/cloud-provider-aws pkg/providers/v1/aws.go, EnsureLoadBalancer:
# only `aws-load-balancer-internal`, with a value other than "" and "false"; commit 63ec440c).
NOT_INTERNAL = {
    "scheme internal": {SCHEME: "internal"},
    "scheme internal, internal false": {SCHEME: "internal", INTERNAL: "false"},
    "internal false": {INTERNAL: "false"},
    "internal empty": {INTERNAL: ""},
    "internal with another case": {INTERNAL.replace("internal", "Internal"): "true"},
    "scheme internal with an external type": {
        SCHEME: "internal",
        "service.beta.kubernetes.io/aws-load-balancer-type": "external",
    },
    "scheme internal with nlb-ip": {
        SCHEME: "internal",
        "service.beta.kubernetes.io/aws-load-balancer-type": "nlb-ip",
    },
    "private-ranges annotation": {
        "service.beta.kubernetes.io/load-balancer-source-ranges": "10.0.0.0/8"
    },
}
#: Load balancers the internet reaches over plain HTTP, and the range the message names.
TO_THE_INTERNET = {
    **{
        name: (gatekept(None, annotations), "0.0.0.0/0")
        for name, annotations in NOT_INTERNAL.items()
    },
    "no ranges": (gatekept(None), "0.0.0.0/0"),
    "public among private": (gatekept(["198.51.100.0/24", "10.0.0.0/8"]), "198.51.100.0/24"),
    # A certificate that does not cover the port is plain HTTP on it.
    "tls on another port": (gatekept(["0.0.0.0/0"], TLS, name="http"), "0.0.0.0/0"),
}
OVER_TLS_CASES = {
    **{name: (props, []) for name, props in TO_THE_GATEKEEPER.items()},
    **{
        name: (props, [f"the internet reaches this load balancer ({shown}) {TLS_FIX}"])
        for name, (props, shown) in TO_THE_INTERNET.items()
    },
    "vllm-directly": (
        service_props(["10.0.0.0/8"]),  # targetPort 8000: vLLM's own port
        [
            'spec.ports "http" targets 8000.0, not the gatekeeper\'s port "gatekeeper"; send '
            "load-balancer traffic only through the gatekeeper, never to vLLM directly"
        ],
    ),
    "malformed-range": (
        gatekept(["office"], TLS, name="https"),
        ['spec.loadBalancerSourceRanges entry "office" is not a CIDR; list CIDRs'],
    ),
}


@pytest.mark.parametrize(("props", "expected"), OVER_TLS_CASES.values(), ids=OVER_TLS_CASES.keys())
def test_load_balancer_reaches_the_gatekeeper_over_tls_or_from_no_internet(
    props: dict[str, Any], expected: list[str]
) -> None:
    assert load_balancer_to_gatekeeper_over_tls(SERVICE, props) == expected


# -- 4a. load-balancer-names-scheme-and-targets ---------------------------------------------

TARGETS = {TARGET_NODES_ANNOTATION: "gemma-graviton.dev/pool=model"}
SCHEME_FIX = (
    f'{INTERNAL} is not "true" or "false": the scheme is the controller\'s default, internal '
    "under the AWS Load Balancer Controller; set it"
)
TARGETS_FIX = (
    f"no {TARGET_NODES_ANNOTATION}: every node of the cluster is a target and opens its security "
    "group; name the label of the pool whose nodes run the selected pods"
)


#: An NLB for the in-tree provider, scheme and targets named (cloud-provider-aws v1.35.2
#: aws_validations.go refuses these before it makes anything).
NLB = {INTERNAL: "true", **TARGETS, NLB_TYPE_ANNOTATION: "nlb"}
TG_ATTRIBUTES = TARGET_GROUP_ATTRIBUTES_ANNOTATION
TG_FIX = (
    f"{TG_ATTRIBUTES} names deregistration_delay.timeout_seconds: the cloud provider sets only "
    "preserve_client_ip.enabled and proxy_protocol_v2.enabled and makes no load balancer; set it "
    "on the target group instead (components/balancer.py)"
)
BYO = NLB_REFUSED_ANNOTATIONS
MANAGED = "preserve_client_ip.enabled=true,proxy_protocol_v2.enabled=false"
VALUE_FIX = (
    "proxy_protocol_v2.enabled=1: the cloud provider takes true or false only and makes no load "
    "balancer"
)
ELB_FIX = ": the cloud provider takes it on an NLB only"
BYO_FIX = ": the cloud provider refuses it on an NLB and makes no load balancer; drop it"


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({INTERNAL: "false", **TARGETS}, []),
        ({INTERNAL: "true", **TARGETS}, []),
        (TARGETS, [SCHEME_FIX]),
        ({SCHEME: "internet-facing", **TARGETS}, [SCHEME_FIX]),
        ({INTERNAL: "", **TARGETS}, [SCHEME_FIX]),
        ({INTERNAL: "false"}, [TARGETS_FIX]),
        ({INTERNAL: "false", TARGET_NODES_ANNOTATION: " , "}, [TARGETS_FIX]),
        ({}, [SCHEME_FIX, TARGETS_FIX]),
        ({**NLB, TG_ATTRIBUTES: MANAGED}, []),
        ({**NLB, TG_ATTRIBUTES: "deregistration_delay.timeout_seconds=35"}, [TG_FIX]),
        ({**NLB, BYO[0]: "sg-0123"}, [f"{BYO[0]}{BYO_FIX}"]),
        ({**NLB, BYO[1]: "sg-0123"}, [f"{BYO[1]}{BYO_FIX}"]),
        ({**NLB, TG_ATTRIBUTES: "proxy_protocol_v2.enabled=1"}, [f"{TG_ATTRIBUTES} {VALUE_FIX}"]),
        ({**TARGETS, INTERNAL: "true", TG_ATTRIBUTES: MANAGED}, [f"{TG_ATTRIBUTES}{ELB_FIX}"]),
        # Not the in-tree provider's: the AWS Load Balancer Controller takes any attribute.
        ({**NLB, NLB_TYPE_ANNOTATION: "external", TG_ATTRIBUTES: "stickiness.enabled=true"}, []),
    ],
    ids=[
        "public",
        "internal",
        "no-scheme",
        "lbc-scheme-only",
        "empty",
        "no-targets",
        "blank",
        "none",
        "nlb-managed-attributes",
        "nlb-unmanaged-attribute",
        "nlb-security-groups",
        "nlb-extra-security-groups",
        "nlb-attribute-value",
        "classic-elb",
        "external",
    ],
)
def test_load_balancer_names_its_scheme_and_target_nodes(
    annotations: dict[str, str], expected: list[str]
) -> None:
    assert load_balancer_names_scheme_and_targets(SERVICE, gatekept(None, annotations)) == expected


# -- 4b. leaders-behind-gatekeeper -------------------------------------------------------------


def _serving_lws() -> dict[str, Any]:
    leader = {
        "spec": {
            "containers": [
                {"name": "vllm", "command": ["vllm"], "args": ["serve", "m", "--host=127.0.0.1"]},
                {"name": "gatekeeper", "ports": [{"name": "gatekeeper", "containerPort": 8080}]},
            ]
        }
    }
    worker = {"spec": {"containers": [{"name": "vllm", "args": ["serve", "m", "--headless"]}]}}
    return {
        "metadata": {"name": "gemma-vllm"},
        "spec": {"leaderWorkerTemplate": {"leaderTemplate": leader, "workerTemplate": worker}},
    }


def test_leader_behind_gatekeeper_passes() -> None:
    assert leaders_behind_gatekeeper(LWS, _serving_lws()) == []


def test_missing_gatekeeper_and_exposed_vllm_are_reported() -> None:
    props = _serving_lws()
    leader = props["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    leader["containers"] = [
        {
            "name": "vllm",
            "args": ["serve", "m", "--host=0.0.0.0"],
            "ports": [{"name": "http", "containerPort": 8000}],
        }
    ]
    assert leaders_behind_gatekeeper(LWS, props) == [
        'leaderTemplate: no container "gatekeeper" with a port named "gatekeeper"; run the '
        "gatekeeper beside vLLM so only the API, with the key, reaches it",
        'leaderTemplate: container "vllm" does not listen on loopback; pass --host=127.0.0.1 so '
        "only the gatekeeper in the pod reaches it",
        'leaderTemplate: container "vllm" declares ports; remove them, the gatekeeper\'s port is '
        "the pod's only way in",
    ]


#: A `frontDoor: vllm-key` leader's vLLM environment as the stack renders it.
KEY_ENV = [
    {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "k", "key": "k"}}},
    {"name": "PYTHONPATH", "value": "/opt/programs"},
]


def _vllm_key_lws(labels: dict[str, str] | None = None, **engine: Any) -> dict[str, Any]:
    """A leader whose vLLM checks the key as the stack renders it (`frontDoor: vllm-key`, or
    `labels` of an elastic stack's group behind the door), with `engine` over vLLM's fields."""
    vllm = {
        "name": "vllm",
        "args": ["serve", "m", "--middleware", "key_check.KeyCheck"],
        "env": KEY_ENV,
        "volumeMounts": [{"name": "programs", "mountPath": "/opt/programs"}],
        **engine,
    }
    labels = labels or {FRONT_DOOR_LABEL: "vllm-key"}
    leader = {"metadata": {"labels": labels}, "spec": {"containers": [vllm]}}
    return {"spec": {"leaderWorkerTemplate": {"leaderTemplate": leader}}}


NO_MIDDLEWARE = (
    'leaderTemplate: container "vllm" does not run --middleware key_check.KeyCheck from a mounted '
    "PYTHONPATH; without it vLLM asks for the key under /v1 only and serves POST /invocations to "
    "anyone"
)
BYPASSES = [
    {"name": "VLLM_USE_RUST_FRONTEND", "value": "1"},
    {"name": "CUSTOM_FASTAPI_MIDDLEWARE_THROTTLE", "value": "m:f"},
]


@pytest.mark.parametrize(
    ("engine", "message"),
    [
        ({"args": ["serve", "m"]}, NO_MIDDLEWARE),
        ({"args": ["serve", "--middleware", "other.Check"]}, NO_MIDDLEWARE),
        ({"volumeMounts": []}, NO_MIDDLEWARE),
        (
            {"args": ["serve", "m", "--middleware", "key_check.KeyCheck", "--grpc"]},
            'leaderTemplate: container "vllm" sets --grpc, which serve routes around the key '
            "check; remove them",
        ),
        (
            {"env": [*KEY_ENV, *BYPASSES]},
            'leaderTemplate: container "vllm" sets CUSTOM_FASTAPI_MIDDLEWARE_THROTTLE, '
            "VLLM_USE_RUST_FRONTEND, which serve routes around the key check; remove them",
        ),
    ],
)
@pytest.mark.parametrize(
    "labels",
    [{FRONT_DOOR_LABEL: "vllm-key"}, {"gemma-graviton.dev/behind-door": "true"}],
    ids=["vllm-key", "behind-door"],
)
def test_a_leader_without_gatekeeper_runs_the_key_check_on_every_route(
    engine: dict[str, Any], message: str, labels: dict[str, str]
) -> None:
    assert leaders_behind_gatekeeper(LWS, _vllm_key_lws(labels)) == []
    assert leaders_behind_gatekeeper(LWS, _vllm_key_lws(labels, **engine)) == [message]


# -- 5. secrets-not-in-plain-config ------------------------------------------------------------

HF_FIX = (
    "holds a Hugging Face token in plain text; set it with `pulumi config set --secret hfToken`, "
    "pass the secret Output and label the Secret gemma-graviton.dev/secret-source: pulumi-secret"
)
PLAIN_FIX = (
    "comes from plain configuration (gemma-graviton.dev/secret-source: plain); set it with "
    "`pulumi config set --secret` and label the Secret gemma-graviton.dev/secret-source: "
    "pulumi-secret"
)


@pytest.mark.parametrize(
    "props",
    [
        secret_props(stringData={"HF_TOKEN": secret(HF_TOKEN)}),  # as Pulumi mocks record it
        secret_props(stringData=secret({"HF_TOKEN": HF_TOKEN})),
        secret_props(
            {"gemma-graviton.dev/secret-source": "pulumi-secret"}, stringData={"t": HF_TOKEN}
        ),
        secret_props(stringData={"note": "hf_short", "url": "https://huggingface.co/google"}),
        secret_props(data={"apiKey": base64.b64encode(b"not-a-token").decode()}),
        secret_props({"gemma-graviton.dev/secret-source": "plain"}),  # nothing in it
    ],
    ids=["wrapped-value", "wrapped-map", "pulumi-secret-label", "no-token", "data", "empty-plain"],
)
def test_secret_passes_without_plain_tokens(props: dict[str, Any]) -> None:
    assert secrets_not_in_plain_config(SECRET, props) == []


def test_secret_reports_hf_tokens_in_string_data_and_base64_data() -> None:
    props = secret_props(
        data={
            "token": base64.b64encode(HF_TOKEN.encode()).decode(),
            "netrc": "machine huggingface.co password " + HF_TOKEN,  # not base64 at all
        },
        stringData={"HF_TOKEN": HF_TOKEN, "API_KEY": "sk-local"},
    )
    messages = secrets_not_in_plain_config(SECRET, props)
    assert messages == [
        f'data["token"] {HF_FIX}',
        f'data["netrc"] {HF_FIX}',
        f'stringData["HF_TOKEN"] {HF_FIX}',
    ]
    assert not any(HF_TOKEN in m for m in messages)


def test_secret_labelled_plain_reports_every_value_even_a_wrapped_one() -> None:
    props = secret_props(
        {"gemma-graviton.dev/secret-source": "plain"},
        data={"apiKey": "c2stbG9jYWw="},
        stringData={"HF_TOKEN": secret(HF_TOKEN)},
    )
    assert secrets_not_in_plain_config(SECRET, props) == [
        f'data["apiKey"] {PLAIN_FIX}',
        f'stringData["HF_TOKEN"] {PLAIN_FIX}',
    ]


def test_is_pulumi_secret_recognises_only_the_secret_signature() -> None:
    assert is_pulumi_secret(secret("x"))
    assert not is_pulumi_secret({SPECIAL_SIG_KEY: "c44067f5952c0a294b673a41bacd8c17", "path": "x"})
    assert not is_pulumi_secret("x")


# -- the registry ------------------------------------------------------------------------------


def test_registry_lists_the_seven_rules_all_mandatory() -> None:
    assert [rule.name for rule in RULES] == [
        "model-pods-requests-equal-limits",
        "ranks-spread-by-required-anti-affinity",
        "images-pinned",
        "load-balancer-to-gatekeeper-over-tls",
        "load-balancer-names-scheme-and-targets",
        "leaders-behind-gatekeeper",
        "secrets-not-in-plain-config",
    ]
    assert {rule.enforcement_level for rule in RULES} == {"mandatory"}
    assert all(rule.description.endswith(".") for rule in RULES)


#: Per rule, kinds next to the one it checks, with props it would report on that one.
NEIGHBOURS = {
    "model-pods-requests-equal-limits": [(DEPLOYMENT, deployment_props(IMAGE))],  # no resources
    "ranks-spread-by-required-anti-affinity": [(DEPLOYMENT, deployment_props(IMAGE))],
    "images-pinned": [(SERVICE, service_props()), ("kubernetes:batch/v1:CronJob", {"spec": {}})],
    "load-balancer-to-gatekeeper-over-tls": [(DEPLOYMENT, service_props())],
    "load-balancer-names-scheme-and-targets": [(DEPLOYMENT, service_props())],
    "leaders-behind-gatekeeper": [(SERVICE, service_props())],
    "secrets-not-in-plain-config": [
        (
            "kubernetes:core/v1:ConfigMap",
            {"metadata": {"name": "x"}, "data": {"HF_TOKEN": HF_TOKEN}},
        )
    ],
}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_every_rule_ignores_unrelated_resources(rule: Any) -> None:
    assert rule.validate("aws:ec2/vpc:Vpc", {"cidrBlock": "10.0.0.0/16"}) == []
    assert rule.validate("kubernetes:core/v1:Namespace", {"metadata": {"name": "gemma"}}) == []
    for kind, props in NEIGHBOURS[rule.name]:
        assert rule.validate(kind, props) == [], kind


# -- the pack ----------------------------------------------------------------------------------


@pytest.fixture
def pack(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run `policies/__main__.py` as Pulumi does, with `PolicyPack` recording its arguments.

    The real `PolicyPack` starts a gRPC server and sleeps until the engine kills the process.
    """
    import pulumi_policy  # pinned in requirements-dev.txt: a missing pack SDK fails, not skips

    built: dict[str, Any] = {}

    def record(**kwargs: Any) -> None:
        built.update(kwargs)

    monkeypatch.setattr(pulumi_policy, "PolicyPack", record)
    monkeypatch.delitem(sys.modules, "rules", raising=False)
    try:
        runpy.run_path(str(POLICIES_DIR), run_name="__main__")
    finally:
        sys.modules.pop("rules", None)  # the pack imports its rules as a top-level module
    return built


def test_pack_registers_one_mandatory_policy_per_rule(pack: dict[str, Any]) -> None:
    from pulumi_policy import EnforcementLevel, ResourceValidationPolicy

    assert pack["name"] == "gemma-graviton"
    assert pack["enforcement_level"] is EnforcementLevel.MANDATORY
    policies = pack["policies"]
    assert all(isinstance(p, ResourceValidationPolicy) for p in policies)
    assert [(p.name, p.description, p.enforcement_level) for p in policies] == [
        (rule.name, rule.description, EnforcementLevel.MANDATORY) for rule in RULES
    ]


def analyze(pack: dict[str, Any], resource_type: str, props: dict[str, Any]) -> list[Any]:
    """pulumi-policy's own Analyze on a protobuf request, as the engine sends it."""
    from pulumi.runtime.proto import analyzer_pb2
    from pulumi_policy.policy import _PolicyAnalyzerServicer

    servicer = _PolicyAnalyzerServicer(
        pack["name"], "0.1.0", pack["policies"], pack["enforcement_level"]
    )
    request = analyzer_pb2.AnalyzeRequest(
        type=resource_type, urn=f"urn:pulumi:dev::gemma-graviton::{resource_type}::x", name="x"
    )
    request.properties.update(props)
    return list(servicer.Analyze(request, None).diagnostics)


def test_pack_reports_each_message_as_a_mandatory_violation(pack: dict[str, Any]) -> None:
    from pulumi.runtime.proto import analyzer_pb2

    props = lws_props()
    worker_spec(props)["containers"][0]["image"] = "vllm/vllm-openai-cpu:latest"
    worker_spec(props)["containers"][0]["resources"]["limits"]["cpu"] = "7"
    # The fixture's pods have no gatekeeper; that rule's own message is tested above.
    diagnostics = [
        d for d in analyze(pack, LWS, props) if d.policyName != "leaders-behind-gatekeeper"
    ]
    images, requests = RULES[2], RULES[0]
    assert [(d.policyName, d.message, d.enforcementLevel) for d in diagnostics] == [
        (
            requests.name,
            requests.description + '\nworkerTemplate container "vllm": cpu request 6 differs '
            "from limit 7; set the request equal to the limit so the pod is Guaranteed",
            analyzer_pb2.MANDATORY,
        ),
        (
            images.name,
            images.description + '\nworkerTemplate container "vllm": image '
            '"vllm/vllm-openai-cpu:latest" uses the moving tag latest; pin a version tag or an '
            "@sha256 digest",
            analyzer_pb2.MANDATORY,
        ),
    ]
    # The group as the program builds it passes every rule but that one, in both templates.
    assert [d.policyName for d in analyze(pack, LWS, lws_props())] == [
        "leaders-behind-gatekeeper"
    ] * 2


def test_pack_sees_a_secret_input_as_plain_text(pack: dict[str, Any]) -> None:
    """The engine sends secrets wrapped; pulumi-policy 1.21.0 hands the policy the bare value."""
    wrapped = secret_props(stringData={"HF_TOKEN": secret(HF_TOKEN)})
    assert secrets_not_in_plain_config(SECRET, wrapped) == []  # what Pulumi mocks record
    diagnostics = analyze(pack, SECRET, wrapped)
    assert [d.message.splitlines()[-1] for d in diagnostics] == [f'stringData["HF_TOKEN"] {HF_FIX}']
    labelled = secret_props(
        {"gemma-graviton.dev/secret-source": "pulumi-secret"},
        stringData={"HF_TOKEN": secret(HF_TOKEN)},
    )
    assert analyze(pack, SECRET, labelled) == []


def test_pack_turns_an_unknown_preview_value_into_an_advisory_note(pack: dict[str, Any]) -> None:
    from pulumi.runtime.proto import analyzer_pb2
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    props = gatekept(["0.0.0.0/0"], {**TLS, INTERNAL: "false", **TARGETS}, name="https")
    props["metadata"]["annotations"][SSL_CERT] = UNKNOWN_STRING_VALUE
    diagnostics = analyze(pack, SERVICE, props)
    assert [(d.policyName, d.enforcementLevel) for d in diagnostics] == [
        ("load-balancer-to-gatekeeper-over-tls", analyzer_pb2.ADVISORY)
    ]
    assert diagnostics[0].message == (
        "can't run policy 'load-balancer-to-gatekeeper-over-tls' from policy pack "
        "'gemma-graviton@v0.1.0' during preview: string value at "
        f".metadata.annotations.{SSL_CERT} can't be known during preview"
    )
