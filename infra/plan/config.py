"""The stack configuration model: one validated, frozen view of a stack's `gemma-graviton:` keys.

Both readers go through `load_config`: the Pulumi program hands it the raw values from
`pulumi.Config`, the offline CLI hands it the values from `stacks/Pulumi.<stack>.yaml`. Whatever the
source, a bad value ends in one `ConfigError` line that names the key, the rule and the fix.

Secrets (`hfToken`, `apiKey`) are not part of the model: they must be set with
`pulumi config set --secret`, and `secret_keys_in_plain_text` lets both readers refuse a plain one.
"""

from __future__ import annotations

import datetime as dt
import difflib
import ipaddress
import json
import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from components.manifests import images
from infra.plan import catalog, prices

PROJECT = "gemma-graviton"

#: Keys that hold secrets. They live in the stack file only as `secure:` values.
SECRET_KEYS = ("hfToken", "apiKey", "apiKeyPrevious")

Auto = Literal["auto"]
PositiveInt = Annotated[int, Field(gt=0)]

#: RFC 1918 ranges: clients there reach the load balancer through a VPN, Direct Connect or a
#: peered network, never across the public internet. (`IPv4Network.is_private` is no use here:
#: it also counts the documentation ranges such as 203.0.113.0/24 as private.)
#: RFC 1122 section 3.2.1.3's "this host on this network" (RFC 6890 table 1): never a source
#: address a client's packets arrive from.
THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
PRIVATE_RANGES = (
    ipaddress.IPv4Network("10.0.0.0/8"),
    ipaddress.IPv4Network("172.16.0.0/12"),
    ipaddress.IPv4Network("192.168.0.0/16"),
)
#: A Hugging Face repository id. The model name reaches vLLM's command line and an environment
#: value, where Kubernetes expands `$(VAR)`: letters, digits, `.`, `_` and `-` only.
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


class ConfigError(ValueError):
    """A stack value that cannot be used: one line naming the key, the rule and the fix."""

    def __init__(self, key: str, rule: str, fix: str) -> None:
        self.key, self.rule, self.fix = key, rule, fix
        super().__init__(f"`{key}` {rule}; {fix}")


class MissingKeysError(ConfigError):
    """Every required key a stack leaves out, in one line, so one edit of the file fixes them
    all (`key`, `rule` and `fix` are the first one's)."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__(keys[0], "is required", _fix_of(keys[0]))
        self.keys = tuple(keys)
        if len(keys) > 1:
            names = ", ".join(f"`{k}`" for k in keys[:-1]) + f" and `{keys[-1]}`"
            fixes = "; ".join(f"`{k}`: {_fix_of(k)}" for k in keys)
            self.args = (f"{names} are required; {fixes}",)


def _fix(text: str) -> dict[str, str]:
    return {"fix": text}


#: An IAM role or user ARN, as access entries take them (not an assumed-role session).
IAM_PRINCIPAL_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+")
_IAM_FIX = "list IAM role or user ARNs such as arn:aws:iam::123456789012:role/platform-admin"
#: A zone name (us-west-2a) or zone ID (usw2-az1, apne1-az4, usgw1-az1).
ZONE_NAME = re.compile(r"[a-z]{2}(-gov)?-[a-z]+-\d[a-z]")
ZONE_ID = re.compile(r"[a-z]{3,6}\d-az\d{1,2}")
#: The digest part of a pinned image reference.
IMAGE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class ModelProfileConfig(BaseModel):
    """A model described by the stack itself instead of by a catalogue name.

    The fields mirror `catalog.ModelProfile`; see there for what each one means.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    layers: PositiveInt
    sliding_per_full: Annotated[int, Field(ge=0, alias="slidingPerFull")]
    sliding_kv_heads: Annotated[int, Field(gt=0, alias="slidingKvHeads")]
    sliding_head_dim: Annotated[int, Field(gt=0, alias="slidingHeadDim")]
    full_kv_heads: Annotated[int, Field(gt=0, alias="fullKvHeads")]
    full_head_dim: Annotated[int, Field(gt=0, alias="fullHeadDim")]
    sliding_window: Annotated[int, Field(gt=0, alias="slidingWindow")]
    hidden_size: Annotated[int, Field(gt=0, alias="hiddenSize")]
    vocab_size: Annotated[int, Field(gt=0, alias="vocabSize")]
    checkpoint_bytes: Annotated[int, Field(gt=0, alias="checkpointBytes")]
    non_text_bytes: Annotated[int, Field(ge=0, alias="nonTextBytes")] = 0
    max_context: Annotated[int, Field(gt=0, alias="maxContext")]
    tied_embeddings: Annotated[bool, Field(alias="tiedEmbeddings")] = True
    attention_heads: Annotated[int | None, Field(gt=0, alias="attentionHeads")] = None
    intermediate_size: Annotated[int | None, Field(gt=0, alias="intermediateSize")] = None


#: Day names a schedule's `days` are written with, Monday first (ISO and cron order).
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_CLOCK = re.compile(r"([01]\d|2[0-3]):[0-5]\d")


def weekdays(text: str) -> tuple[int, ...]:
    """The ISO weekdays (Mon = 0) of a `days` value such as "Mon-Fri" or "Mon,Wed,Fri"; raises
    ValueError for anything else (a range runs forward, Mon-Sun at most)."""
    days: set[int] = set()
    for part in text.replace(" ", "").split(","):
        first, _, last = part.partition("-")
        if first not in WEEKDAYS or (last and last not in WEEKDAYS):
            raise ValueError(part)
        start, end = WEEKDAYS.index(first), WEEKDAYS.index(last or first)
        if end < start:
            raise ValueError(part)
        days.update(range(start, end + 1))
    return tuple(sorted(days))


class ScheduleConfig(BaseModel):
    """Office hours: one window a day on the listed days, in a named time zone, with the groups
    held inside it and outside it (`infra.plan.elastic` turns it into KEDA's cron trigger)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time_zone: Annotated[
        str,
        Field(
            alias="timeZone",
            description="IANA name of the window's time zone, such as Europe/Berlin.",
        ),
    ]
    days: Annotated[
        str,
        Field(description="Days the window opens: a range (Mon-Fri) or a list (Mon,Wed,Fri)."),
    ] = "Mon-Fri"
    start: Annotated[
        str,
        Field(
            description='When the window opens, as HH:MM in quotes ("08:00"): YAML reads an '
            "unquoted 8:00 as a number."
        ),
    ]
    end: Annotated[
        str,
        Field(
            description='When the window closes, as HH:MM in quotes ("19:00"), after `start` '
            "the same day."
        ),
    ]
    groups_inside: Annotated[
        int,
        Field(
            ge=1,
            le=16,
            alias="groupsInside",
            description="Groups held inside the window: above `minGroups`, at most `maxGroups`.",
        ),
    ] = 1
    groups_outside: Annotated[
        int | None,
        Field(
            ge=0,
            le=16,
            alias="groupsOutside",
            description="Groups outside the window: `minGroups`, the floor, whether written or "
            "left out.",
        ),
    ] = None

    @field_validator("time_zone")
    @classmethod
    def _iana_zone(cls, value: str) -> str:
        names = zoneinfo.available_timezones()
        if value not in names:
            # Only a really close spelling (Europe/Berln, Asia/Tokio) is suggested: at difflib's
            # default 0.6 Europe/Atlantis would be told to use Europe/Athens.
            folded = {n.lower(): n for n in names}
            close = [folded[value.lower()]] if value.lower() in folded else []
            close = close or difflib.get_close_matches(value, sorted(names), n=1, cutoff=0.85)
            raise ConfigError(
                "schedule.timeZone",
                f"{value!r} is not an IANA time zone name",
                f"use {close[0]}"
                if close
                else 'use one such as Europe/Berlin (`python -c "import zoneinfo; '
                'print(sorted(zoneinfo.available_timezones()))"` lists them)',
            )
        return value

    @field_validator("days")
    @classmethod
    def _days(cls, value: str) -> str:
        try:
            weekdays(value)
        except ValueError:
            raise ConfigError(
                "schedule.days",
                f"{value!r} is not a list of days (Mon to Sun, ranges forward)",
                "write them as Mon-Fri or Mon,Wed,Fri",
            ) from None
        return value

    @field_validator("start", "end", mode="before")
    @classmethod
    def _clock(cls, value: Any, info: ValidationInfo) -> Any:
        example = "08:00" if info.field_name == "start" else "19:00"
        if not isinstance(value, str):
            # YAML 1.1 readers take an unquoted 8:00 for the sexagesimal number 480.
            raise ConfigError(
                f"schedule.{info.field_name}",
                f"{value} was read as a number, not a time of day",
                f'quote it as HH:MM, such as "{example}"',
            )
        if not _CLOCK.fullmatch(value):
            raise ConfigError(
                f"schedule.{info.field_name}",
                f"{value!r} is not a time of day as HH:MM",
                f'write it as "{example}"',
            )
        return value

    @model_validator(mode="after")
    def _window(self) -> ScheduleConfig:
        if self.end <= self.start:
            raise ConfigError(
                "schedule.end",
                f"{self.end} is not after `schedule.start` {self.start} (a window ends the day it "
                "starts)",
                'use an end such as "23:59"',
            )
        return self

    @property
    def weekdays(self) -> tuple[int, ...]:
        """The window's ISO weekdays (Mon = 0)."""
        return weekdays(self.days)

    @property
    def hours_a_week(self) -> float:
        """Hours inside the window in one week."""
        (h0, m0), (h1, m1) = (map(int, t.split(":")) for t in (self.start, self.end))
        return len(self.weekdays) * ((h1 * 60 + m1) - (h0 * 60 + m0)) / 60


class StackConfig(BaseModel):
    """Everything a stack may set under `gemma-graviton:`; every default is written here once.

    Sizes left at `auto` are derived by the planner (`infra.plan.sizing`); a number overrides the
    planner and is checked against what vLLM will accept.
    """

    # Keys are accepted only as written in the stack file (camelCase aliases).
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

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
            alias="availabilityZone",
            description="The one AZ of the nodes: pipeline traffic and EBS volumes stay in it. "
            "A zone name (us-west-2a) or a zone ID (usw2-az1); names map to different physical "
            "zones in each account, IDs do not. Checked at preview against the account's zones.",
            json_schema_extra=_fix("use a zone of `region`, such as us-west-2a or usw2-az1"),
        ),
    ] = "us-west-2a"
    control_plane_zone: Annotated[
        str | Auto,
        Field(
            alias="controlPlaneZone",
            description="Second AZ for the EKS control plane's subnets (EKS needs two); "
            "no node runs there. A zone name or ID; `auto` picks, at preview, the first other "
            "zone of the region that EKS accepts.",
            json_schema_extra=_fix("use another zone of `region` (name or ID), or auto"),
        ),
    ] = "auto"
    kubernetes_version: Annotated[
        str,
        Field(
            alias="kubernetesVersion",
            description="EKS Kubernetes version, pinned; its support dates are in "
            "`infra/plan/prices.py`.",
            pattern=r"^1\.\d{2}$",
            json_schema_extra=_fix(
                f"use a pinned minor version such as {catalog.DEFAULT_KUBERNETES_VERSION}"
            ),
        ),
    ] = catalog.DEFAULT_KUBERNETES_VERSION
    vpc_cidr: Annotated[
        ipaddress.IPv4Network,
        Field(
            alias="vpcCidr",
            description="VPC address range, a /16 to /18; four /20 subnets are cut from it.",
            json_schema_extra=_fix("use a private range of /16 to /18, such as 10.42.0.0/16"),
        ),
    ] = ipaddress.IPv4Network("10.42.0.0/16")
    node_subnets: Annotated[
        Literal["private", "public"],
        Field(
            alias="nodeSubnets",
            description="Nodes behind one NAT gateway (private) or with public IPs and no NAT "
            "charges (public).",
            json_schema_extra=_fix("use private or public"),
        ),
    ] = "private"
    instance_type: Annotated[
        str,
        Field(
            alias="instanceType",
            description="Graviton instance type of the model nodes: m, c or r of Graviton3 and "
            "Graviton4, large to 8xlarge; `--compare` ranks them.",
            json_schema_extra=_fix("choose a Graviton type from the catalogue"),
        ),
    ] = "m7g.2xlarge"
    model: Annotated[
        str,
        Field(
            description="Hugging Face repository served by vLLM: a catalogue model, or another "
            "one whose layout `modelProfile` gives.",
            json_schema_extra=_fix("choose a catalogue model or describe it in `modelProfile`"),
        ),
    ] = "google/gemma-4-12B-it"
    model_profile: Annotated[
        ModelProfileConfig | None,
        Field(
            alias="modelProfile",
            description="The model's layout, for a model that is not in the catalogue.",
            json_schema_extra=_fix("give every field of the profile (see docs/planning.md)"),
        ),
    ] = None
    pipeline_stages: Annotated[
        Annotated[int, Field(ge=1, le=8)] | Auto,
        Field(
            alias="pipelineStages",
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
            alias="minGroups",
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
            alias="maxGroups",
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
            alias="queuePerGroup",
            description="Waiting requests per running group that ask for another group; auto "
            "= the full-length requests one group's KV cache holds at once.",
            json_schema_extra=_fix("use auto or a positive number of requests such as 4"),
        ),
    ] = "auto"
    max_model_len: Annotated[
        PositiveInt | Auto,
        Field(
            alias="maxModelLen",
            description="Longest request (prompt + reply) in tokens; auto = longest that fits, up "
            "to `maxContextCap`.",
            json_schema_extra=_fix("use auto or a positive number of tokens such as 4096"),
        ),
    ] = "auto"
    max_context_cap: Annotated[
        int,
        Field(
            alias="maxContextCap",
            ge=256,
            description="Upper bound for `maxModelLen: auto`: prefill on CPU is slow, so a "
            "longer context than this is rarely useful.",
            json_schema_extra=_fix("use a number of tokens of at least 256, such as 8192"),
        ),
    ] = 8192
    kv_cache_bytes: Annotated[
        PositiveInt | Auto,
        Field(
            alias="kvCacheBytes",
            description="vLLM's --kv-cache-memory-bytes per rank; auto = largest safe budget, 90% "
            "of what vLLM's memory guard sees.",
            json_schema_extra=_fix("use auto or a positive number of bytes such as 400000000"),
        ),
    ] = "auto"
    max_num_batched_tokens: Annotated[
        Annotated[int, Field(ge=256)] | Auto,
        Field(
            alias="maxNumBatchedTokens",
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
            "can give after its other tenants.",
            json_schema_extra=_fix("use auto or a positive number of GiB such as 26"),
        ),
    ] = "auto"
    weight_prefetch: Annotated[
        bool,
        Field(
            alias="weightPrefetch",
            description="Download and read the weights in an init container, so their page "
            "cache is not charged to the engine container that vLLM's memory guard measures.",
            json_schema_extra=_fix("use true or false"),
        ),
    ] = True
    model_cache: Annotated[
        Literal["none", "volume"],
        Field(
            alias="modelCache",
            description="Where the weights live between restarts: none (the node's disk, "
            "downloaded at every start) or volume (a persistent EBS gp3 volume per rank).",
            json_schema_extra=_fix("use none or volume"),
        ),
    ] = "none"
    model_revision: Annotated[
        str,
        Field(
            alias="modelRevision",
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
            alias="weightsSource",
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
            alias="firstByteTimeoutSeconds",
            description="Allowance for a reply's first token; the front door answers 504 to a "
            "reply not finished within it plus the longest reply's decode; auto = a "
            "maximum-length prompt's planned prefill plus the stall bound.",
            json_schema_extra=_fix("use auto or a number of seconds of at least 30"),
        ),
    ] = "auto"
    vllm_image: Annotated[
        str,
        Field(
            alias="vllmImage",
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
    allowed_cidrs: Annotated[
        tuple[ipaddress.IPv4Network, ...],
        Field(
            alias="allowedCidrs",
            min_length=1,
            description="Client ranges the load balancer admits; the API key is required too. "
            "The default admits private ranges only (a VPN, peered VPCs): nothing from the "
            "internet until the stack lists it.",
            json_schema_extra=_fix("list IPv4 ranges such as 203.0.113.0/24"),
        ),
    ] = PRIVATE_RANGES
    endpoint_public_access_cidrs: Annotated[
        tuple[ipaddress.IPv4Network, ...],
        Field(
            alias="endpointPublicAccessCidrs",
            min_length=1,
            description="Ranges that may reach the EKS API endpoint from the internet: where "
            "kubectl users and `pulumi up` run, CI runners included (`DEV_RUNNER` and "
            "`PREVIEW_RUNNER` for dev, `PROD_RUNNER` for prod). Nodes use the private endpoint.",
            json_schema_extra=_fix(
                "list the IPv4 ranges of your operators and CI runners, such as 198.51.100.0/24"
            ),
        ),
    ]
    cluster_admin_arns: Annotated[
        tuple[str, ...],
        Field(
            alias="clusterAdminArns",
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
            alias="clusterViewerArns",
            description="IAM roles and users given AmazonEKSAdminViewPolicy on the whole "
            "cluster (read everything, Secrets included; change nothing). Never the "
            "cluster's creator either.",
            json_schema_extra=_fix(_IAM_FIX),
        ),
    ] = ()
    permissions_boundary_arn: Annotated[
        str | None,
        Field(
            alias="permissionsBoundaryArn",
            pattern=r"^arn:aws[a-z-]*:iam::\d{12}:policy/[\w+=,.@/-]+$",
            description="The managed policy every IAM role of the stack carries as its "
            "permissions boundary: the bootstrap's `<project>-<stack>-boundary` "
            "(`infra/bootstrap`, output `setupCommands`), without which the stack's CI deploy "
            "role may create or change no role, so required when CI's deploy role runs the stack "
            "(docs/deploying.md#4-the-bootstrap-stack-the-github-oidc-provider-and-the-ci-roles)"
            ". Unset for a stack deployed by hand only.",
            json_schema_extra=_fix(
                "use the ARN the bootstrap prints, "
                "arn:aws:iam::<account>:policy/github-ci/gemma-graviton-<stack>-boundary"
            ),
        ),
    ] = None
    tls_certificate_arn: Annotated[
        str | None,
        Field(
            alias="tlsCertificateArn",
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
            alias="allowPlainHttp",
            description="Admit plain HTTP from public single addresses (/32) without a "
            "certificate: for a short test from one fixed address, never for real traffic "
            "(the API key crosses the internet in clear text).",
            json_schema_extra=_fix("use true or false"),
        ),
    ] = False
    max_request_bytes: Annotated[
        Annotated[int, Field(ge=1024)] | Auto,
        Field(
            alias="maxRequestBytes",
            description="Largest request body the gatekeeper passes to vLLM (413 above it); "
            "auto = enough JSON for a prompt of `maxModelLen` tokens.",
            json_schema_extra=_fix("use auto or a number of bytes of at least 1024"),
        ),
    ] = "auto"
    client_requests_per_minute: Annotated[
        PositiveInt | Auto,
        Field(
            alias="clientRequestsPerMinute",
            description="Requests per minute one client address may send (429 with "
            "Retry-After above it); auto follows the plan's concurrency.",
            json_schema_extra=_fix("use auto or a positive number of requests such as 120"),
        ),
    ] = "auto"
    client_concurrent_requests: Annotated[
        PositiveInt | Auto,
        Field(
            alias="clientConcurrentRequests",
            description="Requests one client address may have in flight (429 above it); "
            "auto = the number of full-length requests the KV cache holds at once.",
            json_schema_extra=_fix("use auto or a positive number of requests such as 2"),
        ),
    ] = "auto"
    client_tokens_in_flight: Annotated[
        Annotated[int, Field(ge=1, le=100_000_000)] | Auto,
        Field(
            alias="clientTokensInFlight",
            description="KV-cache tokens one client address may hold at vLLM at once, each "
            "request counted at the large end of what it can hold (its body's bytes plus the "
            "longest reply, at most `maxModelLen`), enforced in tiers (429 above it); auto = "
            "half the KV cache, so one client at its limit leaves the other half to the others. "
            "At least one full-length request beside the client's others, at most the KV cache "
            "less one full-length request.",
            json_schema_extra=_fix("use auto or a number of tokens such as 40000"),
        ),
    ] = "auto"
    max_reply_tokens: Annotated[
        PositiveInt | Auto,
        Field(
            alias="maxReplyTokens",
            description="Longest reply vLLM generates, so a request without `max_tokens` "
            "cannot hold a slot for the whole context. vLLM 0.31 applies it to every request "
            "(--override-generation-config max_new_tokens): a request's `max_tokens` can lower "
            "it, not raise it. auto = a quarter of `maxModelLen`, at most 1024.",
            json_schema_extra=_fix("use auto or a positive number of tokens such as 512"),
        ),
    ] = "auto"
    chat_page: Annotated[
        bool,
        Field(
            alias="chatPage",
            description="The gatekeeper also serves a small chat page at the endpoint's root "
            "(`https://<endpoint>/`; three static files, same-origin CSP, no new pod); the page "
            "loads without "
            "the key and sends the key the person types with each call. false: only the API.",
            json_schema_extra=_fix("use true or false"),
        ),
    ] = True
    client_connections: Annotated[
        PositiveInt | Auto,
        Field(
            alias="clientConnections",
            description="TCP connections one client address may hold at the gatekeeper, "
            "counted when a connection opens, before a request is read (idle keep-alives and "
            "slow senders included); auto = one per request it may have in flight + 2, at "
            "most half of what the gatekeeper's memory holds.",
            json_schema_extra=_fix("use auto or a positive number of connections such as 16"),
        ),
    ] = "auto"
    max_sequences_per_request: Annotated[
        PositiveInt | Auto,
        Field(
            alias="maxSequencesPerRequest",
            description="Sequences one request may ask for (`n`, `best_of`, a list of "
            "prompts); more get 400 naming the field. The per-client limits count sequences, "
            "so a higher value lets fewer requests in flight. auto = 1.",
            json_schema_extra=_fix("use auto or a positive number of sequences such as 2"),
        ),
    ] = "auto"
    max_logprobs: Annotated[
        Annotated[int, Field(ge=0, le=20)] | Auto,
        Field(
            alias="maxLogprobs",
            description="Largest `logprobs`, `top_logprobs` or `prompt_logprobs` served (also "
            "vLLM's --max-logprobs); each multiplies the reply's bytes. auto = 0, none.",
            json_schema_extra=_fix("use auto or a number from 0 to 20"),
        ),
    ] = "auto"
    max_schema_bytes: Annotated[
        Annotated[int, Field(ge=0)] | Auto,
        Field(
            alias="maxSchemaBytes",
            description="Largest grammar input (JSON schemas, tools, regexes) in bytes of "
            "JSON; vLLM compiles each before generating, one at a time, so one such request is "
            "in flight per client address. 0 turns structured outputs off; auto = about a "
            "second of compile.",
            json_schema_extra=_fix("use auto, 0 or a number of bytes such as 8192"),
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
            alias="alarmEmail",
            pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
            description="E-mail address subscribed to the alarms' SNS topic (it must confirm "
            "the subscription); the plan warns without one.",
            json_schema_extra=_fix("use an address such as oncall@example.com"),
        ),
    ] = None
    vcpu_quota: Annotated[
        PositiveInt | None,
        Field(
            alias="vcpuQuota",
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
            alias="rolloutSurge",
            description="Extra groups a pod-template change starts before it stops an old one "
            "(LeaderWorkerSet maxSurge, maxUnavailable 0), on nodes the node autoscaler adds "
            "for them; 0 rolls groups in place. auto = 1 when the model node group can grow, "
            "else 0; above 0 on a fixed node group is refused "
            "(docs/scaling-and-changes.md#rollouts-and-drains).",
            json_schema_extra=_fix("use auto or a number of groups such as 1"),
        ),
    ] = "auto"
    api_key_overlap_until: Annotated[
        dt.datetime | None,
        Field(
            alias="apiKeyOverlapUntil",
            description="During a key rotation, when the previous key (`apiKeyPrevious`) stops "
            "being accepted, as an RFC 3339 UTC time; until then both keys work.",
            json_schema_extra=_fix("use a UTC time such as 2026-12-09T00:00:00Z"),
        ),
    ] = None
    waiting_requests_alarm: Annotated[
        PositiveInt | Auto,
        Field(
            alias="waitingRequestsAlarm",
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
            alias="endDate",
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

    @field_validator("allowed_cidrs")
    @classmethod
    def _client_ranges(
        cls, value: tuple[ipaddress.IPv4Network, ...]
    ) -> tuple[ipaddress.IPv4Network, ...]:
        """Ranges no client's packets can come from, refused before any rule that would
        suggest how to admit them (a field validator runs before the model's checks)."""
        for network in value:
            if network.subnet_of(THIS_NETWORK):
                raise ConfigError(
                    "allowedCidrs",
                    f'holds {network}, in 0.0.0.0/8 (RFC 1122 "this network"), addresses no '
                    "client can come from",
                    "list your own address as a /32 (`curl -s https://checkip.amazonaws.com` "
                    "prints it) or your clients' ranges",
                )
            if network.is_loopback or network.is_link_local:
                raise ConfigError(
                    "allowedCidrs",
                    f"holds {network}, a loopback or link-local range no client can come from",
                    "list your clients' ranges, such as 203.0.113.0/24",
                )
        return value

    @field_validator("availability_zone", "control_plane_zone")
    @classmethod
    def _zone_shape(cls, value: str) -> str:
        if value != "auto" and not (ZONE_NAME.fullmatch(value) or ZONE_ID.fullmatch(value)):
            raise ValueError("must be an availability zone name or zone ID")
        return value

    @field_validator("cluster_admin_arns", "cluster_viewer_arns")
    @classmethod
    def _iam_principals(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        key = "clusterAdminArns" if info.field_name == "cluster_admin_arns" else "clusterViewerArns"
        for arn in value:
            if ":assumed-role/" in arn:
                raise ConfigError(
                    key,
                    f"{arn} is an assumed-role session, which access entries do not take",
                    "give the role's ARN, arn:aws:iam::<account>:role/<name>",
                )
            if not IAM_PRINCIPAL_ARN.fullmatch(arn):
                raise ConfigError(key, f"{arn!r} is not an IAM role or user ARN", _IAM_FIX)
        if len(set(value)) != len(value):
            raise ConfigError(key, "lists a principal twice", "list each ARN once")
        return value

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _version_is_text(cls, value: Any) -> Any:
        # YAML reads 1.30 as the number 1.3: a version must be written as text.
        if isinstance(value, float | int):
            raise ConfigError(
                "kubernetesVersion",
                f"{value} was read as a number",
                f'quote it, such as "{catalog.DEFAULT_KUBERNETES_VERSION}"',
            )
        return value

    @field_validator("api_key_overlap_until")
    @classmethod
    def _utc(cls, value: dt.datetime | None) -> dt.datetime | None:
        if value is not None and value.utcoffset() != dt.timedelta(0):
            raise ConfigError(
                "apiKeyOverlapUntil",
                f"{value.isoformat()} is not a UTC time (RFC 3339 with Z or +00:00)",
                "write it in UTC, such as 2026-12-09T00:00:00Z",
            )
        return value

    @field_validator("model")
    @classmethod
    def _model_repo_id(cls, value: str) -> str:
        if not _REPO_ID.fullmatch(value):
            raise ConfigError(
                "model",
                f"{value!r} is not a Hugging Face repository id (owner/name of letters, digits, "
                "`.`, `_` and `-`; it reaches the vLLM command line, where `$(` would expand)",
                "use an id such as google/gemma-4-12B-it",
            )
        return value

    @field_validator("vllm_image")
    @classmethod
    def _image_pinned(cls, value: str) -> str:
        # A set image must name its digest: a registry can move a tag under the same name. Runs
        # only on a set value; the pin file's default, until `make pin-images` gives it a digest,
        # is a placeholder `pulumi up` refuses (`infra.plan.placeholders`).
        reference, _, digest = value.partition("@")
        name, _, tag = reference.rpartition(":")
        if not name or "/" in tag or tag in ("", "latest"):
            raise ValueError("must be a version tag and its digest, repository:tag@sha256:...")
        if not digest:
            raise ConfigError(
                "vllmImage",
                f"{value} is pinned by a tag only, which a registry can move",
                f"pin it by digest as {value}@sha256:<the index's digest>, or drop the key "
                "and run `make pin-images`, which pins the default's",
            )
        if not IMAGE_DIGEST.fullmatch(digest):
            raise ConfigError(
                "vllmImage",
                f"{value} has a malformed digest",
                f"write it as {reference}@sha256:<64 hex digits>",
            )
        return value

    @field_validator("tags")
    @classmethod
    def _tags_reserved(cls, value: dict[str, str]) -> dict[str, str]:
        managed = {
            "project": "the project name",
            "stack": "the stack name",
            "owner": "the `owner` key",
            "endDate": "the `endDate` key",
        }
        for key, text in value.items():
            # The NLB gets the tags through a "k=v,k=v" annotation that the cloud provider splits
            # on "," and "=" (cloud-provider-aws pkg/providers/v1/aws_loadbalancer.go,
            # getKeyValuePropertiesFromAnnotation).
            if {",", "="} & set(key + text):
                raise ConfigError(
                    "tags",
                    f"{key}={text} contains ',' or '=', which the load balancer's tag annotation "
                    "cannot carry",
                    "remove those characters from the tag",
                )
        clash = sorted(set(managed) & set(value))
        if clash:
            raise ConfigError(
                "tags",
                f"may not set the managed tag {clash[0]!r}",
                f"remove it; it comes from {managed[clash[0]]}",
            )
        return value

    def _check_image(self) -> None:
        # The default too: the pin file records the platforms `make pin-images` read from the
        # registry, and every node is Graviton (arm64); an index without arm64 cannot start.
        pin = images.recorded(self.vllm_image)
        if pin is None or not pin.missing():
            return
        listed = ", ".join(pin.platforms or ()) or "no platform"
        raise ConfigError(
            "vllmImage",
            f"{self.vllm_image} is an index without {', '.join(pin.missing())} (it lists "
            f"{listed}, as `make pin-images` read it), and every node is Graviton (arm64)",
            "choose a tag whose index lists linux/arm64, set it in "
            "components/manifests/images.json and run `make pin-images`",
        )

    @model_validator(mode="after")
    def _cross_checks(self) -> StackConfig:
        for key, zone in (
            ("availabilityZone", self.availability_zone),
            ("controlPlaneZone", self.control_plane_zone),
        ):
            # A zone ID's region is checked at preview, against the account's zones.
            if ZONE_NAME.fullmatch(zone) and not zone.startswith(self.region):
                raise ConfigError(
                    key,
                    f"{zone} is not a zone of region {self.region}",
                    f"use a zone such as {self.region}a, or change `region`",
                )
        both = sorted(set(self.cluster_admin_arns) & set(self.cluster_viewer_arns))
        if both:
            raise ConfigError(
                "clusterViewerArns",
                f"{both[0]} is in `clusterAdminArns` too (EKS allows one access entry per "
                "principal)",
                "keep it in one of the two lists",
            )
        if self.control_plane_zone == self.availability_zone:
            raise ConfigError(
                "controlPlaneZone",
                "must differ from `availabilityZone` (EKS needs subnets in two zones)",
                "choose another zone of the region, or auto",
            )
        if not 16 <= self.vpc_cidr.prefixlen <= 18:
            raise ConfigError(
                "vpcCidr",
                f"{self.vpc_cidr} must be a /16 to /18 (four /20 subnets are cut from it)",
                "use a range such as 10.42.0.0/16",
            )
        self._check_image()
        self._check_front_door()
        self._check_weights()
        self._check_elastic()
        if self.model_profile is None and self.model not in catalog.MODELS:
            known = ", ".join(sorted(catalog.MODELS))
            raise ConfigError(
                "model",
                f"{self.model} is not in the catalogue ({known})",
                "choose one of those, or describe the model in `modelProfile`",
            )
        return self

    def _check_weights(self) -> None:
        """A named checkpoint is a quantized one: the bf16 weights are `model` itself."""
        if self.weights == "bf16" and self.weights_source != "quantize":
            raise ConfigError(
                "weightsSource",
                f"names {self.weights_source}, but `weights` is bf16, whose checkpoint is "
                "`model` at `modelRevision`",
                "set `weights` to the checkpoint's format (int8 or int4), or set "
                "`weightsSource` to quantize",
            )

    def _check_front_door(self) -> None:
        """An internet-facing endpoint uses TLS: the API key must not cross the internet in
        clear text. Plain HTTP is left for private clients and, when asked for, single
        addresses (a short test from one machine)."""
        if self.tls_certificate_arn is not None:
            arn_region = self.tls_certificate_arn.split(":")[3]
            if arn_region != self.region:
                raise ConfigError(
                    "tlsCertificateArn",
                    f"is in {arn_region}, but the load balancer runs in `region` {self.region} "
                    "and can use only a certificate of its own region",
                    f"request or import the certificate in ACM in {self.region}",
                )
            return
        if self.private_clients_only:
            return
        public = [c for c in self.allowed_cidrs if not any(c.subnet_of(p) for p in PRIVATE_RANGES)]
        if self.allow_plain_http and all(c.prefixlen == 32 for c in public):
            return
        waiver = (
            "and `allowPlainHttp` admits single addresses (/32) only"
            if self.allow_plain_http
            else "so the API key would cross the internet in clear text"
        )
        whole = " (the whole internet)" if public[0].prefixlen == 0 else ""
        raise ConfigError(
            "allowedCidrs",
            f"{public[0]}{whole} reaches beyond private ranges without a `tlsCertificateArn`, "
            f"{waiver}",
            # With `allowPlainHttp` already set, the fix left is the user's own address.
            "list your own address as a /32 (`curl -s https://checkip.amazonaws.com` prints it), "
            f"or set `tlsCertificateArn` to an ACM certificate in {self.region}"
            if self.allow_plain_http
            else f"set `tlsCertificateArn` to an ACM certificate in {self.region}, list only "
            "private ranges, or set `allowPlainHttp: true` with one /32 for a short test",
        )

    @property
    def elastic(self) -> bool:
        """Groups follow the queue and the clock (`minGroups` and `maxGroups` set); otherwise the
        stack keeps `replicas` groups running at all times."""
        return self.min_groups is not None

    @property
    def most_groups(self) -> int:
        """The groups the stack is sized for: `maxGroups` when elastic, else `replicas` (volumes,
        quota and alarms count every group that can run)."""
        return self.max_groups if self.max_groups is not None else self.replicas

    def _check_elastic(self) -> None:
        """The elasticity keys come together, and `replicas` does not come with them."""
        given = {"minGroups", "maxGroups", "schedule", "queuePerGroup"} & {
            StackConfig.model_fields[n].alias or n for n in self.model_fields_set
        }
        if not given:
            return
        if "replicas" in self.model_fields_set:
            raise ConfigError(
                "replicas",
                f"fixes the number of groups, but {_keys(given)} make it follow the queue",
                "remove `replicas`, or remove the elasticity keys",
            )
        inside = self.schedule.groups_inside if self.schedule else 1
        if self.min_groups is None:
            raise ConfigError(
                "minGroups",
                f"is required with {_keys(given)}",
                "set it to 0 (no group while nothing asks) or 1",
            )
        lowest = min(16, max(self.min_groups + 1, inside))
        if self.max_groups is None:
            raise ConfigError(
                "maxGroups", f"is required with {_keys(given)}", f"set it to {lowest}"
            )
        if self.max_groups <= self.min_groups:
            raise ConfigError(
                "maxGroups",
                f"{self.max_groups} is not above `minGroups` {self.min_groups}, so the group "
                "count is fixed",
                f"set it to {lowest}, or use `replicas: {self.max_groups}` without elasticity keys",
            )
        if self.schedule is not None:
            self._check_schedule(self.schedule, self.min_groups, self.max_groups)

    @staticmethod
    def _check_schedule(schedule: ScheduleConfig, least: int, most: int) -> None:
        if schedule.groups_inside > most:
            raise ConfigError(
                "schedule.groupsInside",
                f"{schedule.groups_inside} is above `maxGroups` {most}",
                f"use {most} or fewer, or raise `maxGroups`",
            )
        if schedule.groups_inside <= least:
            raise ConfigError(
                "schedule.groupsInside",
                f"{schedule.groups_inside} is not above `minGroups` {least}, so the window holds "
                "nothing more than the rest of the week",
                f"use {least + 1}, or remove `schedule`",
            )
        if schedule.groups_outside is not None and schedule.groups_outside != least:
            raise ConfigError(
                "schedule.groupsOutside",
                f"{schedule.groups_outside} differs from `minGroups` {least}: outside the window "
                "the floor is `minGroups`",
                f"set it to {least}, or leave it out",
            )

    @property
    def private_clients_only(self) -> bool:
        """Every admitted client range is private: the load balancer is internal."""
        return all(any(c.subnet_of(p) for p in PRIVATE_RANGES) for c in self.allowed_cidrs)

    @property
    def revision(self) -> str | None:
        """The commit every rank downloads: the stack's, else the catalogue's checked one."""
        if self.model_revision != "auto":
            return self.model_revision
        return self.profile().revision

    @property
    def quantize_job(self) -> bool:
        """The stack produces its own int8 or int4 checkpoint (the quantize Job)."""
        return self.weights != "bf16" and self.weights_source == "quantize"

    @property
    def model_cache_planned(self) -> str:
        """Where the weights live: the stack's `modelCache`, except that a checkpoint the
        quantize Job produces lives on the per-rank volumes (the Job writes it there once)."""
        return "volume" if self.quantize_job else self.model_cache

    @property
    def weights_repo(self) -> tuple[str, str | None]:
        """The repository and commit every rank loads: the named checkpoint's, else `model`'s
        (for a produced checkpoint, what the Job quantizes)."""
        if self.weights_source != "quantize":
            repo, _, commit = self.weights_source.partition("@")
            return repo, commit
        return self.model, self.revision

    @property
    def kubernetes(self) -> prices.EksVersion | None:
        """The pinned Kubernetes version's EKS support window (None: not in the catalogue)."""
        return prices.EKS_VERSIONS.get(self.kubernetes_version)

    def profile(self) -> catalog.ModelProfile:
        """The model's layout in the served weight format: the stack's own description, else
        the catalogue's."""
        if self.model_profile is not None:
            return catalog.ModelProfile(
                name=self.model, weights=self.weights, **self.model_profile.model_dump()
            )
        return replace(catalog.MODELS[self.model], weights=self.weights)


def _keys(keys: set[str]) -> str:
    """Stack keys as prose: `a`, `b` and `c`."""
    names = [f"`{k}`" for k in sorted(keys)]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"


def _alias_of(loc: tuple[int | str, ...]) -> str:
    """The stack key a pydantic error location points at (`maxModelLen`, `modelProfile.layers`).

    Locations are aliases (keys are validated as written); union branches append tags such as
    `int` or `literal['auto']`, which are not keys."""
    top = str(loc[0]) if loc else "config"
    profile_keys = {f.alias or n for n, f in ModelProfileConfig.model_fields.items()}
    if top == "modelProfile" and len(loc) > 1 and loc[1] in profile_keys:
        return f"modelProfile.{loc[1]}"
    schedule_keys = {f.alias or n for n, f in ScheduleConfig.model_fields.items()}
    if top == "schedule" and len(loc) > 1 and loc[1] in schedule_keys:
        return f"schedule.{loc[1]}"
    return top


def _fix_of(key: str) -> str:
    top = key.split(".")[0]
    for name, info in StackConfig.model_fields.items():
        if (info.alias or name) == top:
            extra = info.json_schema_extra
            if isinstance(extra, dict) and "fix" in extra:
                return str(extra["fix"])
    return "see the stack keys in docs/planning.md"


def _unknown_key(key: str) -> ConfigError:
    known = [f.alias or n for n, f in StackConfig.model_fields.items()] + list(SECRET_KEYS)
    close = difflib.get_close_matches(key, known, n=1)
    fix = f"did you mean `{close[0]}`?" if close else "remove it (see docs/planning.md)"
    return ConfigError(key, "is not a gemma-graviton stack key", fix)


def _to_config_error(error: ValidationError, raw: Mapping[str, Any]) -> ConfigError:
    first = error.errors()[0]
    loc = tuple(first["loc"])
    if first["type"] == "extra_forbidden":
        if len(loc) == 1:
            return _unknown_key(str(loc[0]))
        key = _alias_of(loc[:-1])
        if key == "schedule":
            fields = ", ".join(f.alias or n for n, f in ScheduleConfig.model_fields.items())
            return ConfigError(
                f"schedule.{loc[-1]}", "is not a field of the schedule", f"remove it ({fields})"
            )
        return ConfigError(f"{key}.{loc[-1]}", "is not a field of the model profile", "remove it")
    if first["type"] == "missing":
        key = _alias_of(loc)
        if "." in key:
            return ConfigError(key, "is required", _fix_of(key))
        missing = [
            str(e["loc"][0])
            for e in error.errors()
            if e["type"] == "missing" and len(e["loc"]) == 1
        ]
        return MissingKeysError(missing)
    key = _alias_of(loc)
    ctx_error = (first.get("ctx") or {}).get("error")
    if isinstance(ctx_error, ConfigError):
        return ctx_error
    top = key.split(".")[0]
    shown = raw.get(top, "?")
    if "." in key and isinstance(shown, Mapping):
        shown = shown.get(key.split(".", 1)[1], "?")
    rule = _rule_text(first)
    return ConfigError(key, f"{rule} (got {_shown(shown)})", _fix_of(key))


def _shown(value: Any) -> str:
    """A value as the user wrote it: numbers bare, other text quoted."""
    if isinstance(value, str) and re.fullmatch(r"[-+]?\d+(\.\d*)?", value.strip()):
        return value.strip()
    return repr(value)


def _rule_text(first: Mapping[str, Any]) -> str:
    """Pydantic's message for the most specific branch, phrased as a rule. The container
    checks come first: "a valid tuple" is pydantic's word for a list in the stack file."""
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "too_short":
        return "must list at least one value"
    if message == "Input should be a valid tuple":
        return "must be a list"
    if message == "Input should be a valid dictionary":
        return "must be a mapping"
    if message.startswith("Input should be "):
        return "must be " + message.removeprefix("Input should be ")
    if message.startswith("Input is not a valid "):
        return "must be a valid " + message.removeprefix("Input is not a valid ")
    if message.startswith("String should match pattern"):
        return "has the wrong form"
    return message


def _decode(value: Any) -> Any:
    """Pulumi hands structured config to the program as JSON text; decode it once."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def load_config(raw: Mapping[str, Any]) -> StackConfig:
    """Validate the stack's keys (namespace already stripped) into a `StackConfig`.

    Secret keys are set aside: the caller reads them as secrets and `check_secrets` makes sure
    they were stored as such.
    """
    from infra.plan import rules  # the rules build on the model defined here

    values = {k: _decode(v) for k, v in raw.items() if k not in SECRET_KEYS}
    rules.check_raw(values)
    try:
        cfg = StackConfig.model_validate(values)
    except ValidationError as error:
        refused = _to_config_error(error, values)
        if refused.rule.startswith("must be a list"):
            refused = rules.list_syntax(refused, values)
        raise refused from None
    check_rotation(raw)
    rules.check_config(cfg)
    return cfg


#: A user-chosen API key: at least this many characters of RFC 6750's b64token alphabet (the
#: gatekeeper writes it into an nginx `map` line, `components.manifests.gatekeeper`).
API_KEY_MIN_CHARS = 32
API_KEY_ALPHABET = "A-Z a-z 0-9 . _ ~ + / = -"
_API_KEY = re.compile(rf"[A-Za-z0-9._~+/=-]{{{API_KEY_MIN_CHARS},512}}")


def check_api_key(key: str, name: str = "apiKey") -> None:
    """Refuse a user-chosen key (`name`: apiKey or apiKeyPrevious) that is short or holds other
    characters; the message never shows the key."""
    if _API_KEY.fullmatch(key):
        return
    if len(key) < API_KEY_MIN_CHARS:
        rule = (
            f"is {len(key)} characters; it needs at least {API_KEY_MIN_CHARS} of {API_KEY_ALPHABET}"
        )
    elif len(key) > 512:
        rule = f"is {len(key)} characters, more than 512"
    else:
        rule = f"holds characters outside {API_KEY_ALPHABET}"
    raise ConfigError(
        name,
        rule,
        f"run `pulumi config set --secret {name} $(openssl rand -hex 24)`"
        + (", or remove it to have one generated" if name == "apiKey" else ""),
    )


def check_rotation(raw: Mapping[str, Any]) -> None:
    """A key rotation names both its halves: the previous key (a secret) and when it stops."""
    if "apiKeyPrevious" in raw and raw.get("apiKeyOverlapUntil") is None:
        raise ConfigError(
            "apiKeyPrevious",
            "is set without `apiKeyOverlapUntil`, so the old key would be accepted for ever",
            "set `apiKeyOverlapUntil` to when it stops, such as 2026-12-09T00:00:00Z",
        )
    if raw.get("apiKeyOverlapUntil") is not None and "apiKeyPrevious" not in raw:
        raise ConfigError(
            "apiKeyOverlapUntil",
            "is set without `apiKeyPrevious`, the key it keeps accepting",
            "run `pulumi config set --secret apiKeyPrevious <the old key>`, or remove it",
        )


def check_secrets(present: Mapping[str, bool]) -> None:
    """Refuse a secret key stored in plain text. `present` maps key -> stored as secret."""
    for key, is_secret in present.items():
        if key in SECRET_KEYS and not is_secret:
            raise ConfigError(
                key,
                "is a secret but is stored in plain text",
                f"run `pulumi config set --secret {key} <value>` and remove the plain value",
            )
