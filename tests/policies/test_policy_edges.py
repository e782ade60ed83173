"""The policy rules at their edges: labels of one pod alone, odd image references, TLS port lists,
ranges with host bits, secret values that are not plain text, and the props a policy may see
(wrapped secrets, plain numbers, missing parts). Each selector operator, label keys that must
match or differ, and namespaces are in test_policies.py's tables of terms."""

from __future__ import annotations

import base64
import copy
from typing import Any

from policies.rules import (
    LWS,
    POD,
    SECRET,
    SERVICE,
    images_pinned,
    leaders_behind_gatekeeper,
    load_balancer_to_gatekeeper_over_tls,
    model_pods_requests_equal_limits,
    parse_quantity,
    ranks_spread_by_required_anti_affinity,
    secrets_not_in_plain_config,
)
from tests.policies.test_policies import (
    BOTH_MISSING,
    HF_FIX,
    HF_TOKEN,
    IMAGE,
    SPREAD_MISSING,
    SSL_PORTS,
    TLS,
    TLS_FIX,
    gatekept,
    lws_props,
    secret,
    secret_props,
    set_terms,
    spread_term,
    with_,
    worker_spec,
)

# -- 2. ranks-spread-by-required-anti-affinity, at its edges ---------------------------------------


def test_a_key_only_the_leader_carries_is_not_shared() -> None:
    props = lws_props()
    props["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]["tier"] = "a"
    set_terms(props, with_(matchLabelKeys=["tier"]))
    assert ranks_spread_by_required_anti_affinity(LWS, props) == BOTH_MISSING


def test_an_empty_lws_name_matches_no_name_selector() -> None:
    props = lws_props()
    props["metadata"]["name"] = ""
    set_terms(props, spread_term(""))
    assert ranks_spread_by_required_anti_affinity(LWS, props) == BOTH_MISSING


def test_a_group_without_a_worker_template_is_reported_not_crashed() -> None:
    props = lws_props()
    del props["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert ranks_spread_by_required_anti_affinity(LWS, props) == [
        SPREAD_MISSING.format("workerTemplate")
    ]


# -- 3. images-pinned, at its edges ----------------------------------------------------------------


def _pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": list(containers)}}


def test_odd_images_and_names_are_reported_as_they_are() -> None:
    hexes = "0123456789abcdef" * 4
    assert images_pinned(POD, _pod({"name": "a", "image": 5}, {"name": "", "image": ""})) == [
        'container "a": has no image; set an image and pin a version tag or an @sha256 digest',
        "container #1: has no image; set an image and pin a version tag or an @sha256 digest",
    ]
    two_digests = f"vllm@sha256:bad@sha256:{hexes}"
    assert images_pinned(POD, _pod({"name": "a", "image": two_digests})) == [
        f'container "a": image "{two_digests}" has a malformed digest; use @sha256:<64 hex digits>'
    ]
    # A wrapped (secret) image is read like a plain one.
    assert images_pinned(POD, _pod({"name": "a", "image": secret(secret(IMAGE))})) == []


# -- 1. requests equal limits and quantities, at their edges -------------------------------------


def test_a_malformed_limit_is_named_as_the_limit() -> None:
    props = lws_props()
    worker_spec(props)["containers"][0]["resources"]["limits"]["cpu"] = "six"
    assert model_pods_requests_equal_limits(LWS, props) == [
        'workerTemplate container "vllm": cpu limit "six" is not a Kubernetes quantity'
    ]


def test_whole_numbers_and_the_largest_exponent_parse() -> None:
    assert parse_quantity(26) == 26
    assert parse_quantity(2**40) == 2**40
    assert parse_quantity("1e40") == 10**40
    assert parse_quantity("1e-40") * 10**40 == 1


# -- 4. load-balancer-to-gatekeeper-over-tls, at its edges -----------------------------------------

CERT_ONLY = {k: v for k, v in TLS.items() if k != SSL_PORTS}


def _two_ports(annotations: dict[str, str]) -> dict[str, Any]:
    props = gatekept(["0.0.0.0/0"], annotations, name="https")
    props["spec"]["ports"].append({"name": "web", "port": 8443.0, "targetPort": "gatekeeper"})
    return props


def test_tls_ports_may_be_names_numbers_or_all() -> None:
    for ports in ("https,web", "https,8443", "443,8443", "*"):
        props = _two_ports({**TLS, SSL_PORTS: ports})
        assert load_balancer_to_gatekeeper_over_tls(SERVICE, props) == [], ports
    # A certificate without a port list covers every port.
    assert load_balancer_to_gatekeeper_over_tls(SERVICE, _two_ports(CERT_ONLY)) == []
    props = _two_ports({**TLS, SSL_PORTS: "https"})
    assert load_balancer_to_gatekeeper_over_tls(SERVICE, props) == [
        f"the internet reaches this load balancer (0.0.0.0/0) {TLS_FIX}"
    ]
    text_port = _two_ports({**TLS, SSL_PORTS: "https,8443"})
    text_port["spec"]["ports"][1]["port"] = "8443"
    assert load_balancer_to_gatekeeper_over_tls(SERVICE, text_port) == []
    # A port that is not a number is compared as written, not refused with a crash.
    text_port["spec"]["ports"][1]["port"] = "eighty"
    assert load_balancer_to_gatekeeper_over_tls(SERVICE, text_port) == [
        f"the internet reaches this load balancer (0.0.0.0/0) {TLS_FIX}"
    ]


def test_ranges_are_read_as_networks_and_all_are_checked() -> None:
    # Host bits set: the range of 203.0.113.7/24 is 203.0.113.0/24, public.
    ranges = ["office", "203.0.113.7/24", "198.51.100.0/24", "192.0.2.0/24", "100.64.0.0/10"]
    assert load_balancer_to_gatekeeper_over_tls(SERVICE, gatekept(ranges)) == [
        'spec.loadBalancerSourceRanges entry "office" is not a CIDR; list CIDRs',
        "the internet reaches this load balancer (203.0.113.0/24, 198.51.100.0/24, "
        f"192.0.2.0/24) {TLS_FIX}",
    ]


# -- 4b. leaders-behind-gatekeeper, at its edges ---------------------------------------------------

SERVING = {
    "spec": {
        "containers": [
            {"name": "vllm", "command": ["vllm", "serve", "m", "--host=127.0.0.1"]},
            {"name": "gatekeeper", "ports": [{"name": "gatekeeper", "containerPort": 8080}]},
        ]
    }
}


def test_a_single_template_serves_and_the_command_counts_as_argv() -> None:
    props = {"spec": {"leaderWorkerTemplate": {"workerTemplate": copy.deepcopy(SERVING)}}}
    assert leaders_behind_gatekeeper(LWS, props) == []


def test_a_gatekeeper_without_its_named_port_and_an_empty_group_are_reported() -> None:
    serving = copy.deepcopy(SERVING)
    serving["spec"]["containers"][1]["ports"] = [{"name": "http", "containerPort": 8080}]
    props = {"spec": {"leaderWorkerTemplate": {"leaderTemplate": serving}}}
    missing = (
        'leaderTemplate: no container "gatekeeper" with a port named "gatekeeper"; run the '
        "gatekeeper beside vLLM so only the API, with the key, reaches it"
    )
    assert leaders_behind_gatekeeper(LWS, props) == [missing]
    empty = {"spec": {"leaderWorkerTemplate": {}}}
    assert leaders_behind_gatekeeper(LWS, empty) == [
        missing.replace("leaderTemplate:", "workerTemplate:")
    ]


# -- 5. secrets-not-in-plain-config, at its edges ------------------------------------------------


def test_a_wrapped_value_does_not_excuse_the_next_one() -> None:
    props = secret_props(stringData={"a": secret("x"), "b": HF_TOKEN})
    assert secrets_not_in_plain_config(SECRET, props) == [f'stringData["b"] {HF_FIX}']


def test_data_that_is_not_text_or_not_base64_is_searched_as_it_is() -> None:
    encoded = base64.b64encode(HF_TOKEN.encode()).decode()
    values = {
        "number": 5,
        "accented": "clé-é",
        "not-base64": "a!b",
        "junk-inside": encoded[:4] + "!" + encoded[4:],
    }
    assert secrets_not_in_plain_config(SECRET, secret_props(data=values)) == []
    # Bytes that are not UTF-8 around a token still show the token.
    mixed = base64.b64encode(b"\xff\xfe" + HF_TOKEN.encode()).decode()
    assert secrets_not_in_plain_config(SECRET, secret_props(data={"m": mixed})) == [
        f'data["m"] {HF_FIX}'
    ]
