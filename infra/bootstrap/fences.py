"""The fences of a deploy role's EC2 and EKS writes: its stack's own cluster by name, its
stack's own launch template by tag, and GuardDuty's VPC endpoint by its tag and the stack's
subnets.

Pure data and functions (no Pulumi import), for `infra.bootstrap.access.deploy_policy`.
"""

from __future__ import annotations

from typing import Any

from components.manifests.identity import cluster_name
from infra.adapters.wiring import NAMESPACE, SERVER_NAME
from infra.plan.config_parts import PROJECT

#: The EKS actions not authorised on one cluster's resources: the reads (`Describe*`, `List*`,
#: some of which list every cluster) and CreateCluster, whose table row names no resource type
#: (Service Authorization Reference, Amazon EKS, as shipped in parliament 1.6.4's
#: iam_definition.json; tests/bootstrap/test_access.py holds the split to that table). Every
#: other EKS action is authorised on the cluster, or on a node group, add-on, access entry or
#: Pod Identity association of it, whose ARNs name the cluster
#: (`arn:aws:eks:<region>:<account>:nodegroup/<cluster>/...`): fenced by the cluster's name, so
#: a deploy role changes no other cluster of its region.
EKS_OF_ANY_CLUSTER = frozenset({"eks:CreateCluster"})
#: The resource types of an EKS cluster's own ARNs, as the table names them.
CLUSTER_RESOURCE_TYPES = ("cluster", "nodegroup", "addon", "podidentityassociation", "access-entry")


def on_a_cluster(action: str) -> bool:
    service, name = action.split(":")
    return (
        service == "eks"
        and action not in EKS_OF_ANY_CLUSTER
        and not name.startswith(("Describe", "List"))
    )


def cluster_arns(stack: str, region: str, existing: str | None = None) -> list[str]:
    """The ARNs of `stack`'s cluster (`existing`, its `existingCluster`, if set) and of
    everything in it."""
    name = cluster_name(stack, existing)
    return [f"arn:aws:eks:{region}:*:cluster/{name}"] + [
        f"arn:aws:eks:{region}:*:{kind}/{name}/*" for kind in CLUSTER_RESOURCE_TYPES[1:]
    ]


#: The writes on an existing launch template. A new version of a template that a node group
#: launches from runs its user data on the next instance, as that template's instance profile;
#: with ec2:ModifyLaunchTemplate (a new default version) any Auto Scaling group that launches
#: the default would, which cloudsplaining 0.9.1 names `ModifyExistingEC2LaunchTemplate`
#: (shared/constants.py `PRIVILEGE_ESCALATION_METHODS`: "ec2:createlaunchtemplateversion",
#: "ec2:modifylaunchtemplate"). ModifyLaunchTemplate is not granted: the program never changes
#: a default version (`infra.bootstrap.permissions`). Granted only on templates tagged with the
#: stack's name.
LAUNCH_TEMPLATE_WRITES = frozenset(
    {
        "ec2:CreateLaunchTemplateVersion",
        "ec2:DeleteLaunchTemplate",
        "ec2:DeleteLaunchTemplateVersions",
    }
)
#: The write on the model Service's NLB target groups (`components.balancer`). Granted only on
#: target groups the cloud controller made for the stack's Service in the stack's cluster, by the
#: tags it puts on every one it creates: `kubernetes.io/service-name` = namespace/name and
#: `kubernetes.io/cluster/<cluster>` = owned (cloud-provider-aws v1.35.2 aws_loadbalancer.go
#: `ensureLoadBalancerv2` and `ensureTargetGroup`, tags.go `buildTags`); it tags a target group
#: only when it creates it, and these two in every release, whatever the Service's own tags
#: annotation said then. ModifyTargetGroupAttributes takes `aws:ResourceTag/${TagKey}` on
#: `targetgroup` (Service Authorization Reference, Elastic Load Balancing V2, as shipped in
#: parliament 1.6.4's iam_definition.json).
TARGET_GROUP_WRITES = frozenset({"elasticloadbalancing:ModifyTargetGroupAttributes"})
#: The tags the program puts on everything it creates (`infra.adapters.wiring.stack_tags`, the
#: AWS provider's default tags, which the program's own keys override): the project's name and
#: the stack's. The program's launch template carries both from its creation
#: (terraform-provider-aws internal/service/ec2/ec2_launch_template.go
#: `resourceLaunchTemplateCreate` sends the resource's tags, default tags included, as the
#: `launch-template` TagSpecification of CreateLaunchTemplate). `stack=prod` alone is no fence:
#: it is a common default tag, which another team's templates in the account may carry too; the
#: pair is this project's.
STACK_TAG_KEY = "stack"
PROJECT_TAG_KEY = "project"


def target_group_statement(
    stack: str, region: str, actions: list[str], existing: str | None = None
) -> dict[str, Any]:
    """`actions` on the target groups the cloud controller made for the model Service in
    `stack`'s cluster, by the tags it gives them (`TARGET_GROUP_WRITES`)."""
    tags = {
        "kubernetes.io/service-name": f"{NAMESPACE}/{SERVER_NAME}",
        f"kubernetes.io/cluster/{cluster_name(stack, existing)}": "owned",
    }
    return {
        "Sid": "ChangeOnlyTheStackTargetGroups",
        "Effect": "Allow",
        "Action": actions,
        "Resource": [f"arn:aws:elasticloadbalancing:{region}:*:targetgroup/*/*"],
        "Condition": {"StringEquals": {f"aws:ResourceTag/{k}": v for k, v in tags.items()}},
    }


def launch_template_tags(stack: str) -> dict[str, str]:
    """The tags that make a launch template `stack`'s: the fence of its writes."""
    return {PROJECT_TAG_KEY: PROJECT, STACK_TAG_KEY: stack}


#: What a launch from a template authorises besides the template itself: the EC2 resource types
#: of RunInstances in the Service Authorization Reference (Amazon EC2, as shipped in parliament
#: 1.6.4's iam_definition.json; tests/bootstrap/test_escalation.py checks the list against it),
#: each of which carries the condition key `ec2:LaunchTemplate`. Images and snapshots have no
#: account in their ARNs, which `*` matches.
LAUNCHED_RESOURCE_TYPES = (
    "capacity-reservation",
    "elastic-gpu",
    "image",
    "instance",
    "key-pair",
    "network-interface",
    "placement-group",
    "security-group",
    "snapshot",
    "subnet",
    "volume",
)


def launch_statements(stack: str, region: str, launches: list[str]) -> list[dict[str, Any]]:
    """ec2:RunInstances only from the stack's own launch template. EKS requires it of whoever
    calls CreateNodegroup with a template (`infra.bootstrap.permissions`): its check launches
    (a dry run) from the node group's template as the caller. Every resource of the launch is
    allowed only with a template named (`ec2:LaunchTemplate`), so no launch is allowed without
    one, and a template that is not the stack's (both fence tags, as
    `ChangeOnlyTheStackLaunchTemplates`) is denied, so none from another's. One allow for every
    resource type a launch needs: parliament reads each statement's resources against the
    action's required types (RESOURCE_MISMATCH). With no role it may pass to EC2
    (`PASSED_TO`), the role of no instance is the caller's to choose; the program's template
    names none (a managed node group's may not: EKS User Guide, launch-templates.html, "IAM
    instance profile: prohibited", read 2026-12-03)."""
    if not launches:
        return []
    template = f"arn:aws:ec2:{region}:*:launch-template/*"
    return [
        {
            "Sid": "LaunchFromATemplateOnly",
            "Effect": "Allow",
            "Action": launches,
            "Resource": [template]
            + [f"arn:aws:ec2:{region}:*:{kind}/*" for kind in LAUNCHED_RESOURCE_TYPES],
            "Condition": {"ArnLike": {"ec2:LaunchTemplate": template}},
        },
        # One deny per fence tag: a template is the stack's only with both (as the tag fence of
        # `launch_template_fence`); a negated operator holds when the tag is absent.
        *[
            {
                "Sid": f"NeverLaunchFromATemplateNotTheStacks{key.capitalize()}",
                "Effect": "Deny",
                "Action": launches,
                "Resource": ["arn:aws:ec2:*:*:launch-template/*"],
                "Condition": {"StringNotEquals": {f"aws:ResourceTag/{key}": value}},
            }
            for key, value in launch_template_tags(stack).items()
        ],
    ]


def launch_template_fence(stack: str) -> list[dict[str, Any]]:
    """The denies that keep the launch-template tag fence (`ChangeOnlyTheStackLaunchTemplates`)
    from being walked around: no template tagged as the stack's after its creation, and none of
    the stack's own untagged."""
    return [
        # Without it the tag fence is one CreateTags away: tag another template as the
        # stack's, then write it. Tags at creation (`ec2:CreateAction` set, EC2 User Guide,
        # "Grant permission to tag Amazon EC2 resources during creation", read 2026-12-03) and
        # on a template that is already the stack's stay allowed. A negated operator holds when
        # the key is absent, as on an untagged template (IAM User Guide, "Condition operators",
        # negated matching, read 2026-12-03). One statement per fence tag: a template is the
        # stack's only with both, and the keys of one statement's condition are ANDed, so a
        # single statement would deny only a template lacking both.
        *[
            {
                "Sid": f"NeverTagAnotherLaunchTemplateAsTheStacks{key.capitalize()}",
                "Effect": "Deny",
                "Action": ["ec2:CreateTags", "ec2:DeleteTags"],
                "Resource": ["arn:aws:ec2:*:*:launch-template/*"],
                "Condition": {
                    "StringNotEquals": {f"aws:ResourceTag/{key}": value},
                    "Null": {"ec2:CreateAction": "true"},
                },
            }
            for key, value in launch_template_tags(stack).items()
        ],
        {
            # Without it the role could strip a fence tag off its own template and lock itself
            # out of it: the fence would then never let it tag the template back.
            "Sid": "NeverUntagTheStacksLaunchTemplate",
            "Effect": "Deny",
            "Action": ["ec2:DeleteTags"],
            "Resource": ["arn:aws:ec2:*:*:launch-template/*"],
            "Condition": {
                "ForAnyValue:StringEquals": {"aws:TagKeys": list(launch_template_tags(stack))}
            },
        },
    ]


#: GuardDuty EKS Runtime Monitoring adds an interface endpoint (`com.amazonaws.<region>.
#: guardduty-data`) to the VPC, in the nodes' subnets, tagged `GuardDutyManaged=true`. Deleting a
#: subnet it sits in fails with DependencyViolation until the subnet is taken off the endpoint:
#: terraform-provider-aws's subnet delete then calls ec2:DescribeVpcs, ec2:DescribeVpcEndpoints
#: (filters `vpc-id`, service name `*guardduty-data*`, tag `GuardDutyManaged=true`) and
#: ec2:ModifyVpcEndpoint with `RemoveSubnetIds` alone (internal/service/ec2/vpc_subnet.go
#: `dissociateGuardDutyVPCEndpoints`, at 00cda125). It never deletes the endpoint, so nothing
#: here grants ec2:DeleteVpcEndpoints; docs/failures.md says what a destroy leaves.
GUARDDUTY_ENDPOINT_WRITES = frozenset({"ec2:ModifyVpcEndpoint"})
GUARDDUTY_TAG = ("GuardDutyManaged", "true")
#: ModifyVpcEndpoint's request parameters other than `RemoveSubnetIds` (EC2 API Reference,
#: ModifyVpcEndpoint, read 2026-12-06): what the provider never sends.
GUARDDUTY_ENDPOINT_UNSENT = (
    "PolicyDocument",
    "ResetPolicy",
    "PrivateDnsEnabled",
    "DnsOptions",
    "IpAddressType",
    "SubnetConfigurations",
    "AddSubnetIds",
    "AddSecurityGroupIds",
    "RemoveSecurityGroupIds",
    "AddRouteTableIds",
    "RemoveRouteTableIds",
)


def guardduty_endpoint_statements(stack: str, region: str, actions: list[str]) -> list[dict]:
    """GuardDuty's endpoints, and nothing else's, may be taken off the stack's subnets. Condition
    keys from the Service Authorization Reference (Amazon EC2, as shipped in parliament 1.6.4's
    iam_definition.json; tests/bootstrap/test_escalation.py reads it).

    IAM authorises each resource a ModifyVpcEndpoint names: the `vpc-endpoint`, and each
    `subnet`, `security-group` and `route-table` in the request. The endpoint has no `ec2:Vpc`
    key, so it is GuardDuty's by its tag (`aws:ResourceTag/GuardDutyManaged`). Subnets are
    allowed only if they are the stack's own (project and stack tags, the launch template's
    fence pair, `launch_template_tags`: the VPC id is unknown at bootstrap); no security group or
    route table is allowed.

    What IAM cannot fence by resource: a request that names no subnet, security group or route
    table (a new endpoint policy, private DNS off) authorises the endpoint alone, and so any
    GuardDuty-tagged endpoint in the region. The deny below refuses a request that sets any
    parameter but `RemoveSubnetIds`, by the `ec2:Attribute` key the table lists for the action;
    AWS documents that key's values for other EC2 actions (ModifyImageAttribute,
    ModifyInstanceAttribute), not for this one, so whether it holds is unproven and the residual
    is recorded in tests/bootstrap/iam-scanners-accepted.txt. It cannot refuse the provider's
    own call, which sets `RemoveSubnetIds` only."""
    if "ec2:ModifyVpcEndpoint" not in actions:
        return []
    endpoint = f"arn:aws:ec2:{region}:*:vpc-endpoint/*"
    tagged = {f"aws:ResourceTag/{GUARDDUTY_TAG[0]}": GUARDDUTY_TAG[1]}
    return [
        {
            "Sid": "TakeTheStacksSubnetsOffGuardDutysEndpoint",
            "Effect": "Allow",
            "Action": ["ec2:ModifyVpcEndpoint"],
            "Resource": [endpoint],
            "Condition": {"StringEquals": tagged},
        },
        {
            "Sid": "OnlyTheStacksSubnetsComeOffAnEndpoint",
            "Effect": "Allow",
            "Action": ["ec2:ModifyVpcEndpoint"],
            # The endpoint is listed too, as parliament requires of a statement of the action
            # (RESOURCE_MISMATCH): it matches only an endpoint with the stack's tags, which the
            # stack makes none of; GuardDuty's is the statement above's.
            "Resource": [endpoint, f"arn:aws:ec2:{region}:*:subnet/*"],
            "Condition": {
                "StringEquals": {
                    f"aws:ResourceTag/{key}": value
                    for key, value in launch_template_tags(stack).items()
                }
            },
        },
        {
            "Sid": "NothingButRemoveSubnetIdsOnAnEndpoint",
            "Effect": "Deny",
            "Action": ["ec2:ModifyVpcEndpoint"],
            "Resource": ["arn:aws:ec2:*:*:vpc-endpoint/*"],
            "Condition": {
                "ForAnyValue:StringEqualsIgnoreCase": {
                    "ec2:Attribute": list(GUARDDUTY_ENDPOINT_UNSENT)
                }
            },
        },
    ]
