"""Running the Pulumi program as Pulumi's Python host does, under the recording mocks."""

from __future__ import annotations

import json
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pulumi
import yaml

from components.manifests import identity
from infra.adapters.wiring import NAMESPACE
from infra.plan import iam
from tests.fakes.pulumi_host import pulumi_host
from tests.fakes.pulumi_mocks import ACCOUNT_ID, RecordingMocks, run

ROLE_TYPE = "aws:iam/role:Role"

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "infra"
HF_TOKEN = "hf_" + "x" * 34


def stack_values(stack: str) -> dict[str, Any]:
    document = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return dict(document["config"])


#: The vLLM image with a digest of the right shape, as a user sets it (the mocks pull nothing).
VLLM_IMAGE = "vllm/vllm-openai-cpu:v0.31.0-arm64@sha256:" + "0123456789abcdef" * 4
#: What a user sets in place of each committed stack's placeholders before `pulumi up`, which
#: refuses them (`infra.plan.placeholders`): public ranges outside the documentation ranges, a
#: certificate ARN that is not all zeros, the vLLM image with its digest, kubectl principals in an
#: account of the user's own rather than the documentation's.
OWN_ACCOUNT = "210987654321"
OWN_VALUES: dict[str, dict[str, Any]] = {
    "dev": {
        "allowedCidrs": ["100.24.0.10/32"],
        "endpointPublicAccessCidrs": ["100.24.0.0/24"],
        "vllmImage": VLLM_IMAGE,
        "clusterAdminArns": [f"arn:aws:iam::{OWN_ACCOUNT}:role/platform-admin"],
    },
    "minimal": {
        "vllmImage": VLLM_IMAGE,
        "endpointPublicAccessCidrs": ["100.26.0.0/24"],
        "clusterAdminArns": [f"arn:aws:iam::{OWN_ACCOUNT}:role/platform-admin"],
    },
    "prod": {
        "vllmImage": VLLM_IMAGE,
        "allowedCidrs": ["100.25.0.0/24"],
        "endpointPublicAccessCidrs": ["100.25.0.0/24"],
        "tlsCertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/"
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        "clusterAdminArns": [f"arn:aws:iam::{OWN_ACCOUNT}:role/platform-admin"],
        "clusterViewerArns": [f"arn:aws:iam::{OWN_ACCOUNT}:role/ml-oncall"],
    },
}


def bootstrap_roles(
    stack: str, existing_cluster: str | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """The roles the bootstrap creates for `stack` (`components.manifests.identity`), fenced to
    `existing_cluster` if given, as IAM returns them: (type, name) -> state."""
    # The file's region, as the program reads it (which never loads `infra.plan.stackfile`).
    region = stack_values(stack)["gemma-graviton:region"]
    found = {}
    for role in identity.stack_roles(NAMESPACE, existing_cluster):
        name = identity.role_name(stack, role.key)
        path = iam.role_path(stack)
        found[(ROLE_TYPE, name)] = {
            "name": name,
            "path": path,
            "arn": f"arn:aws:iam::{ACCOUNT_ID}:role{path}{name}",
            "permissionsBoundary": iam.boundary_arn(stack, account=ACCOUNT_ID),
            "assumeRolePolicy": json.dumps(role.trust(ACCOUNT_ID, "aws", region, stack)),
        }
    return found


def run_program(
    mocks: RecordingMocks,
    stack: str,
    overrides: dict[str, Any] | None = None,
    hf: bool = True,
    api_key: str | None = None,
    preview: bool = False,
    as_shipped: bool = False,
    previous_key: str | None = None,
    bootstrapped: bool = True,
    without: tuple[str, ...] = (),
    extra: Callable[[], None] | None = None,
) -> None:
    """Run the program on a committed stack as `pulumi up` (or, with `preview`, as `pulumi
    preview`) would. The stack's placeholders are replaced by `OWN_VALUES` unless `as_shipped`.
    The account holds the bootstrap's roles of `stack` unless not `bootstrapped` (fenced to
    the overrides' `existingCluster`, if any). `without` drops keys of the stack file; `extra`
    registers more after the program, as a stray resource in it would."""
    own = {} if as_shipped else OWN_VALUES.get(stack, {})
    values = {
        **stack_values(stack),
        **{f"gemma-graviton:{k}": v for k, v in {**own, **(overrides or {})}.items()},
    }
    for key in without:
        values.pop(f"gemma-graviton:{key}", None)
    given = {"hfToken": HF_TOKEN if hf else None, "apiKey": api_key, "apiKeyPrevious": previous_key}
    secrets = {f"gemma-graviton:{k}": v for k, v in given.items() if v is not None}
    values |= secrets
    text = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    if bootstrapped:
        mocks.existing |= bootstrap_roles(stack, (overrides or {}).get("existingCluster"))
    pulumi.runtime.set_mocks(mocks, project="gemma-graviton", stack=stack, preview=preview,
                             monitor=mocks.monitor)  # fmt: skip
    pulumi.runtime.set_all_config(text, list(secrets))

    def program() -> None:
        runpy.run_path(str(PROGRAM), run_name="__main__")
        if extra is not None:
            extra()

    run(program)


#: Monitoring, its alarm e-mail and the volume cache on: every role the stack's pods can use.
EVERYTHING_ON = {"monitoring": True, "modelCache": "volume", "alarmEmail": "oncall@example.com"}
_SHARED: dict[str, tuple[RecordingMocks, dict[str, Any]]] = {}


def shared_run(
    stack: str, overrides: dict[str, Any] | None = None
) -> tuple[RecordingMocks, dict[str, Any]]:
    """`run_program(mocks, stack, overrides)` under Pulumi's host, once per session: its mocks
    and exports, shared by the tests that only read them (a test that edits them runs its own).
    The caller's import path is left as the program leaves it (infra/__main__.py puts the root on
    it), so the layers' lazy imports work in the caller under the host as after its own run."""
    key = json.dumps([stack, overrides or {}], sort_keys=True)
    if key not in _SHARED:
        mocks, exported = RecordingMocks().install(), {}
        with pulumi_host(PROGRAM), mock.patch.object(pulumi, "export", exported.__setitem__):
            run_program(mocks, stack, overrides)
        pulumi.runtime.set_all_config({}, [])
        _SHARED[key] = mocks, exported
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return _SHARED[key]


#: The model's node group and its front door's Service, by name: an elastic stack adds a system
#: node group and the leaders' metrics Service beside them.
MODEL_NODES = ("eks:index:ManagedNodeGroup", "eks-nodes")
SYSTEM_NODES = ("eks:index:ManagedNodeGroup", "eks-system-nodes")
MODEL_SERVICE = ("kubernetes:core/v1:Service", "model-svc")


def groups(stack: str, count: int) -> dict[str, Any]:
    """`count` groups on `stack`: `replicas` on a fixed stack, `maxGroups` on an elastic one
    (which refuses `replicas`). Read from the stack file: under the host the project's modules
    are not importable until the program has run."""
    elastic = "gemma-graviton:minGroups" in stack_values(stack)
    return {"maxGroups": count} if elastic else {"replicas": count}


#: A cluster the stack does not own, as a platform team runs it: in us-west-2 (the dev stack's
#: region), its own VPC and three private subnets, one per zone.
EXISTING_CLUSTER = "platform-shared"
EXISTING_VPC = "vpc-0a1b2c3d4e5f60718"
#: Subnet ID -> (zone, zone ID, free addresses); us-west-2a is the dev stack's zone.
EXISTING_SUBNETS = {
    "subnet-0aaa1111bbbb2222c": ("us-west-2a", "usw2-az2", 3900),
    "subnet-0ddd3333eeee4444f": ("us-west-2b", "usw2-az1", 3900),
    "subnet-0999888877776666a": ("us-west-2c", "usw2-az3", 3900),
}
#: The public NAT gateway the cluster's main route table sends 0.0.0.0/0 to.
NAT_GATEWAY = "nat-0a1b2c3d4e5f60718"
#: The add-ons a platform cluster commonly runs: the VPC CNI with its policy agent, the Pod
#: Identity agent and Container Insights (no EBS CSI driver).
EXISTING_ADDONS = {
    "vpc-cni": '{"enableNetworkPolicy":"true"}',
    "eks-pod-identity-agent": "",
    "amazon-cloudwatch-observability": "",
}
LWS_CRD = (
    "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
    "leaderworkersets.leaderworkerset.x-k8s.io",
)
#: What a stack into `EXISTING_CLUSTER` sets and drops: the dev stack file's cluster keys are
#: refused with `existingCluster`.
EXISTING_KEYS = {"existingCluster": EXISTING_CLUSTER, "lwsInstalled": False}
NOT_WITH_EXISTING = ("endpointPublicAccessCidrs", "clusterAdminArns", "clusterViewerArns")


def lws_crd(drop: str | None = None) -> dict[str, Any]:
    """The CRD LWS v0.10.0 installs, as the API server returns it (the schema the groups are
    checked against, tests/schemas); `drop` removes one field of `spec` from its v1 schema."""
    copy = json.loads((REPO / "tests" / "schemas" / "lws-v0.10.0-structure.json").read_text())
    schema = copy["openAPIV3Schema"]
    if drop is not None:
        del schema["properties"]["spec"]["properties"][drop]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": LWS_CRD[1]},
        "spec": {
            "group": "leaderworkerset.x-k8s.io",
            "names": {"kind": "LeaderWorkerSet", "plural": "leaderworkersets"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def existing_cluster(
    mocks: RecordingMocks,
    *,
    version: str = "1.35",
    addons: dict[str, str | None] | None = None,
    free: int | None = None,
    lws: dict[str, Any] | None = None,
    public: tuple[str, ...] = (),
    ours: tuple[str, ...] = (),
    routes: dict[str, str] | None = None,
    authentication: str = "API_AND_CONFIG_MAP",
) -> None:
    """Put `EXISTING_CLUSTER` in the account as DescribeCluster, DescribeSubnets and
    DescribeAddon describe it; `free` addresses in every subnet if given; `lws` its LWS CRD;
    the `public` subnets map public addresses on launch and route to an internet gateway, the
    rest use the main route table, to a NAT gateway (a subnet in `routes` has a table of its
    own whose default route goes to that gateway, none if ""); an add-on given None is absent,
    one in `ours` carries the dev stack's tags (it made it); `authentication` its mode."""
    region = "us-west-2"
    mocks.clusters[EXISTING_CLUSTER] = {
        "id": EXISTING_CLUSTER,
        "name": EXISTING_CLUSTER,
        "arn": f"arn:aws:eks:{region}:{ACCOUNT_ID}:cluster/{EXISTING_CLUSTER}",
        "version": version,
        "platformVersion": "eks.12",
        "status": "ACTIVE",
        "endpoint": f"https://5E1D0CA1F00DBA5E.gr7.{region}.eks.amazonaws.com",
        "certificateAuthorities": [{"data": "TU9DSy1QTEFURk9STS1DQQ=="}],
        "identities": [
            {"oidcs": [{"issuer": f"https://oidc.eks.{region}.amazonaws.com/id/5E1D0CA1F00DBA5E"}]}
        ],
        "accessConfigs": [
            {
                "authenticationMode": authentication,
                "bootstrapClusterCreatorAdminPermissions": True,
            }
        ],
        "roleArn": f"arn:aws:iam::{ACCOUNT_ID}:role/platform-eks-cluster",
        "vpcConfig": {
            "clusterSecurityGroupId": "sg-0c1u5te75ecur17y",
            "endpointPrivateAccess": True,
            "endpointPublicAccess": True,
            "publicAccessCidrs": ["0.0.0.0/0"],
            "securityGroupIds": [],
            "subnetIds": list(EXISTING_SUBNETS),
            "vpcId": EXISTING_VPC,
        },
        "tags": {"team": "platform"},
    }
    for subnet_id, (zone, zone_id, count) in EXISTING_SUBNETS.items():
        mocks.subnets[subnet_id] = {
            "id": subnet_id,
            "vpcId": EXISTING_VPC,
            "availabilityZone": zone,
            "availabilityZoneId": zone_id,
            "availableIpAddressCount": count if free is None else free,
            "mapPublicIpOnLaunch": subnet_id in public,
            "cidrBlock": "10.80.0.0/20",
            "state": "available",
        }
    mocks.nat_gateways[NAT_GATEWAY] = {
        "id": NAT_GATEWAY,
        "state": "available",
        "connectivityType": "public",
    }
    tables = {"rtb-main": (NAT_GATEWAY, ())}
    tables |= {"rtb-public": ("igw-0f1e2d3c4b5a69788", public)} if public else {}
    for subnet_id, gateway in (routes or {}).items():
        tables[f"rtb-{subnet_id}"] = (gateway, (subnet_id,))
    for table_id, (gateway, subnets) in tables.items():
        mocks.route_tables[table_id] = {
            "vpcId": EXISTING_VPC,
            "subnets": subnets,
            "main": table_id == "rtb-main",
            "routes": [_default_route(gateway)] if gateway else [],
        }
    for name, values in (EXISTING_ADDONS if addons is None else addons).items():
        if values is None:
            continue
        mocks.addons[(EXISTING_CLUSTER, name)] = {
            "id": f"{EXISTING_CLUSTER}:{name}",
            "addonName": name,
            "clusterName": EXISTING_CLUSTER,
            "addonVersion": "v1.0.0-eksbuild.1",
            "configurationValues": values,
            "serviceAccountRoleArn": "",
            "tags": {"project": "gemma-graviton", "stack": "dev"} if name in ours else {},
        }
    if lws is not None:
        mocks.existing[LWS_CRD] = lws


def _default_route(gateway: str) -> dict[str, str]:
    """A 0.0.0.0/0 route to `gateway` as the route table data source lists it (every field,
    unset ones empty)."""
    fields = ("carrierGatewayId", "coreNetworkArn", "destinationPrefixListId", "instanceId")
    fields += ("egressOnlyGatewayId", "ipv6CidrBlock", "localGatewayId", "networkInterfaceId")
    fields += ("odbNetworkArn", "transitGatewayId", "vpcEndpointId", "vpcPeeringConnectionId")
    kinds = {"nat-": "natGatewayId", "tgw-": "transitGatewayId"}
    target = kinds.get(gateway[:4], "gatewayId")
    route = dict.fromkeys((*fields, "gatewayId", "natGatewayId"), "")
    return {**route, "cidrBlock": "0.0.0.0/0", target: gateway}


def run_into_existing(
    mocks: RecordingMocks, overrides: dict[str, Any] | None = None, **kw: Any
) -> None:
    """The dev stack's program into `EXISTING_CLUSTER` (which the test has put in place)."""
    run_program(
        mocks, "dev", {**EXISTING_KEYS, **(overrides or {})}, without=NOT_WITH_EXISTING, **kw
    )


def stacks_with(layer: str) -> list[str]:
    """The shipped stacks whose config turns `layer` on (a StackConfig attribute such as
    `monitoring` or `gatekeeper`): a layer's tests run on the stacks that have it, the minimal
    stack's own on it (tests/program/test_minimal_stack.py)."""
    from infra.plan.stackfile import load_stack, stack_names  # not in the program's count

    return [stack for stack in stack_names() if getattr(load_stack(stack), layer)]
