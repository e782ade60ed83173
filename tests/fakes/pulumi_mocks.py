"""The project's one Pulumi test harness: a recording ``Mocks`` and helpers to run code under it.

How a test uses it (pulumi 3.272)::

    def test_something(mocks: RecordingMocks) -> None:      # fresh mocks, gemma-graviton/dev
        net = run(lambda: Network("net", args))
        # or the whole program, as Pulumi runs it:
        # run(lambda: runpy.run_path("infra/__main__.py", run_name="__main__"))
        vpc = one(mocks.records, "aws:ec2/vpc:Vpc")
        assert vpc.inputs["enableDnsHostnames"] is True, vpc.urn
        assert resolve(net.vpc_id) == vpc.resource_id, vpc.urn
        assert is_secret(cluster.kubeconfig)

- ``run(fn)`` calls ``fn`` inside the Pulumi runtime (``pulumi.runtime.test``), then waits for
  every registration, invoke and ``apply`` to finish and re-raises the first error. Only after it
  returns are ``mocks.records`` complete and Outputs settled.
- ``resolve(output)`` / ``is_secret(output)`` read a settled Output (through the SDK's
  ``_sync_await``, which pumps the event loop; fine once ``run`` has returned).
- ``mocks.records`` holds one ``Recorded`` per registered resource, in registration order: the
  camelCase inputs as the engine sees them (integers arrive as floats, provider resources' inputs
  as strings, resource references as ``{"urn", "id"}``, secrets unwrapped and listed in
  ``secret_inputs``), the URN, the parent's URN, and the provider reference(s). ``mocks.calls``
  holds the invokes. Look resources up with ``by_type``/``one``/``named``.

What the mocks fabricate (only what a provider or the engine computes; the rest echoes inputs):
IDs and ARNs of AWS resources, auto-names (IAM roles, Kubernetes ``metadata.name``), a launch
template's ``latestVersion``, a Pod Identity association's ``associationId``, random results
(secret where the engine makes them so), a LoadBalancer Service's ingress hostname, and the
outputs of the pulumi-eks components. Remote
components (``eks:index:Cluster``, ``eks:index:ManagedNodeGroup``, ``kubernetes:helm.sh/v4:Chart``)
register once, with no children. Their outputs that are resource references in a real deployment
(``eksCluster``, ``nodeGroup``) are fabricated as references too, backed by a synthetic
registration, so ``cluster.eks_cluster.name`` resolves as it does against the real engine (the SDK
rejects a plain dict there). Invokes missing from ``_INVOKES`` fail loudly, so a new one is
noticed and given a plausible answer here.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pulumi
import pytest
from google.protobuf import json_format, struct_pb2
from pulumi.runtime import rpc
from pulumi.runtime.mocks import (
    MockCallArgs,
    MockMonitor,
    MockResourceArgs,
    _resolve_callbacks,
)
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.rpc import _special_resource_sig, _special_secret_sig, _special_sig_key
from pulumi.runtime.sync_await import _sync_await

T = TypeVar("T")

PROJECT = "gemma-graviton"
STACK = "dev"
ACCOUNT_ID = "123456789012"
REGION = "us-west-2"
#: Zone IDs per region as one account might map them (names map differently per account; the
#: IDs are the physical zones). us-east-1 includes use1-az3, where EKS refuses control planes.
ZONE_IDS = {
    "us-west-2": {"a": "usw2-az2", "b": "usw2-az1", "c": "usw2-az3", "d": "usw2-az4"},
    "us-east-1": {
        "a": "use1-az3",
        "b": "use1-az4",
        "c": "use1-az6",
        "d": "use1-az1",
        "e": "use1-az2",
        "f": "use1-az5",
    },
}


@dataclass(frozen=True)
class Recorded:
    """One resource registration as the mock engine saw it."""

    type_: str
    """The type token, e.g. ``aws:ec2/vpc:Vpc``."""
    name: str
    """The logical name."""
    inputs: dict[str, Any]
    """The inputs: camelCase keys, numbers as floats, resource references as ``{"urn", "id"}``,
    secrets unwrapped (see ``secret_inputs``)."""
    provider: str | None
    """The provider reference (``urn::id``) of a custom resource, if not the default one."""
    providers: dict[str, str]
    """A component's provider references by package (what its children inherit)."""
    resource_id: str | None
    """The ID the mock gave the resource (empty for components)."""
    custom: bool
    """True for provider-managed resources, False for components."""
    urn: str
    """The URN the mock engine built (parent types are part of it)."""
    parent: str | None
    """The parent's URN, or None for a read resource."""
    outputs: dict[str, Any] = field(default_factory=dict)
    """What the mock returned as the resource's state (secrets unwrapped)."""
    secret_inputs: frozenset[str] = frozenset()
    """Top-level input keys whose value was (or contained) a secret."""
    read: bool = False
    """A read of an existing resource (``Resource.get``), not a registration."""
    transforms: list[Any] = field(default_factory=list)
    """The resource's `transforms` option (the engine runs them on it and its children)."""


@dataclass(frozen=True)
class Invoked:
    """One provider function call (invoke) as the mock engine saw it."""

    token: str
    """The function token, e.g. ``aws:index/getPartition:getPartition``."""
    args: dict[str, Any]
    """The arguments, camelCase."""
    provider: str | None
    """The provider reference the invoke went to, if not the default one."""


def by_type(records: Iterable[Recorded], type_token: str) -> list[Recorded]:
    """All records of one type token, in registration order."""
    return [r for r in records if r.type_ == type_token]


def one(records: Iterable[Recorded], type_token: str) -> Recorded:
    """The single record of a type token; fails listing what was found otherwise."""
    records = list(records)
    found = by_type(records, type_token)
    if len(found) != 1:
        urns = "\n  ".join(r.urn for r in found) or "(none)"
        pytest.fail(f"expected exactly one {type_token}, found {len(found)}:\n  {urns}")
    return found[0]


def named(records: Iterable[Recorded], type_token: str, name: str) -> Recorded:
    """The record of a type token with one logical name; fails listing that type's names."""
    records = list(records)
    for record in by_type(records, type_token):
        if record.name == name:
            return record
    names = ", ".join(r.name for r in by_type(records, type_token)) or "(none)"
    pytest.fail(f"no {type_token} named {name!r}; found: {names}")


def _hex(*parts: str, length: int = 8) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


def _autoname(name: str) -> str:
    """A physical name shaped like Pulumi's auto-naming (logical name plus a random suffix)."""
    return f"{name}-{_hex('autoname', name, length=7)}"


_AWS_ID_PREFIXES = {
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/natGateway:NatGateway": "nat",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/routeTableAssociation:RouteTableAssociation": "rtbassoc",
    "aws:ec2/route:Route": "r-rtb",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
    "aws:ec2/securityGroupRule:SecurityGroupRule": "sgrule",
    "aws:ec2/launchTemplate:LaunchTemplate": "lt",
}

# Remote components that mint a resource reference to a child the real provider creates:
# component type -> (output property, child type, child name suffix).
_REFERENCED_CHILDREN = {
    "eks:index:Cluster": ("eksCluster", "aws:eks/cluster:Cluster", "-eksCluster"),
    "eks:index:ManagedNodeGroup": ("nodeGroup", "aws:eks/nodeGroup:NodeGroup", ""),
}


def _plain_resource_refs(struct: struct_pb2.Struct) -> struct_pb2.Struct:
    """A copy of ``struct`` with every resource reference replaced by ``{"urn", "id"}``."""

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            if value.get(_special_sig_key) == _special_resource_sig:
                return {k: value[k] for k in ("urn", "id") if k in value}
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    plain = struct_pb2.Struct()
    plain.update(walk(json_format.MessageToDict(struct)))
    return plain


def _unwrap_secrets(inputs: dict[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    """The inputs with secret markers removed, and the top-level keys that held a secret."""
    secret_keys: set[str] = set()

    def walk(value: Any, key: str) -> Any:
        if isinstance(value, dict):
            if value.get(_special_sig_key) == _special_secret_sig:
                secret_keys.add(key)
                return walk(value.get("value"), key)
            return {k: walk(v, key) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        return value

    plain = {k: walk(v, k) for k, v in inputs.items()}
    return plain, frozenset(secret_keys)


class RecordingMonitor(MockMonitor):
    """The SDK's mock monitor, telling the mocks each registration's URN and parent.

    ``Mocks.new_resource`` is not given the parent, so the monitor passes it (and the URN it is
    about to assign) through a thread-local: each registration runs on one executor thread.
    """

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self._current = threading.local()
        #: URN -> URNs it depends on (explicit `depends_on`, expanded as the SDK expands it).
        self.dependencies: dict[str, list[str]] = {}
        #: URNs registered with `retain_on_delete`: a delete or replacement leaves the object.
        self.retained: set[str] = set()

    def current(self) -> tuple[str | None, str | None, dict[str, str]]:
        """The (parent URN, URN, providers) of the registration being handled on this thread."""
        return getattr(self._current, "value", (None, None, {}))

    def RegisterResource(self, request):
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        self.dependencies[urn] = list(request.dependencies)
        if request.retainOnDelete:
            self.retained.add(urn)
        # The SDK's monitor would turn resource references among the inputs into Resource objects
        # on this executor thread, whose rehydration RPCs then land on the wrong event loop.
        # Recording them as {"urn", "id"} is all a test needs.
        inputs = rpc.deserialize_properties(_plain_resource_refs(request.object))
        self._current.value = (request.parent or None, urn, dict(request.providers))
        try:
            id_, state = self.mocks.new_resource(
                MockResourceArgs(
                    typ=request.type,
                    name=request.name,
                    inputs=inputs,
                    provider=request.provider,
                    resource_id=request.importId,
                    custom=request.custom or False,
                    transforms=_resolve_callbacks(request.transforms),
                )
            )
        finally:
            self._current.value = (None, None, {})
        # The engine marks these secret (e.g. RandomPassword.result); the SDK relies on it.
        for key in request.additionalSecretOutputs:
            if key in state:
                state[key] = rpc.wrap_rpc_secret(state[key])
        obj_proto = _sync_await(rpc.serialize_properties(state, {}))
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, id_, state)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_, object=obj_proto)

    def ReadResource(self, request):
        urn = self.make_urn(request.parent, request.type, request.name)
        self._current.value = (request.parent or None, urn, {})
        try:
            return super().ReadResource(request)
        finally:
            self._current.value = (None, None, {})

    def add_synthetic(self, type_: str, name: str, parent: str, id_: str, state: dict) -> str:
        """Register a resource the program never registers itself (a remote component's child)
        so a resource reference to it can be resolved; return its URN."""
        urn = self.make_urn(parent, type_, name)
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, id_, state)
        return urn


class RecordingMocks(pulumi.runtime.Mocks):
    """Records every registration and invoke; fabricates only provider-computed fields."""

    def __init__(self) -> None:
        self.records: list[Recorded] = []
        self.calls: list[Invoked] = []
        self.monitor = RecordingMonitor(self)
        self._lock = threading.Lock()
        #: Zone IDs that do not offer any instance type (a test removes a type from a zone).
        self.zones_without_offerings: set[str] = set()
        #: What exists in the account before the program runs, by (type, ID): the state a read
        #: (``Resource.get``) returns. A read of anything else fails, as the provider's read of
        #: a missing resource does (`harness.run_program` puts the bootstrap's roles here).
        self.existing: dict[tuple[str, str], dict[str, Any]] = {}
        #: What the data sources of a cluster the stack does not own answer (`existingCluster`):
        #: EKS clusters by name, EC2 subnets by ID and EKS add-ons by (cluster, add-on), as
        #: DescribeCluster, DescribeSubnets and DescribeAddon describe them (camelCase). A
        #: look-up of anything else fails as the provider's does ("couldn't find resource").
        self.clusters: dict[str, dict[str, Any]] = {}
        self.subnets: dict[str, dict[str, Any]] = {}
        self.addons: dict[tuple[str, str], dict[str, Any]] = {}
        #: Route tables by ID, as DescribeRouteTables lists them: `vpcId`, the `subnets`
        #: associated with it, whether it is the VPC's `main` one, its `routes` (camelCase).
        self.route_tables: dict[str, dict[str, Any]] = {}
        #: NAT gateways by ID (DescribeNatGateways): `state` and `connectivityType`.
        self.nat_gateways: dict[str, dict[str, Any]] = {}
        #: Instances by ID (DescribeInstances): `subnetId`, `state`, `tags` and `interfaces`, the
        #: private addresses of each attached interface by its ID (DescribeNetworkInterfaces).
        self.instances: dict[str, dict[str, Any]] = {}

    def install(self) -> RecordingMocks:
        """Make these mocks the Pulumi engine for the current test."""
        pulumi.runtime.set_mocks(
            self, project=PROJECT, stack=STACK, preview=False, monitor=self.monitor
        )
        return self

    # -- resources -------------------------------------------------------------------------

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict]:
        parent, urn, providers = self.monitor.current()
        urn = urn or f"urn:pulumi:{STACK}::{PROJECT}::{args.typ}::{args.name}"
        inputs, secret_inputs = _unwrap_secrets(dict(args.inputs))
        # A read resource (``Resource.get``) arrives with custom unset but an ID to read.
        custom = bool(args.custom or args.resource_id)
        read = bool(args.resource_id and not args.custom)
        if read:
            found = self.existing.get((args.typ, args.resource_id))
            if found is None:
                # As terraform-provider-aws reports a read of a missing resource (e.g.
                # internal/service/iam/role.go `resourceRoleRead`: "couldn't find resource").
                raise RuntimeError(
                    f"reading {args.typ} ({args.resource_id}): couldn't find resource"
                )
            inputs = {}
            resource_id, outputs = args.resource_id, dict(found)
        else:
            resource_id, outputs = self._fabricate(args.typ, args.name, dict(inputs), custom, urn)
        # Echoed secret inputs go back secret, as the engine keeps them.
        state = {
            k: rpc.wrap_rpc_secret(v) if k in secret_inputs and v == inputs.get(k) else v
            for k, v in outputs.items()
        }
        if args.resource_id:
            resource_id = args.resource_id
        with self._lock:
            self.records.append(
                Recorded(
                    type_=args.typ,
                    name=args.name,
                    inputs=inputs,
                    provider=args.provider or None,
                    providers=providers,
                    resource_id=resource_id,
                    custom=custom,
                    urn=urn,
                    parent=parent,
                    outputs=outputs,
                    secret_inputs=secret_inputs,
                    read=read,
                    transforms=list(args.transforms),
                )
            )
        return resource_id, state

    def _fabricate(
        self, typ: str, name: str, inputs: dict[str, Any], custom: bool, urn: str
    ) -> tuple[str, dict[str, Any]]:
        outputs = dict(inputs)
        if typ in _REFERENCED_CHILDREN:
            return "", self._remote_component(typ, name, outputs, urn)
        if typ.startswith("pulumi:providers:"):
            return f"{name}-{_hex('provider', name)}", outputs
        if typ.startswith("aws:"):
            return self._aws(typ, name, outputs)
        if typ.startswith("kubernetes:"):
            return self._kubernetes(typ, name, outputs, custom)
        if typ.startswith("random:"):
            return self._random(name, outputs)
        return (f"{name}-id" if custom else ""), outputs

    def _aws(self, typ: str, name: str, outputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        service = typ.split(":")[1].split("/")[0]
        # IAM puts the entity's path in its ARN (`role/<path><name>`, path `/` by default).
        if typ == "aws:iam/role:Role":
            role_name = outputs.get("name") or _autoname(name)
            outputs.update(
                name=role_name,
                arn=f"arn:aws:iam::{ACCOUNT_ID}:role{outputs.get('path') or '/'}{role_name}",
                uniqueId=f"AROA{_hex('role', name, length=16).upper()}",
            )
            return role_name, outputs
        if typ == "aws:iam/policy:Policy":
            policy_name = outputs.get("name") or _autoname(name)
            path = outputs.get("path") or "/"
            outputs.update(
                name=policy_name, arn=f"arn:aws:iam::{ACCOUNT_ID}:policy{path}{policy_name}"
            )
            return outputs["arn"], outputs
        if typ == "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
            return f"{outputs.get('role')}-{_hex('rpa', name)}", outputs
        prefix = _AWS_ID_PREFIXES.get(typ)
        resource_id = f"{prefix}-{_hex(typ, name, length=17)}" if prefix else _autoname(name)
        if typ == "aws:ec2/eip:Eip":
            outputs.update(allocationId=resource_id, publicIp="203.0.113.10")
        if typ == "aws:ec2/natGateway:NatGateway":
            outputs.update(publicIp="203.0.113.10")
        if typ == "aws:ec2/launchTemplate:LaunchTemplate":
            outputs.update(latestVersion=1, defaultVersion=1)
        if typ == "aws:eks/podIdentityAssociation:PodIdentityAssociation":
            outputs.update(associationId=f"a-{_hex(typ, name, length=17)}")
        outputs.setdefault(
            "arn", f"arn:aws:{service}:{REGION}:{ACCOUNT_ID}:{typ.split(':')[-1]}/{resource_id}"
        )
        return resource_id, outputs

    def _kubernetes(
        self, typ: str, name: str, outputs: dict[str, Any], custom: bool
    ) -> tuple[str, dict[str, Any]]:
        if not custom:  # helm.sh/v4:Chart, yaml/v2:ConfigGroup, ... : remote components
            outputs.setdefault("resources", [])
            return "", outputs
        metadata = dict(outputs.get("metadata") or {})
        # The provider auto-names an object whose metadata.name is unset.
        metadata.setdefault("name", f"{name}-{_hex('k8s', name)}")
        outputs["metadata"] = metadata
        if (
            typ == "kubernetes:core/v1:Service"
            and (outputs.get("spec") or {}).get("type") == "LoadBalancer"
        ):
            hostname = f"a{_hex('elb', name, length=31)}-1.{REGION}.elb.amazonaws.com"
            outputs["status"] = {"loadBalancer": {"ingress": [{"hostname": hostname}]}}
        namespace = metadata.get("namespace")
        object_id = f"{namespace}/{metadata['name']}" if namespace else metadata["name"]
        return object_id, outputs

    def _random(self, name: str, outputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The `result` of a RandomPassword or RandomString (the program's only random
        resources are passwords), `length` characters long."""
        length = int(outputs.get("length") or 16)
        outputs["result"] = (_hex("random", name, length=64) * (length // 64 + 1))[:length]
        return "none", outputs

    def _remote_component(
        self, typ: str, name: str, outputs: dict[str, Any], urn: str
    ) -> dict[str, Any]:
        prop, child_type, suffix = _REFERENCED_CHILDREN[typ]
        if typ == "eks:index:Cluster":
            child_id, child_state = self._eks_cluster_state(name, outputs)
            issuer = f"oidc.eks.{REGION}.amazonaws.com/id/{_hex('oidc', name, length=32).upper()}"
            kubeconfig = _kubeconfig(child_id, child_state["endpoint"])
            outputs.update(
                kubeconfig=kubeconfig,
                kubeconfigJson=json.dumps(kubeconfig),
                oidcIssuer=issuer,
                oidcProviderUrl=issuer,
                oidcProviderArn=f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{issuer}",
                clusterSecurityGroupId=f"sg-{_hex('cluster-sg', name, length=17)}",
                nodeSecurityGroupId=f"sg-{_hex('node-sg', name, length=17)}",
                defaultNodeGroupAsgName="",
                fargateProfileId="",
                fargateProfileStatus="",
                autoModeNodeRoleName="",
            )
        else:  # eks:index:ManagedNodeGroup
            child_id, child_state = self._eks_node_group_state(name, outputs)
            outputs.update(placementGroupName="")
        child_urn = self.monitor.add_synthetic(
            child_type, f"{name}{suffix}", urn, child_id, child_state
        )
        outputs[prop] = {_special_sig_key: _special_resource_sig, "urn": child_urn, "id": child_id}
        return outputs

    @staticmethod
    def _eks_cluster_state(name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        cluster_name = inputs.get("name") or _autoname(f"{name}-eksCluster")
        endpoint = (
            f"https://{_hex('endpoint', name, length=32).upper()}.gr7.{REGION}.eks.amazonaws.com"
        )
        state = {
            "name": cluster_name,
            "arn": f"arn:aws:eks:{REGION}:{ACCOUNT_ID}:cluster/{cluster_name}",
            "endpoint": endpoint,
            "version": inputs.get("version") or "1.34",
            "certificateAuthority": {"data": "TU9DSy1DQQ=="},
            "accessConfig": {"authenticationMode": inputs.get("authenticationMode") or "API"},
            "vpcConfig": {"vpcId": inputs.get("vpcId"), "subnetIds": inputs.get("subnetIds")},
        }
        return cluster_name, state

    @staticmethod
    def _eks_node_group_state(name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        group_name = inputs.get("nodeGroupName") or _autoname(name)
        state = {
            "nodeGroupName": group_name,
            "arn": f"arn:aws:eks:{REGION}:{ACCOUNT_ID}:nodegroup/{group_name}",
            "status": "ACTIVE",
            **{k: v for k, v in inputs.items() if k != "cluster"},
        }
        return group_name, state

    # -- invokes ---------------------------------------------------------------------------

    def region_of(self, provider: str | None) -> str:
        """The region an invoke's provider is configured for (the default region otherwise)."""
        if provider:
            urn = provider.rsplit("::", 1)[0]  # a provider reference is "<urn>::<id>"
            for record in self.records:
                if record.urn == urn and record.inputs.get("region"):
                    return str(record.inputs["region"])
        return REGION

    def call(self, args: MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
        with self._lock:
            self.calls.append(Invoked(args.token, dict(args.args), args.provider or None))
        region = self.region_of(args.provider or None)
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            ids = ZONE_IDS.get(region, {"a": "xx1-az1", "b": "xx1-az2"})
            return {
                "id": region,
                "names": [f"{region}{letter}" for letter in ids],
                "zoneIds": list(ids.values()),
                "groupNames": [region],
                "state": "available",
            }
        if args.token == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            (wanted,) = [f["values"] for f in args.args.get("filters", [])]
            offered = [
                zone_id
                for zone_id in ZONE_IDS.get(region, {}).values()
                if zone_id not in self.zones_without_offerings
            ]
            return {
                "id": region,
                "instanceTypes": [wanted[0]] * len(offered),
                "locations": offered,
                "locationTypes": [args.args.get("locationType")] * len(offered),
            }
        if args.token == "aws:ec2/getRouteTables:getRouteTables":
            ((name, (value,)),) = [(f["name"], f["values"]) for f in args.args["filters"]]
            by_subnet = name == "association.subnet-id"
            ids = [
                table_id
                for table_id, table in self.route_tables.items()
                if table["vpcId"] == args.args["vpcId"]
                and (value in table["subnets"] if by_subnet else table["main"] == (value == "true"))
            ]
            return {"id": region, "ids": ids, "vpcId": args.args["vpcId"]}
        if args.token == "aws:ec2/getInstances:getInstances":
            given = {f["name"]: f["values"] for f in args.args["filters"]}
            ids = [
                i
                for i, node in self.instances.items()
                if [node["subnetId"]] == given["subnet-id"]
                and [node.get("instanceType", "m7g.2xlarge")] == given["instance-type"]
                and node["state"] in args.args["instanceStateNames"]
                and args.args["instanceTags"].items() <= node["tags"].items()
            ]
            return {"id": region, "ids": ids}
        if args.token == "aws:ec2/getNetworkInterfaces:getNetworkInterfaces":
            (nodes,) = [f["values"] for f in args.args["filters"] if f["name"].startswith("attach")]
            return {
                "id": region,
                "ids": [e for i in nodes for e in self.instances[i]["interfaces"]],
            }
        if args.token == "aws:ec2/getNetworkInterface:getNetworkInterface":
            eni = args.args["id"]
            ips = [n["interfaces"][eni] for n in self.instances.values() if eni in n["interfaces"]]
            if not ips or ips[0] is None:  # deleted since it was listed: the provider's words
                return {}, [("", "no matching EC2 Network Interface found")]
            return {"id": eni, "privateIps": ips[0]}
        found = self._described(args.token, dict(args.args))
        if found is not None:
            return found
        result = _INVOKES.get(args.token)
        if result is None:
            raise NotImplementedError(
                f"RecordingMocks.call has no answer for invoke {args.token!r} "
                f"(args {dict(args.args)!r}); add a plausible result to _INVOKES in "
                "tests/fakes/pulumi_mocks.py"
            )
        return result(dict(args.args))

    def _described(self, token: str, args: dict[str, Any]) -> Any:
        """The answer of a data source that describes what exists (a cluster, a subnet, an
        add-on, a role), a failure naming the missing object, or None for other invokes."""
        role = ("aws:iam/role:Role", str(args.get("name")))
        lookups = {
            "aws:eks/getCluster:getCluster": lambda: self.clusters.get(args["name"]),
            "aws:ec2/getSubnet:getSubnet": lambda: self.subnets.get(args["id"]),
            "aws:ec2/getRouteTable:getRouteTable": lambda: {
                "id": args["routeTableId"],
                "ownerId": self.route_tables[args["routeTableId"]].get("ownerId", ACCOUNT_ID),
                "routes": self.route_tables[args["routeTableId"]]["routes"],
            },
            "aws:ec2/getNatGateway:getNatGateway": lambda: self.nat_gateways.get(
                args["id"], "no matching EC2 NAT Gateway found"
            ),
            "aws:eks/getAddon:getAddon": lambda: self.addons.get(
                (args["clusterName"], args["addonName"])
            ),
            "aws:iam/getRole:getRole": lambda: (
                {**self.existing[role], "id": role[1]} if role in self.existing else None
            ),
        }
        if token not in lookups:
            return None
        found = lookups[token]()
        if isinstance(found, str):
            return {}, [("", found)]  # a failure the test put in place of the object
        if found is None:
            # terraform-provider-aws's data sources on a missing object (internal/tfresource).
            return {}, [("", f"reading {token} ({args}): couldn't find resource")]
        return found


def _kubeconfig(cluster_name: str, endpoint: str) -> dict[str, Any]:
    """The shape pulumi-eks generates: exec auth through ``aws eks get-token``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kubernetes",
                "cluster": {"server": endpoint, "certificate-authority-data": "TU9DSy1DQQ=="},
            }
        ],
        "contexts": [{"name": "aws", "context": {"cluster": "kubernetes", "user": "aws"}}],
        "current-context": "aws",
        "users": [
            {
                "name": "aws",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": f"--region {REGION} eks get-token --cluster-name {cluster_name} "
                        "--output json".split(),
                    }
                },
            }
        ],
    }


_INVOKES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "aws:index/getCallerIdentity:getCallerIdentity": lambda _: {
        "id": ACCOUNT_ID,
        "accountId": ACCOUNT_ID,
        "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/test",
        "userId": "AIDAMOCKUSER",
    },
    "aws:index/getPartition:getPartition": lambda _: {
        "id": "aws",
        "partition": "aws",
        "dnsSuffix": "amazonaws.com",
        "reverseDnsPrefix": "com.amazonaws",
    },
}


# -- running code under the mocks ------------------------------------------------------------


def run(fn: Callable[[], T]) -> T:
    """Call ``fn`` inside the Pulumi runtime and wait until everything it started has settled.

    Re-raises the first error from ``fn``, a registration, an invoke or an ``apply``.
    """
    box: dict[str, T] = {}

    @pulumi.runtime.test
    def _body() -> None:
        box["value"] = fn()

    _body()
    return box["value"]


def resolve(value: pulumi.Input[T]) -> T | None:
    """The value of a settled Output (or a plain value); None if unknown."""
    return _sync_await(pulumi.Output.from_input(value).future())


def is_secret(value: pulumi.Input[Any]) -> bool:
    """Whether a settled Output is marked secret."""
    return _sync_await(pulumi.Output.from_input(value).is_secret())
