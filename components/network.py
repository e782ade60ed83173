"""The VPC the cluster lives in: two zones for the control plane, one zone for the nodes.

EKS wants control-plane subnets in two availability zones, but the model's pipeline ranks talk to
each other on every token, so the nodes sit in one zone (no cross-zone hops, no cross-zone data
charges). The layout is four equal subnets carved from the VPC CIDR:

    public  x {node zone, second zone}   internet-facing load balancers (and the NAT gateway)
    private x {node zone, second zone}   control-plane ENIs, internal load balancers, and the
                                         nodes when ``node_subnets == "private"``

With private nodes, one NAT gateway in the node zone gives them egress (image and model
downloads). With public nodes there is no NAT gateway at all: the nodes get public IPs instead,
which is cheaper for a short-lived test stack.
"""

from __future__ import annotations

import ipaddress
import itertools
from dataclasses import dataclass
from typing import Literal

import pulumi
import pulumi_aws as aws

SUBNET_PREFIX = 20
"""Every subnet is a /20 (4,096 addresses): the VPC CNI gives each pod a VPC address."""

_LARGEST_VPC_PREFIX = SUBNET_PREFIX - 2  # four /20s need at least a /18
_SMALLEST_VPC_PREFIX = 16  # the largest VPC AWS allows
_RFC1918 = tuple(
    ipaddress.IPv4Network(block) for block in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)


def split_cidr(cidr_block: str) -> tuple[str, str, str, str]:
    """The first four /20 subnets of ``cidr_block``: public in the node zone, public in the
    second zone, private in the node zone, private in the second zone (the module's layout);
    raise ValueError naming the fix."""
    try:
        network = ipaddress.ip_network(cidr_block, strict=True)
    except ValueError as exc:
        raise ValueError(
            f"`cidr_block` {cidr_block!r} is not a valid IPv4 network ({exc}); "
            'write it as a network address with a prefix, e.g. "10.42.0.0/16"'
        ) from None
    if not isinstance(network, ipaddress.IPv4Network):
        raise ValueError(
            f"`cidr_block` {cidr_block} is IPv6, but the VPC needs an IPv4 primary CIDR; "
            'use a private IPv4 range, e.g. "10.42.0.0/16"'
        )
    if not any(network.subnet_of(block) for block in _RFC1918):
        raise ValueError(
            f"`cidr_block` {cidr_block} is not a private (RFC 1918) range; "
            'use one inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16, e.g. "10.42.0.0/16"'
        )
    if network.prefixlen < _SMALLEST_VPC_PREFIX:
        raise ValueError(
            f"`cidr_block` {cidr_block} is too large: AWS allows VPC prefixes from "
            f"/{_SMALLEST_VPC_PREFIX} to /28; use a /{_SMALLEST_VPC_PREFIX} inside it, e.g. "
            f'"{next(network.subnets(new_prefix=_SMALLEST_VPC_PREFIX))}"'
        )
    if network.prefixlen > _LARGEST_VPC_PREFIX:
        suggestion = network.supernet(new_prefix=_SMALLEST_VPC_PREFIX)
        raise ValueError(
            f"`cidr_block` {cidr_block} is too small: the network needs four "
            f"/{SUBNET_PREFIX} subnets (public and private in two zones), so its prefix must be "
            f'/{_LARGEST_VPC_PREFIX} or shorter; use e.g. "{suggestion}"'
        )
    first_four = itertools.islice(network.subnets(new_prefix=SUBNET_PREFIX), 4)
    public_node, public_second, private_node, private_second = (str(s) for s in first_four)
    return public_node, public_second, private_node, private_second


@dataclass(frozen=True)
class NetworkArgs:
    """What the network needs to know; validated when constructed."""

    cidr_block: str
    """The VPC's IPv4 CIDR, e.g. "10.42.0.0/16"; /18 or larger, private (RFC 1918)."""
    node_zone: str
    """The one availability zone the nodes (and the NAT gateway) live in, e.g. "us-west-2a"."""
    second_zone: str
    """A second zone for control-plane ENIs and load balancers only (EKS needs two zones)."""
    node_subnets: Literal["private", "public"]
    """Where nodes live: "private" (egress through one NAT gateway) or "public" (public IPs)."""

    def __post_init__(self) -> None:
        split_cidr(self.cidr_block)
        if self.node_zone == self.second_zone:
            raise ValueError(
                f"`node_zone` and `second_zone` are both {self.node_zone}, but EKS needs "
                "control-plane subnets in two availability zones; choose a different `second_zone`"
            )
        if self.node_subnets not in ("private", "public"):
            raise ValueError(f'`node_subnets` is {self.node_subnets!r}; use "private" or "public"')


class Network(pulumi.ComponentResource):
    """A VPC with public and private subnets in two zones and egress for the node zone.

    Owns the VPC, the internet gateway, the four subnets, the route tables and their
    associations, and (for private nodes only) one Elastic IP and NAT gateway in the node zone.
    """

    vpc_id: pulumi.Output[str]
    """The VPC's ID."""
    public_subnet_ids: pulumi.Output[list[str]]
    """Public subnets in both zones, tagged ``kubernetes.io/role/elb=1`` for public LBs."""
    control_plane_subnet_ids: pulumi.Output[list[str]]
    """The private subnets in both zones, for the EKS control plane's ENIs."""
    node_subnet_id: pulumi.Output[str]
    """The single subnet the node group uses: private or public per ``node_subnets``."""

    def __init__(
        self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:network:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        public_nodes = args.node_subnets == "public"

        vpc, igw = self._vpc(name, args, child)
        public_node, public_second, private_node, private_second = self._subnets(
            name, args, vpc, public_nodes, child
        )
        public_rt, private_rt = self._route_tables(name, vpc, igw, public_node, public_nodes)
        for sn, rt, tier, zone in (
            (public_node, public_rt, "public", args.node_zone),
            (public_second, public_rt, "public", args.second_zone),
            (private_node, private_rt, "private", args.node_zone),
            (private_second, private_rt, "private", args.second_zone),
        ):
            aws.ec2.RouteTableAssociation(
                f"{name}-{tier}-{zone}-rta", subnet_id=sn.id, route_table_id=rt.id, opts=child
            )

        self.vpc_id = vpc.id
        self.public_subnet_ids = pulumi.Output.all(public_node.id, public_second.id)
        self.control_plane_subnet_ids = pulumi.Output.all(private_node.id, private_second.id)
        self.node_subnet_id = public_node.id if public_nodes else private_node.id
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "publicSubnetIds": self.public_subnet_ids,
                "controlPlaneSubnetIds": self.control_plane_subnet_ids,
                "nodeSubnetId": self.node_subnet_id,
            }
        )

    @staticmethod
    def _vpc(
        name: str, args: NetworkArgs, child: pulumi.ResourceOptions
    ) -> tuple[aws.ec2.Vpc, aws.ec2.InternetGateway]:
        """The VPC and its internet gateway."""
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.cidr_block,
            # Both are needed for the EKS private endpoint and for nodes to register by DNS name.
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=_tags(name, "vpc"),
            opts=child,
        )
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags=_tags(name, "igw"), opts=child
        )
        return vpc, igw

    @staticmethod
    def _subnets(
        name: str,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        public_nodes: bool,
        child: pulumi.ResourceOptions,
    ) -> tuple[aws.ec2.Subnet, aws.ec2.Subnet, aws.ec2.Subnet, aws.ec2.Subnet]:
        """Public and private subnets in the node zone and the second zone, in that order."""
        public_node, public_second, private_node, private_second = split_cidr(args.cidr_block)

        def subnet(tier: str, zone: str, cidr: str, role_tag: str) -> aws.ec2.Subnet:
            return aws.ec2.Subnet(
                f"{name}-{tier}-{zone}",
                vpc_id=vpc.id,
                availability_zone=zone,
                cidr_block=cidr,
                # Managed node groups in a public subnet need public IPs on launch; nothing else
                # launches instances here, so the flag is set only when nodes are public.
                map_public_ip_on_launch=public_nodes if tier == "public" else False,
                tags=_tags(name, f"{tier}-{zone}", **{role_tag: "1"}),
                opts=child,
            )

        elb, internal_elb = "kubernetes.io/role/elb", "kubernetes.io/role/internal-elb"
        return (
            subnet("public", args.node_zone, public_node, elb),
            subnet("public", args.second_zone, public_second, elb),
            subnet("private", args.node_zone, private_node, internal_elb),
            subnet("private", args.second_zone, private_second, internal_elb),
        )

    def _route_tables(
        self,
        name: str,
        vpc: aws.ec2.Vpc,
        igw: aws.ec2.InternetGateway,
        public_node: aws.ec2.Subnet,
        public_nodes: bool,
    ) -> tuple[aws.ec2.RouteTable, aws.ec2.RouteTable]:
        """The public and private route tables, and the NAT gateway when nodes are private."""
        child = pulumi.ResourceOptions(parent=self)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags=_tags(name, "public-rt"),
            opts=child,
        )

        private_routes: list[aws.ec2.RouteTableRouteArgs] = []
        if not public_nodes:
            eip = aws.ec2.Eip(
                f"{name}-nat-eip", domain="vpc", tags=_tags(name, "nat-eip"), opts=child
            )
            nat = aws.ec2.NatGateway(
                f"{name}-nat",
                allocation_id=eip.id,
                subnet_id=public_node.id,
                tags=_tags(name, "nat"),
                # A NAT gateway only works once its VPC has an internet gateway; no data flows
                # between the two, so the ordering is explicit.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
            )
            private_routes.append(
                aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)
            )
        # With public nodes the private subnets only hold control-plane ENIs and internal load
        # balancers, which need no egress: their table keeps just the local route.
        private_rt = aws.ec2.RouteTable(
            f"{name}-private-rt",
            vpc_id=vpc.id,
            routes=private_routes,
            tags=_tags(name, "private-rt"),
            opts=child,
        )
        return public_rt, private_rt


def _tags(name: str, suffix: str, **extra: str) -> dict[str, str]:
    return {"Name": f"{name}-{suffix}", **extra}
