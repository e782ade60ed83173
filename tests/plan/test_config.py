"""Bad stack values end in one line naming the key, the rule and the fix, through both readers."""

from __future__ import annotations

import json

import pytest
import yaml

from infra.adapters.cli import main
from infra.plan import loading, stackfile
from infra.plan.config import ConfigError
from infra.plan.loading import load_config
from infra.plan.sizing import plan
from tests.plan.profiles import REQUIRED as MINIMAL
from tests.plan.profiles import small_gemma

CHEAPEST_TYPE_FIX = (
    "choose r7g.2xlarge, the cheapest type that starts this stack ($475.30/month; `--compare` "
    "ranks them all)"
)

# A whole model profile as --set writes it; rows below change one field of it.
PROFILE = (
    "{layers: 4, slidingPerFull: 5, slidingKvHeads: 8, slidingHeadDim: 256, fullKvHeads: 1, "
    "fullHeadDim: 512, slidingWindow: 1024, hiddenSize: 3840, vocabSize: 262144, "
    "checkpointBytes: 1000, maxContext: 4096}"
)

# (--set values, exact message). Each row is a mistake a user of this project can make; those
# test_bad_input.CASES print whole, through both readers and with their fix, are not repeated.
BAD_INPUTS = [
    (
        ["instanceTyp=m7g.2xlarge"],
        "`instanceTyp` is not a gemma-graviton stack key; did you mean `instanceType`?",
    ),
    (
        ["permissionsBoundaryArn=arn:aws:iam::123456789012:policy/github-ci/b"],
        "`permissionsBoundaryArn` is no longer a stack key: the stack's IAM roles are the "
        "bootstrap's, which gives them their boundary (docs/deploying.md, step 4); remove it "
        "with `pulumi config rm permissionsBoundaryArn`",
    ),
    (
        ["instanceType=m7i.2xlarge"],
        "`instanceType` m7i.2xlarge is not a Graviton (arm64) type, and the image and node group "
        "are arm64; choose a Graviton type such as m7g.2xlarge or m8g.4xlarge",
    ),
    (
        ["instanceType=c7g.xlarge"],
        "`instanceType` c7g.xlarge (2.75 GiB per pod) cannot hold google/gemma-4-12B-it at any "
        "split (1 stage(s) need 33.7 GiB per pod before any KV cache; 8 stage(s) need 12.0 GiB "
        "per pod before any KV cache); choose a larger type such as m7g.4xlarge",
    ),
    (
        ["allowedCidrs=[0.0.0.0/0]", "allowPlainHttp=false"],
        "`allowedCidrs` 0.0.0.0/0 (the whole internet) reaches beyond private ranges without a "
        "`tlsCertificateArn`, so the API key would cross the internet in clear text; set "
        "`tlsCertificateArn` to an ACM "
        "certificate in us-west-2, list only private ranges, or set `allowPlainHttp: true` with "
        "one /32 for a short test",
    ),
    (
        ["allowedCidrs=[10.0.0.0/8, 198.51.100.0/24]"],
        "`allowedCidrs` 198.51.100.0/24 reaches beyond private ranges without a "
        "`tlsCertificateArn`, and `allowPlainHttp` admits single addresses (/32) only; list your "
        "own address as a /32 (`curl -s https://checkip.amazonaws.com` prints it), or set "
        "`tlsCertificateArn` to an ACM certificate in us-west-2",
    ),
    (
        ["tlsCertificateArn=arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d"],
        "`tlsCertificateArn` is in eu-west-1, but the load balancer runs in `region` us-west-2 "
        "and can use only a certificate of its own region; request or import the certificate in "
        "ACM in us-west-2",
    ),
    (
        ["model=evil/$(LWS_LEADER_ADDRESS)"],
        "`model` 'evil/$(LWS_LEADER_ADDRESS)' is not a Hugging Face repository id (owner/name of "
        "letters, digits, `.`, `_` and `-`; it reaches the vLLM command line, where `$(` would "
        "expand); use an id such as google/gemma-4-12B-it",
    ),
    (
        ["vllmImage=vllm/vllm-openai-cpu:v0.31.0-arm64@sha256:abc"],
        "`vllmImage` vllm/vllm-openai-cpu:v0.31.0-arm64@sha256:abc has a malformed digest; write "
        "it as vllm/vllm-openai-cpu:v0.31.0-arm64@sha256:<64 hex digits>",
    ),
    # vLLM's CUDA repository, pinned and well formed: not a CPU arm64 build.
    (
        ["vllmImage=vllm/vllm-openai:v0.31.0@sha256:" + "a" * 64],
        "`vllmImage` vllm/vllm-openai:v0.31.0@sha256:" + "a" * 64 + " is not from "
        "vllm/vllm-openai-cpu, the vLLM CPU arm64 repository the pin file "
        "(components/manifests/images.json) lists, and other builds of vLLM do not run on "
        "Graviton's CPUs; use a vllm/vllm-openai-cpu tag ending in -arm64 and its digest, or set "
        "`vllmImageOwnBuild: true` if it is your own CPU arm64 build",
    ),
    (
        ["clusterAdminArns=[arn:aws:sts::123456789012:assumed-role/ci/run-42]"],
        "`clusterAdminArns` arn:aws:sts::123456789012:assumed-role/ci/run-42 is an assumed-role "
        "session, which access entries do not take; give the role's ARN, "
        "arn:aws:iam::<account>:role/<name>",
    ),
    (
        ["clusterViewerArns=[alice]"],
        "`clusterViewerArns` 'alice' is not an IAM role or user ARN; list IAM role or user ARNs "
        "such as arn:aws:iam::123456789012:role/platform-admin",
    ),
    (
        ["clusterAdminArns=[arn:aws:iam::123456789012:group/admins]"],
        "`clusterAdminArns` 'arn:aws:iam::123456789012:group/admins' is not an IAM role or user "
        "ARN; list IAM role or user ARNs such as arn:aws:iam::123456789012:role/platform-admin",
    ),
    (
        [
            "clusterAdminArns=[arn:aws:iam::123456789012:role/a]",
            "clusterViewerArns=[arn:aws:iam::123456789012:role/a]",
        ],
        "`clusterViewerArns` arn:aws:iam::123456789012:role/a is in `clusterAdminArns` too (EKS "
        "allows one access entry per principal); keep it in one of the two lists",
    ),
    (
        ["modelRevision=main"],
        "`modelRevision` has the wrong form (got 'main'); use auto or a 40-character commit SHA "
        "from the model's hub repository",
    ),
    (
        ["endpointPublicAccessCidrs=[]"],
        "`endpointPublicAccessCidrs` must list at least one value (got []); list the IPv4 ranges "
        "of your operators and CI runners, such as 198.51.100.0/24",
    ),
    (
        ["availabilityZone=us-west-2-a"],
        "`availabilityZone` must be an availability zone name or zone ID (got 'us-west-2-a'); "
        "use a zone of `region`, such as us-west-2a or usw2-az1",
    ),
    (
        ["tags={team: a=b}"],
        "`tags` team=a=b contains ',' or '=', which the load balancer's tag annotation cannot "
        "carry; remove those characters from the tag",
    ),
    (
        ["modelProfile=" + PROFILE.replace("layers: 4", "layers: -4")],
        "`modelProfile.layers` must be greater than 0 (got -4); give every field of the profile "
        "(see docs/planning.md)",
    ),
    (
        ["zzzzqqqq=1"],
        "`zzzzqqqq` is not a gemma-graviton stack key; remove it (see docs/planning.md)",
    ),
    (
        ["modelProfile=" + PROFILE.replace("}", ", colour: 1}")],
        "`modelProfile.colour` is not a field of the model profile; remove it",
    ),
    (
        ["modelProfile=" + PROFILE.replace("layers: 4", "layers: many")],
        "`modelProfile.layers` must be a valid integer, unable to parse string as an integer "
        "(got 'many'); give every field of the profile (see docs/planning.md)",
    ),
    (
        ["tags=costCenter"],
        "`tags` must be a mapping (got 'costCenter'); give a map of string keys to string values",
    ),
    (
        ["vpcCidr=ten"],
        "`vpcCidr` must be a valid IPv4 network (got 'ten'); use a private range of /16 to /18, "
        "such as 10.42.0.0/16",
    ),
    (
        ["chatPage=sometimes"],
        "`chatPage` must be a valid boolean, unable to interpret input (got 'sometimes'); use "
        "true or false",
    ),
    (
        ["instanceType=m7g.large"],
        "`instanceType` m7g.large leaves no whole CPU for a model pod after its other tenants; "
        "choose a type with at least 4 vCPU, such as m7g.2xlarge",
    ),
    (
        ["maxSchemaBytes=-1"],
        "`maxSchemaBytes` must be greater than or equal to 0 (got -1); use auto, 0 or a number of "
        "bytes such as 8192",
    ),
    (
        ["maxSequencesPerRequest=20"],
        "`maxSequencesPerRequest` 20 is more than the 10 sequences one client may have in flight; "
        "use at most 10, or raise `clientConcurrentRequests`",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_INPUTS, ids=lambda v: str(v)[:40])
def test_bad_input_through_the_cli(
    overrides: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [arg for pair in overrides for arg in ("--set", pair)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    if message.startswith("`instanceType`"):
        # The CLI replaces the planner's example with a type it has planned and seen start.
        message = message.rsplit("; ", 1)[0] + "; " + CHEAPEST_TYPE_FIX
    assert captured.err == f"error: {message}\n"
    assert captured.out == ""


@pytest.mark.parametrize(("overrides", "message"), BAD_INPUTS, ids=lambda v: str(v)[:40])
def test_bad_input_through_the_config_model(overrides: list[str], message: str) -> None:
    values, _ = stackfile.read_stack("dev")
    values.update(stackfile.parse_overrides(overrides))
    with pytest.raises(ConfigError) as error:
        plan(load_config(values))
    assert str(error.value) == message


def test_program_style_json_strings_validate_like_yaml() -> None:
    # The Pulumi program receives structured values as JSON text and scalars as strings.
    cfg = load_config(
        {
            "owner": "team",
            "endDate": "2027-01-01",
            "allowedCidrs": '["198.51.100.0/24"]',
            "tlsCertificateArn": "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d",
            "endpointPublicAccessCidrs": '["198.51.100.0/24"]',
            "tags": '{"costCenter": "ml"}',
            "replicas": "2",
            "weightPrefetch": "false",
            "maxModelLen": "auto",
        }
    )
    assert [str(c) for c in cfg.allowed_cidrs] == ["198.51.100.0/24"]
    assert cfg.tags == {"costCenter": "ml"}
    assert (cfg.replicas, cfg.weight_prefetch, cfg.max_model_len) == (2, False, "auto")


def test_an_image_marked_as_the_users_own_build_is_planned_and_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    image = "registry.example.com/ml/vllm-cpu:0.31.0-arm64@sha256:" + "b" * 64
    argv = ["--set", f"vllmImage={image}", "--set", "vllmImageOwnBuild=true", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["vllm_image"] == image
    assert data["warnings"][0] == (
        f"`vllmImage` {image} is your own build (`vllmImageOwnBuild`): the plan does not check "
        "that it is vLLM for CPUs on arm64, and its rates are the pinned "
        "vllm/vllm-openai-cpu:v0.31.0-arm64's"
    )
    assert main(argv[:2]) == 2
    assert "is not from vllm/vllm-openai-cpu" in capsys.readouterr().err


def test_sealed_secrets_plan_and_a_stack_without_a_file_is_named(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Plain-text secrets and foreign keys in a stack file are test_bad_input's cases."""
    monkeypatch.setattr(stackfile, "STACKS", tmp_path)
    monkeypatch.setattr(stackfile, "REPO", tmp_path.parent)
    sealed = {f"gemma-graviton:{key}": {"secure": "v1:abc"} for key in ("hfToken", "apiKey")}
    config = {f"gemma-graviton:{key}": value for key, value in MINIMAL.items()} | sealed
    (tmp_path / "Pulumi.sealed.yaml").write_text(yaml.safe_dump({"config": config}))
    assert main(["--stack", "sealed", "--json"]) == 0
    assert main(["--stack", "nope"]) == 2
    assert capsys.readouterr().err.startswith("error: `--stack` 'nope' has no file")


# Rules the config model owns: each is refused here, with its exact message, before the network
# or the cluster would refuse it later in `pulumi up`; the value just inside each is accepted.
CERT = "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d"
TAG_CHARS = "letters, digits, spaces and _ . : / + - @"
RULES = [
    ({"vpcCidr": "10.0.0.0/15"},
     "`vpcCidr` 10.0.0.0/15 must be a /16 to /18 (four /20 subnets are cut from it); use a range "
     "such as 10.42.0.0/16"),
    ({"vpcCidr": "10.42.0.0/19"},
     "`vpcCidr` 10.42.0.0/19 must be a /16 to /18 (four /20 subnets are cut from it); use a range "
     "such as 10.42.0.0/16"),
    ({"vpcCidr": "100.64.0.0/16"},
     "`vpcCidr` 100.64.0.0/16 is not a private (RFC 1918) range; the VPC's addresses must not "
     "shadow public ones; use a private range such as 10.42.0.0/16"),
    ({"controlPlaneZone": "us-east-1b"},
     "`controlPlaneZone` us-east-1b is not a zone of region us-west-2; use a zone such as "
     "us-west-2a, or change `region`"),
    ({"availabilityZone": "us-west-2"},
     "`availabilityZone` must be an availability zone name or zone ID (got 'us-west-2'); use a "
     "zone of `region`, such as us-west-2a or usw2-az1"),
    ({"allowedCidrs": ["127.0.0.0/8"], "tlsCertificateArn": CERT},
     "`allowedCidrs` holds 127.0.0.0/8, a loopback or link-local range no client can come from; "
     "list your clients' ranges, such as 203.0.113.0/24"),
    ({"allowedCidrs": ["169.254.0.0/16"], "tlsCertificateArn": CERT},
     "`allowedCidrs` holds 169.254.0.0/16, a loopback or link-local range no client can come "
     "from; list your clients' ranges, such as 203.0.113.0/24"),
    ({"allowedCidrs": [f"198.51.{i}.0/24" for i in range(51)], "tlsCertificateArn": CERT},
     "`allowedCidrs` lists 51 ranges, more than 50 (each is a security-group rule; EC2 allows 60 "
     "per group); merge them into fewer, wider ranges"),
    ({"allowedCidrs": ["10.0.0.0/8", "203.0.113.0/24"], "tlsCertificateArn": CERT},
     "`allowedCidrs` mixes 10.0.0.0/8, a private range, with public ones, but an internet-facing "
     "load balancer sees clients' public addresses only; list only public egress ranges such as "
     "203.0.113.0/24, or only private ranges for an internal load balancer"),
    ({"allowedCidrs": []},
     "`allowedCidrs` must list at least one value (got []); list IPv4 ranges such as "
     "203.0.113.0/24"),
    ({"owner": "o" * 257},
     f"`owner` '{'o' * 40}...' is 257 characters long; it becomes the tag `owner`, whose value "
     f"is at most 256 {TAG_CHARS}; shorten it to 256 characters"),
    ({"tags": {"team": "a" * 257}},
     f"`tags` value of 'team' is 257 characters long; a tag value is at most 256 {TAG_CHARS}; "
     "shorten it to 256 characters"),
    ({"tags": {"a#b": "x"}},
     f"`tags` key 'a#b' holds '#'; a tag key is 1 to 128 {TAG_CHARS}; rename it, such as 'a-b'"),
    ({"tags": {"k" * 129: "x"}},
     f"`tags` key '{'k' * 40}...' is 129 characters long; a tag key is 1 to 128 {TAG_CHARS}; "
     "shorten it to 128 characters"),
    ({"tags": {"AWS:team": "x"}},
     "`tags` key 'AWS:team' starts with aws:, a prefix AWS reserves for itself; rename it, such "
     "as 'team'"),
    ({"tags": {"aws:": "x"}},
     "`tags` key 'aws:' starts with aws:, a prefix AWS reserves for itself; rename it, such as "
     "'team'"),
    ({"tags": {"endDate": "x"}},
     "`tags` may not set the managed tag 'endDate'; remove it; it comes from the `endDate` key"),
    ({"tags": {f"t{i}": "v" for i in range(47)}},
     "`tags` has 47 tags; AWS allows 50 per resource and the stack sets 4; keep at most 46"),
    ({"kubernetesVersion": "1.37"},
     "`kubernetesVersion` 1.37 is newer than any EKS version the catalogue knows (newest 1.35); "
     "use 1.35"),
    ({"tags": {"team": 1}},
     "`tags` must be a valid string (got {'team': 1}); give a map of string keys to string "
     "values"),
    ({"region": "zz-nowhere-9"}, "`region` zz-nowhere-9 is not an AWS region; use us-west-2"),
    ({"region": "us-wset-2", "availabilityZone": "us-west-2b"},
     "`region` us-wset-2 is not an AWS region; use us-west-2"),
    # A key rotation's end is a UTC time, and keeps accepting the previous key.
    ({"apiKeyOverlapUntil": "2026-12-09T00:00:00+01:00"},
     "`apiKeyOverlapUntil` 2026-12-09T00:00:00+01:00 is not a UTC time (RFC 3339 with Z or "
     "+00:00); write it in UTC, such as 2026-12-09T00:00:00Z"),
    ({"apiKeyOverlapUntil": "2026-12-09T00:00:00Z"},
     "`apiKeyOverlapUntil` is set without `apiKeyPrevious`, the key it keeps accepting; run "
     "`pulumi config set --secret apiKeyPrevious <the old key>`, or remove it"),
]  # fmt: skip


@pytest.mark.parametrize(("values", "message"), RULES, ids=lambda v: str(v)[:40])
def test_a_config_rule_refuses_before_any_resource(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config({**MINIMAL, **values})
    assert str(error.value) == message


@pytest.mark.parametrize(
    "values",
    [
        {"vpcCidr": "10.0.0.0/16"},
        {"vpcCidr": "172.16.0.0/18"},
        {"vpcCidr": "192.168.0.0/17"},
        {"controlPlaneZone": "us-west-2c"},
        {"allowedCidrs": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]},
        {"allowedCidrs": ["203.0.113.7/32"], "allowPlainHttp": True},
        {"tags": {"team": "a" * 256, "t" * 128: "x", "cost center": "ml/inference:2"}},
        {"owner": "ml-platform@example.com"},
        {"tags": {f"t{i}": "v" for i in range(46)}},
        {"allowedCidrs": [f"10.{i}.0.0/16" for i in range(50)]},
        {"owner": "o" * 256},
        {"kubernetesVersion": "1.36"},
    ],
    ids=lambda v: str(v)[:40],
)
def test_the_value_just_inside_a_rule_is_accepted(values: dict[str, object]) -> None:
    load_config({**MINIMAL, **values})


def test_only_private_client_ranges_make_an_internal_load_balancer() -> None:
    def private(**keys: object) -> bool:
        return load_config({**MINIMAL, **keys}).private_clients_only

    assert private() and private(allowedCidrs=["10.1.0.0/16"])
    assert not private(allowedCidrs=["203.0.113.7/32"], allowPlainHttp=True)


def test_a_described_model_keeps_the_stack_s_name_and_every_field() -> None:
    profile = {
        **small_gemma(26),
        "fullKvHeads": 2,
        "fullHeadDim": 512,
        "checkpointBytes": 2_000_000_000,
        "nonTextBytes": 1000,
        "tiedEmbeddings": False,
    }
    cfg = load_config({**MINIMAL, "model": "example/small", "modelProfile": profile})
    described = cfg.profile()
    assert described.name == "example/small"
    assert (described.layers, described.full_kv_heads, described.full_head_dim) == (26, 2, 512)
    assert (described.non_text_bytes, described.tied_embeddings) == (1000, False)
    assert described.checkpoint_bytes == 2_000_000_000


def test_a_key_longer_than_the_header_buffers_hold_is_refused_in_one_line() -> None:
    loading.check_api_key("k" * 256)
    with pytest.raises(ConfigError) as refused:
        loading.check_api_key("k" * 257, "apiKeyPrevious")
    assert str(refused.value) == (
        "`apiKeyPrevious` is 257 characters, more than 256, which a client's headers no longer "
        "fit within the gatekeeper's 1.5 KiB of header buffers; run `pulumi config set --secret "
        "apiKeyPrevious $(openssl rand -hex 24)`"
    )
