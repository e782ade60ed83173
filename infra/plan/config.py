"""The stack configuration model: one validated, frozen view of a stack's `gemma-graviton:` keys.

Both readers go through `load_config`: the Pulumi program hands it the raw values from
`pulumi.Config`, the offline CLI hands it the values from `stacks/Pulumi.<stack>.yaml`. Whatever the
source, a bad value ends in one `ConfigError` line that names the key, the rule and the fix.

Secrets (`hfToken`, `apiKey`) are not part of the model: they must be set with
`pulumi config set --secret`, and `secret_keys_in_plain_text` lets both readers refuse a plain one.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)
from pydantic.alias_generators import to_camel

from components.manifests import images
from infra.plan import catalog
from infra.plan.config_checks import StackChecks
from infra.plan.config_parts import (
    _IAM_FIX,
    PRIVATE_RANGES,
    Auto,
    ConfigError,  # noqa: F401 (every refusal is one, imported from here)
    ModelProfileConfig,
    PositiveInt,
    ScheduleConfig,
    _fix,
)
from infra.plan.gatekeeper_keys import GatekeeperKeys


class CoreKeys(BaseModel):
    """The keys of every stack, whatever its layers; `StackConfig` adds the gatekeeper's."""

    region: Annotated[
        str,
        Field(
            description="AWS region of the cluster.",
            pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$",
            json_schema_extra=_fix("use a region name such as us-west-2"),
        ),
    ] = "us-west-2"
    availability_zone: Annotated[
        str,
        Field(
            description="The one AZ of the nodes: pipeline traffic and EBS volumes stay in it. "
            "A zone name (us-west-2a) or a zone ID (usw2-az1); names map to different physical "
            "zones in each account, IDs do not. Checked at preview against the account's zones.",
            json_schema_extra=_fix("use a zone of `region`, such as us-west-2a or usw2-az1"),
        ),
    ] = "us-west-2a"
    control_plane_zone: Annotated[
        str | Auto,
        Field(
            description="Second AZ for the EKS control plane's subnets (EKS needs two); "
            "no node runs there. A zone name or ID; `auto` picks, at preview, the first other "
            "zone of the region that EKS accepts.",
            json_schema_extra=_fix("use another zone of `region` (name or ID), or auto"),
        ),
    ] = "auto"
    kubernetes_version: Annotated[
        str,
        Field(
            description="EKS Kubernetes version, pinned; its support dates are in "
            "`infra/plan/instances.toml`.",
            pattern=r"^1\.\d{2}$",
            json_schema_extra=_fix(
                f"use a pinned minor version such as {catalog.DEFAULT_KUBERNETES_VERSION}"
            ),
        ),
    ] = catalog.DEFAULT_KUBERNETES_VERSION
    vpc_cidr: Annotated[
        ipaddress.IPv4Network,
        Field(
            description="VPC address range, a /16 to /18; four /20 subnets are cut from it.",
            json_schema_extra=_fix("use a private range of /16 to /18, such as 10.42.0.0/16"),
        ),
    ] = ipaddress.IPv4Network("10.42.0.0/16")
    node_subnets: Annotated[
        Literal["private", "public"],
        Field(
            description="Nodes behind one NAT gateway (private) or with public IPs and no NAT "
            "charges (public).",
            json_schema_extra=_fix("use private or public"),
        ),
    ] = "private"
    instance_type: Annotated[
        str,
        Field(
            description="Graviton instance type of the model nodes: m, c or r of Graviton3 and "
            "Graviton4, large to 8xlarge; `--compare` ranks them.",
            json_schema_extra=_fix("choose a Graviton type from the catalogue"),
        ),
    ] = "m7g.2xlarge"
    model: Annotated[
        str,
        Field(
            description="Hugging Face repository served by vLLM: a catalogue model "
            "(google/gemma-4-12B-it, or the mixture of experts google/gemma-4-26B-A4B-it, whose "
            "speed derives from a measured ratio: docs/weights.md), or another one whose layout "
            "`modelProfile` gives.",
            json_schema_extra=_fix("choose a catalogue model or describe it in `modelProfile`"),
        ),
    ] = "google/gemma-4-12B-it"
    model_profile: Annotated[
        ModelProfileConfig | None,
        Field(
            description="The model's layout, for a model that is not in the catalogue.",
            json_schema_extra=_fix("give every field of the profile (see docs/planning.md)"),
        ),
    ] = None
    pipeline_stages: Annotated[
        Annotated[int, Field(ge=1, le=8)] | Auto,
        Field(
            description="Pods per group, one pipeline rank per node; auto = fewest that fit and "
            "serve the context.",
            json_schema_extra=_fix("use auto or an integer from 1 to 8"),
        ),
    ] = "auto"
    replicas: Annotated[
        int,
        Field(
            ge=1,
            le=16,
            description="Independent vLLM groups behind the load balancer, always running (a "
            "fixed stack); not with `minGroups` and `maxGroups`.",
            json_schema_extra=_fix("use an integer from 1 to 16"),
        ),
    ] = 1
    min_groups: Annotated[
        int | None,
        Field(
            ge=0,
            le=16,
            description="Fewest groups (0: none, the model sleeps, while nothing asks for it); "
            "with `maxGroups` it makes the stack elastic: KEDA follows the queue between the "
            "two, the Cluster Autoscaler the nodes "
            "(docs/scaling-and-changes.md#groups-that-follow-the-queue-and-the-clock). Not "
            "with `replicas`.",
            json_schema_extra=_fix("use an integer from 0 to 16, such as 0"),
        ),
    ] = None
    max_groups: Annotated[
        int | None,
        Field(
            ge=1,
            le=16,
            description="Most groups the queue may ask for; their nodes must fit one zone's "
            "offer and `vcpuQuota`.",
            json_schema_extra=_fix("use an integer from 1 to 16, such as 3"),
        ),
    ] = None
    schedule: Annotated[
        ScheduleConfig | None,
        Field(
            description="Office hours: `timeZone`, `days`, `start`, `end`, `groupsInside` and "
            "`groupsOutside` (the groups held inside and outside the window), below; with "
            "`minGroups` and `maxGroups`.",
            json_schema_extra=_fix(
                "give timeZone, days, start and end, such as Europe/Berlin, Mon-Fri, "
                '"08:00" and "19:00"'
            ),
        ),
    ] = None
    queue_per_group: Annotated[
        PositiveInt | Auto,
        Field(
            description="Waiting requests per running group that ask for another group; auto "
            "= the full-length requests one group's KV cache holds at once.",
            json_schema_extra=_fix("use auto or a positive number of requests such as 4"),
        ),
    ] = "auto"
    max_model_len: Annotated[
        PositiveInt | Auto,
        Field(
            description="Longest request (prompt + reply) in tokens; auto = longest that fits, up "
            "to `maxContextCap`.",
            json_schema_extra=_fix("use auto or a positive number of tokens such as 4096"),
        ),
    ] = "auto"
    max_context_cap: Annotated[
        int,
        Field(
            ge=256,
            description="Upper bound for `maxModelLen: auto`: prefill on CPU is slow, so a "
            "longer context than this is rarely useful.",
            json_schema_extra=_fix("use a number of tokens of at least 256, such as 8192"),
        ),
    ] = 8192
    kv_cache_bytes: Annotated[
        PositiveInt | Auto,
        Field(
            description="vLLM's --kv-cache-memory-bytes per rank; auto = largest safe budget, 90% "
            "of what vLLM's memory guard sees.",
            json_schema_extra=_fix("use auto or a positive number of bytes such as 400000000"),
        ),
    ] = "auto"
    max_num_batched_tokens: Annotated[
        Annotated[int, Field(ge=256)] | Auto,
        Field(
            description="vLLM's --max-num-batched-tokens; auto = the value that serves the "
            "longest context.",
            json_schema_extra=_fix("use auto or a number of tokens of at least 256"),
        ),
    ] = "auto"
    pod_memory_gib: Annotated[
        Annotated[float, Field(gt=0)] | Auto,
        Field(
            alias="podMemoryGiB",
            description="Memory request and limit of each model pod; auto = what the node "
            "can give after its other tenants, in sixteenths of a GiB.",
            json_schema_extra=_fix("use auto or a positive number of GiB such as 25"),
        ),
    ] = "auto"
    weight_prefetch: Annotated[
        bool,
        Field(
            description="Download and read the weights in an init container, so their page "
            "cache is not charged to the engine container that vLLM's memory guard measures.",
            json_schema_extra=_fix("use true or false"),
        ),
    ] = True
    prefill_path: Annotated[
        Literal["onednn", "fallback"],
        Field(
            description="The linear path vLLM takes for bf16 prompt steps, on which every "
            "bound that can kill work rests: onednn (oneDNN's matmul; a leader whose vLLM "
            "logged the fallback to torch's linear refuses to start) or fallback (torch's "
            "linear, about 3.6x slower at the slow end, with longer timeouts and drains).",
            json_schema_extra=_fix("use onednn or fallback"),
        ),
    ] = "onednn"
    model_cache: Annotated[
        Literal["none", "volume"],
        Field(
            description="Where the weights live between restarts: none (the node's disk, "
            "downloaded at every start) or volume (a persistent EBS gp3 volume per rank).",
            json_schema_extra=_fix("use none or volume"),
        ),
    ] = "none"
    model_revision: Annotated[
        str,
        Field(
            pattern=r"^(auto|[0-9a-f]{40})$",
            description="Commit of the model's hub repository that every rank downloads; auto "
            "= the catalogue's checked commit.",
            json_schema_extra=_fix(
                "use auto or a 40-character commit SHA from the model's hub repository"
            ),
        ),
    ] = "auto"
    weights: Annotated[
        Literal["bf16", "int8", "int4"],
        Field(
            description="Weight format the group serves: bf16 (the checkpoint as published); "
            "int8 (compressed-tensors W8A8: int8 per-channel weights, int8 activations scaled "
            "per token at run time); int4 (W4A8: int4 weights in groups of 128, int8 "
            "activations). Embeddings, the output head and the vision and audio encoders stay "
            "bf16. With the default model int8 and int4 fit one m7g.2xlarge; their quality is "
            "unmeasured here (docs/weights.md).",
            json_schema_extra=_fix("use bf16, int8 or int4"),
        ),
    ] = "bf16"
    weights_source: Annotated[
        str,
        Field(
            pattern=r"^(quantize|[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*"
            r"@[0-9a-f]{40})$",
            description="Where an int8 or int4 checkpoint comes from: quantize (a one-time "
            "Job quantizes `model` at its pinned revision and writes the checkpoint to the "
            "weights volumes) or <hub repository>@<40-hex commit> of a compressed-tensors "
            "checkpoint in that format, which every rank downloads.",
            json_schema_extra=_fix(
                "use quantize, or a compressed-tensors checkpoint as "
                "owner/name@<40-character commit SHA>"
            ),
        ),
    ] = "quantize"
    download_mbps: Annotated[
        float,
        Field(
            alias="downloadMBps",
            gt=0,
            description="Expected download rate from the model hub in MB/s, for the "
            "cold-start estimate and the startup timeout: at least 1, at most what the node moves "
            "through an internet gateway (625 below 32 vCPUs).",
            json_schema_extra=_fix("use a rate of at least 1 MB/s, such as 140"),
        ),
    ] = 140.0
    first_byte_timeout_seconds: Annotated[
        Annotated[int, Field(ge=30)] | Auto,
        Field(
            description="Allowance for a reply's first token; the front door answers 504 to a "
            "reply not finished within it plus the longest reply's decode; auto = a "
            "maximum-length prompt's planned prefill plus the stall bound.",
            json_schema_extra=_fix("use auto or a number of seconds of at least 30"),
        ),
    ] = "auto"
    vllm_image: Annotated[
        str,
        Field(
            description="vLLM CPU image (arm64), as repository:tag@sha256:digest of its index. "
            "The default is the pin file's (components/manifests/images.json), which has no "
            "digest until `make pin-images` writes it: `pulumi up` refuses it until then, and "
            "refuses an index the pin file records without linux/arm64.",
            json_schema_extra=_fix(
                "drop the key and run `make pin-images`, or pin a version and its digest, such as "
                "vllm/vllm-openai-cpu:v0.31.0-arm64@sha256:<64 hex digits>"
            ),
        ),
    ] = images.PINS["vllm"].reference
    vllm_image_own_build: Annotated[
        bool,
        Field(
            description="`vllmImage` is your own build of vLLM for CPUs on arm64, from a "
            "repository the pin file does not list: the plan accepts it and says so. Without "
            "it, `vllmImage` must come from the pin file's vLLM repository.",
            json_schema_extra=_fix("use true or false"),
        ),
    ] = False
    vllm_extra_args: Annotated[
        tuple[str, ...],
        Field(
            description="Further `vllm serve` flags for every rank, such as "
            "[--enable-prefix-caching, --max-num-seqs=8]: each as --flag=value or --flag then "
            "its value. The plan refuses a flag vLLM 0.31's parser does not take "
            "(infra/plan/vllm-serve-flags.json) and one the plan sets itself; its figures "
            "assume vLLM's defaults for the rest.",
            json_schema_extra=_fix("list flags such as --enable-prefix-caching"),
        ),
    ] = ()
    allowed_cidrs: Annotated[
        tuple[ipaddress.IPv4Network, ...],
        Field(
            min_length=1,
            description="Client ranges the load balancer admits; the API key is required too. "
            "The default admits private ranges only (a VPN, peered VPCs): nothing from the "
            "internet until the stack lists it.",
            json_schema_extra=_fix("list IPv4 ranges such as 203.0.113.0/24"),
        ),
    ] = PRIVATE_RANGES
    endpoint_public_access_cidrs: Annotated[
        Annotated[tuple[ipaddress.IPv4Network, ...], Field(min_length=1)] | None,
        Field(
            description="Ranges that may reach the EKS API endpoint from the internet: where "
            "kubectl users and `pulumi up` run, CI runners included (`DEV_RUNNER` and "
            "`PREVIEW_RUNNER` for dev, `PROD_RUNNER` for prod). Nodes use the private endpoint. "
            "Not with `existingCluster`, whose endpoint is its owner's.",
            json_schema_extra={
                **_fix(
                    "list the IPv4 ranges of your operators and CI runners, such as 198.51.100.0/24"
                ),
                # Required unless that key is set (`StackChecks._check_existing_cluster`).
                "required_unless": "existingCluster",
            },
        ),
    ] = None
    existing_cluster: Annotated[
        str | None,
        Field(
            pattern=r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$",
            description="Name of an EKS cluster in `region` to deploy into, as a layer: the "
            "stack reads it and creates no VPC, NAT gateway or cluster, only the model's node "
            "group, LWS unless `lwsInstalled`, the groups, the load balancer and the chosen "
            "layers (docs/deploying.md#into-a-cluster-you-already-have). The bootstrap fences "
            "the stack's roles to it.",
            json_schema_extra=_fix("use the cluster's name as `aws eks list-clusters` prints it"),
        ),
    ] = None
    existing_cluster_subnet: Annotated[
        str | None,
        Field(
            pattern=r"^subnet-[0-9a-f]{8,17}$",
            description="With `existingCluster`: the subnet of the model nodes, in "
            "`availabilityZone` and in the cluster's VPC, when none of the cluster's own "
            "subnets in that zone has room. Unset: the cluster's private subnet in that zone "
            "with the most free addresses (a subnet that maps public addresses, routes 0.0.0.0/0 "
            "to an internet gateway or has no default route is never picked).",
            json_schema_extra=_fix("use a subnet ID such as subnet-0123456789abcdef0"),
        ),
    ] = None
    lws_installed: Annotated[
        bool,
        Field(
            description="With `existingCluster`: the cluster's owner runs the LeaderWorkerSet "
            "controller, so the stack installs none and refuses a CRD without the fields the "
            "groups set; false: the stack installs it (as a stack that installed it already "
            "must say), keeping its CRDs on destroy. Required with `existingCluster`: a second "
            "controller beside the cluster's breaks it.",
            json_schema_extra=_fix("use true or false"),
        ),
    ] = False
    cluster_admin_arns: Annotated[
        tuple[str, ...],
        Field(
            description="IAM roles and users given AmazonEKSClusterAdminPolicy on the whole "
            "cluster (access entries). Never the principal that runs the stack's first "
            "`pulumi up` (in CI, the deploy role): EKS makes the cluster's creator an admin "
            "itself and refuses a second entry for it.",
            json_schema_extra=_fix(_IAM_FIX),
        ),
    ] = ()
    cluster_viewer_arns: Annotated[
        tuple[str, ...],
        Field(
            description="IAM roles and users given AmazonEKSAdminViewPolicy on the whole "
            "cluster (read everything, Secrets included; change nothing). Never the "
            "cluster's creator either.",
            json_schema_extra=_fix(_IAM_FIX),
        ),
    ] = ()
    tls_certificate_arn: Annotated[
        str | None,
        Field(
            pattern=r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[0-9a-f-]+$",
            description="ACM certificate (in `region`) for a TLS listener on 443; without one "
            "the listener is plain HTTP on 80, which only private `allowedCidrs` or "
            "`allowPlainHttp` admit.",
            json_schema_extra=_fix("use the ARN of an ACM certificate in `region`"),
        ),
    ] = None
    allow_plain_http: Annotated[
        bool,
        Field(
            description="Admit plain HTTP from public single addresses (/32) without a "
            "certificate: for a short test from one fixed address, never for real traffic "
            "(the API key crosses the internet in clear text).",
            json_schema_extra=_fix("use true or false"),
        ),
    ] = False
    front_door: Annotated[
        Literal["gatekeeper", "vllm-key"],
        Field(
            description="What checks the API key behind the load balancer: gatekeeper (nginx in "
            "each leader pod, with the per-client limits and request checks below) or vllm-key "
            "(vLLM's own key check, no nginx; the plan lists what it gives up, "
            "docs/front-door.md#vllm-key).",
            json_schema_extra=_fix("use gatekeeper or vllm-key"),
        ),
    ] = "gatekeeper"
    max_reply_tokens: Annotated[
        PositiveInt | Auto,
        Field(
            description="Longest reply vLLM generates, so a request without `max_tokens` "
            "cannot hold a slot for the whole context. vLLM 0.31 applies it to every request "
            "(--override-generation-config max_new_tokens): a request's `max_tokens` can lower "
            "it, not raise it. auto = a quarter of `maxModelLen`, at most 1024.",
            json_schema_extra=_fix("use auto or a positive number of tokens such as 512"),
        ),
    ] = "auto"
    max_logprobs: Annotated[
        Annotated[int, Field(ge=0, le=20)] | Auto,
        Field(
            description="Largest `logprobs`, `top_logprobs` or `prompt_logprobs` served (also "
            "vLLM's --max-logprobs); each multiplies the reply's bytes. auto = 0, none.",
            json_schema_extra=_fix("use auto or a number from 0 to 20"),
        ),
    ] = "auto"
    monitoring: Annotated[
        bool,
        Field(
            description="vLLM's and the front door's metrics in CloudWatch, a dashboard and "
            "alarms (docs/watching.md); false creates none of them.",
            json_schema_extra=_fix("use true or false"),
        ),
    ] = True
    alarm_email: Annotated[
        str | None,
        Field(
            pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
            description="E-mail address subscribed to the alarms' SNS topic (it must confirm "
            "the subscription); the plan warns without one.",
            json_schema_extra=_fix("use an address such as oncall@example.com"),
        ),
    ] = None
    vcpu_quota: Annotated[
        PositiveInt | None,
        Field(
            description="The account's EC2 quota of running On-Demand Standard instance vCPUs "
            "in `region` (Service Quotas L-1216C47A), if known: the plan refuses nodes it "
            "cannot launch at the peak of a change (a node replacement's extra nodes, an "
            "`instanceType` change's second node group).",
            json_schema_extra=_fix("use the quota's value such as 64"),
        ),
    ] = None
    rollout_surge: Annotated[
        Annotated[int, Field(ge=0, le=16)] | Auto,
        Field(
            description="Extra groups a pod-template change starts before it stops an old one "
            "(LeaderWorkerSet maxSurge, maxUnavailable 0), on nodes the node autoscaler adds "
            "for them; 0 rolls groups in place. auto = 1 when the model node group can grow, "
            "else 0; above 0 on a fixed node group is refused "
            "(docs/scaling-and-changes.md#rollouts-and-drains).",
            json_schema_extra=_fix("use auto or a number of groups such as 1"),
        ),
    ] = "auto"
    waiting_requests_alarm: Annotated[
        PositiveInt | Auto,
        Field(
            description="Alarm when more requests than this wait for 5 minutes; auto = the "
            "requests the KV cache holds at once, over every group.",
            json_schema_extra=_fix("use auto or a positive number of requests such as 4"),
        ),
    ] = "auto"
    owner: Annotated[
        str,
        Field(
            min_length=1,
            description="Team or person answerable for the stack (tag `owner`).",
            json_schema_extra=_fix("set it to a team or e-mail address, such as ml-platform"),
        ),
    ]
    end_date: Annotated[
        dt.date,
        Field(
            description="Declared end of life (tag `endDate`), so clean-up jobs that stop "
            "instances without one leave the nodes alone.",
            json_schema_extra=_fix("use an ISO date such as 2027-06-30"),
        ),
    ]
    tags: Annotated[
        dict[str, str],
        Field(
            description="Extra AWS tags for every taggable resource: keys and values (and "
            "`owner`) of letters, digits, spaces and `_ . : / + - @`, keys up to 128 "
            "characters, values up to 256, no `aws:` prefix.",
            json_schema_extra=_fix("give a map of string keys to string values"),
        ),
    ] = {}


class StackConfig(StackChecks, GatekeeperKeys, CoreKeys):
    """Everything a stack may set under `gemma-graviton:`, the core's keys first, then the
    gatekeeper's (`infra.plan.gatekeeper_keys`); every default is written once.

    Sizes left at `auto` are derived by the planner (`infra.plan.sizing`); a number overrides the
    planner and is checked against what vLLM will accept.
    """

    # Keys are accepted only as written in the stack file: camelCase aliases, `to_camel` of each
    # field's name unless the field names its own (`podMemoryGiB`, `downloadMBps`).
    model_config = ConfigDict(
        extra="forbid", frozen=True, hide_input_in_errors=True, alias_generator=to_camel
    )
