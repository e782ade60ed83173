"""Every bad input ends in exit 2 and one line naming the key the user set, the rule and a fix that
is itself accepted: each case is run through `--set` and through a stack file, then with the fix
applied (which must plan). A rule whose exact message and the value just inside it are
test_config's RULES or BAD_INPUTS, or test_weights' bad weights input, or whose exact message and
fix are test_aws_inputs' REFUSED, is not repeated here."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest

from infra.adapters.cli import main
from infra.plan import stackfile

TODAY = dt.date.today()
LATER = TODAY + dt.timedelta(days=90)
# Public clients reach the endpoint over TLS, so the base stack passes the front-door rule.
CERTIFICATE = "arn:aws:acm:us-west-2:123456789012:certificate/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
BASE = {
    "region": "us-west-2",
    "availabilityZone": "us-west-2a",
    "endpointPublicAccessCidrs": "[198.51.100.0/24]",
    "owner": "ml-platform",
    "endDate": '"2027-03-31"',
    "tlsCertificateArn": CERTIFICATE,
    "allowedCidrs": "[203.0.113.0/24]",
}
# The digest form the refusal asks for (a digest of the right shape; the plan does not pull it).
VLLM_PINNED = "vllm/vllm-openai-cpu:v0.31.0-arm64@sha256:" + "0123456789abcdef" * 4
BOMB = "[&a [x, x, x, x, x, x, x, x], &b [*a, *a, *a, *a, *a, *a, *a], [*b, *b, *b, *b, *b, *b]]"


@dataclass(frozen=True)
class Case:
    """`values` are set (as `--set KEY=VALUE` and as stack-file lines); `fixed` is the same input
    with the message's fix applied; `token` is what the fix must say; `message`, where given, is
    the whole line both readers print."""

    name: str
    values: dict[str, str]
    key: str
    fixed: dict[str, str | None]
    token: str
    message: str = ""
    cli: bool = True
    file: bool = True


CASES = [
    Case("named checkpoint for bf16", {"weightsSource": "owner/gemma-w8a8@" + "a" * 40},
         "weightsSource", {"weightsSource": "quantize"}, "quantize"),
    Case("snake case key", {"max_model_len": "2048"}, "max_model_len",
         {"max_model_len": None, "maxModelLen": "2048"}, "maxModelLen",
         "`max_model_len` is not a gemma-graviton stack key; did you mean `maxModelLen`?"),
    Case("graviton2", {"instanceType": "m6g.4xlarge"}, "instanceType",
         {"instanceType": "r7g.2xlarge"}, "r7g.2xlarge"),
    Case("too little memory", {"instanceType": "c7g.2xlarge"}, "instanceType",
         {"instanceType": "r7g.2xlarge"}, "r7g.2xlarge"),
    Case("type not in catalogue", {"instanceType": "m7g.16xlarge"}, "instanceType",
         {"instanceType": "r7g.2xlarge"}, "r7g.2xlarge"),
    Case("pod memory too small", {"podMemoryGiB": "1"}, "podMemoryGiB",
         {"podMemoryGiB": "auto"}, "auto"),
    Case("pod memory too large", {"podMemoryGiB": "40"}, "podMemoryGiB",
         {"podMemoryGiB": "25.8125"}, "25.8125",
         "`podMemoryGiB` 40 GiB is more than the 25.87 GiB a m7g.2xlarge node can give after its "
         "other tenants; set it to at most 25.8125 or auto, or choose a larger `instanceType`"),
    Case("pod memory negative", {"podMemoryGiB": "-3"}, "podMemoryGiB",
         {"podMemoryGiB": "25"}, "25",
         "`podMemoryGiB` must be greater than 0 (got -3); use auto or a positive number of GiB "
         "such as 25"),
    Case("kv bytes tiny", {"kvCacheBytes": "1"}, "kvCacheBytes",
         {"kvCacheBytes": "201326592"}, "201326592"),
    Case("kv bytes negative", {"kvCacheBytes": "-1"}, "kvCacheBytes",
         {"kvCacheBytes": "400000000"}, "400000000",
         "`kvCacheBytes` must be greater than 0 (got -1); use auto or a positive number of bytes "
         "such as 400000000"),
    Case("kv bytes above the guard", {"weightPrefetch": "false", "kvCacheBytes": "4294967296"},
         "kvCacheBytes", {"kvCacheBytes": "559939584"}, "559939584",
         "`kvCacheBytes` 4294967296 (4.00 GiB) is more than vLLM's memory guard will see on rank 0 "
         "(0.58 GiB: the checkpoint's page cache is charged to the engine container); set it to at "
         "most 559939584 or auto, or set `weightPrefetch: true`"),
    Case("context above the model", {"maxModelLen": "200000"}, "maxModelLen",
         {"maxModelLen": "auto"}, "auto",
         "`maxModelLen` 200000 is above google/gemma-4-12B-it's context of 131072; use at most "
         "131072, or auto"),
    Case("context above the kv", {"weightPrefetch": "false", "kvCacheBytes": "400000000",
         "maxModelLen": "4096", "pipelineStages": "2", "maxNumBatchedTokens": "4096"},
         "maxModelLen", {"maxModelLen": "2048"}, "2048",
         "`maxModelLen` 4096 tokens need 0.68 GiB of KV cache per rank, more than the 0.37 GiB "
         "available to it (vLLM would estimate a maximum of 2048); set it to at most 2048 or auto, "
         "or give the KV cache more memory"),
    Case("replicas zero", {"replicas": "0"}, "replicas", {"replicas": "1"}, "1",
         "`replicas` must be greater than or equal to 1 (got 0); use an integer from 1 to 16"),
    Case("replicas word", {"replicas": "two"}, "replicas", {"replicas": "2"}, "integer"),
    Case("replicas fraction", {"replicas": "2.5"}, "replicas", {"replicas": "2"}, "integer"),
    Case("cidr out of range", {"allowedCidrs": "[10.0.0.0/33]"}, "allowedCidrs",
         {"allowedCidrs": "[203.0.113.0/24]"}, "203.0.113.0/24",
         "`allowedCidrs` must be a valid IPv4 network (got ['10.0.0.0/33']); list IPv4 ranges such "
         "as 203.0.113.0/24"),
    Case("public vpc range", {"vpcCidr": "8.8.0.0/16"}, "vpcCidr",
         {"vpcCidr": "10.42.0.0/16"}, "10.42.0.0/16"),
    Case("vpc too large", {"vpcCidr": "10.0.0.0/12"}, "vpcCidr",
         {"vpcCidr": "10.42.0.0/16"}, "10.42.0.0/16"),
    Case("zone of another region", {"availabilityZone": "eu-west-1a"}, "availabilityZone",
         {"availabilityZone": "us-west-2a"}, "us-west-2a",
         "`availabilityZone` eu-west-1a is not a zone of region us-west-2; use a zone such as "
         "us-west-2a, or change `region`"),
    Case("control plane in the node zone", {"controlPlaneZone": "us-west-2a"},
         "controlPlaneZone", {"controlPlaneZone": "auto"}, "auto",
         "`controlPlaneZone` must differ from `availabilityZone` (EKS needs subnets in two zones); "
         "choose another zone of the region, or auto"),
    Case("node subnets", {"nodeSubnets": "dmz"}, "nodeSubnets", {"nodeSubnets": "public"},
         "public",
         "`nodeSubnets` must be 'private' or 'public' (got 'dmz'); use private or public"),
    Case("managed tag", {"tags": "{owner: me}"}, "tags", {"tags": None}, "remove it",
         "`tags` may not set the managed tag 'owner'; remove it; it comes from the `owner` key"),
    Case("tag value line break", {"tags": '{team: "a\\nb"}'}, "tags", {"tags": "{team: a-b}"},
         "'a-b'"),
    Case("owner line break", {"owner": "a\nb"}, "owner", {"owner": "a-b"}, "'a-b'",
         "`owner` 'a\\nb' holds '\\n'; it becomes the tag `owner`, whose value is at most 256 "
         "letters, digits, spaces and _ . : / + - @; use 'a-b'", file=False),
    Case("owner line break in a file", {"owner": '"a\\nb"'}, "owner", {"owner": "a-b"}, "'a-b'",
         cli=False),
    Case("owner '='", {"owner": "a=b"}, "owner", {"owner": "a-b"}, "'a-b'"),
    Case("zone letter", {"availabilityZone": "us-west-2z"}, "availabilityZone",
         {"availabilityZone": "us-west-2a"}, "us-west-2a",
         "`availabilityZone` us-west-2z is not a zone of us-west-2, whose zones are us-west-2a to "
         "us-west-2d; use one of them, such as us-west-2a"),
    Case("download rate tiny", {"downloadMBps": "0.0001"}, "downloadMBps",
         {"downloadMBps": "140"}, "140",
         "`downloadMBps` 0.0001 MB/s is below 1 MB/s, the slowest model download the plan takes; "
         "use a measured rate of at least 1, or the default 140"),
    Case("download rate not a number", {"downloadMBps": "nan"}, "downloadMBps",
         {"downloadMBps": "140"}, "140"),
    Case("download rate above the network", {"downloadMBps": "5000"}, "downloadMBps",
         {"downloadMBps": "625"}, "625",
         "`downloadMBps` 5000 MB/s is above 625 MB/s, the most an m7g.2xlarge moves through an "
         "internet gateway (EC2 caps that at 5 Gbit/s below 32 vCPUs, else at half the instance's "
         "bandwidth); use 625 or less, such as 140"),
    Case("download rate above a 32-vCPU type's network", {"instanceType": "m7g.8xlarge",
         "downloadMBps": "1000"}, "downloadMBps", {"downloadMBps": "937.5"}, "937.5"),
    Case("version gone", {"kubernetesVersion": "1.30"}, "kubernetesVersion",
         {"kubernetesVersion": "1.35"}, "1.35"),
    Case("version unknown", {"kubernetesVersion": "1.40"}, "kubernetesVersion",
         {"kubernetesVersion": "1.35"}, "1.35"),
    Case("version words", {"kubernetesVersion": "latest"}, "kubernetesVersion",
         {"kubernetesVersion": "1.35"}, "1.35",
         "`kubernetesVersion` has the wrong form (got 'latest'); use a pinned minor version such "
         "as 1.35"),
    Case("end date past", {"endDate": "2020-01-01"}, "endDate", {"endDate": str(LATER)},
         "set a future date such as"),
    Case("end date invalid", {"endDate": "2027-13-45"}, "endDate", {"endDate": "2027-06-30"},
         "2027-06-30"),
    Case("end date word", {"endDate": "someday"}, "endDate", {"endDate": "2027-06-30"},
         "2027-06-30"),
    Case("owner a list", {"owner": "[a, b]"}, "owner", {"owner": "ml-platform"}, "team"),
    Case("unpinned image", {"vllmImage": "vllm/vllm-openai-cpu:latest"}, "vllmImage",
         {"vllmImage": VLLM_PINNED}, "@sha256:",
         "`vllmImage` must be a version tag and its digest, repository:tag@sha256:... (got "
         "'vllm/vllm-openai-cpu:latest'); drop the key and run `make pin-images`, or pin a version "
         "and its digest, such as vllm/vllm-openai-cpu:v0.31.0-arm64@sha256:<64 hex digits>"),
    Case("image by tag only", {"vllmImage": "vllm/vllm-openai-cpu:v0.31.0-arm64"}, "vllmImage",
         {"vllmImage": VLLM_PINNED}, "v0.31.0-arm64@sha256:<the index's digest>",
         "`vllmImage` vllm/vllm-openai-cpu:v0.31.0-arm64 is pinned by a tag only, which a registry "
         "can move; pin it by digest as vllm/vllm-openai-cpu:v0.31.0-arm64@sha256:<the index's "
         "digest>, or drop the key and run `make pin-images`, which pins the default's"),
    Case("unknown model", {"model": "meta-llama/Llama-3-8B"}, "model",
         {"model": "google/gemma-4-12B-it"}, "modelProfile",
         "`model` meta-llama/Llama-3-8B is not in the catalogue (google/gemma-4-12B-it, "
         "google/gemma-4-26B-A4B-it); choose one of those, or describe the model in "
         "`modelProfile`"),
    Case("partial profile", {"modelProfile": "{layers: 4}"}, "modelProfile.slidingPerFull",
         {"modelProfile": None}, "every field",
         "`modelProfile.slidingPerFull` is required; give every field of the profile (see "
         "docs/planning.md)"),
    Case("one stage", {"pipelineStages": "1"}, "pipelineStages", {"pipelineStages": "auto"},
         "auto",
         "`pipelineStages` 1 stage(s) put 33.7 GiB of weights and runtime on rank 0, more than its "
         "25.8125 GiB pod; use more stages or auto, or choose a larger `instanceType`"),
    Case("nine stages", {"pipelineStages": "9"}, "pipelineStages", {"pipelineStages": "2"},
         "1 to 8"),
    Case("batch too small", {"maxNumBatchedTokens": "100"}, "maxNumBatchedTokens",
         {"maxNumBatchedTokens": "auto"}, "auto"),
    Case("context cap", {"maxContextCap": "100"}, "maxContextCap", {"maxContextCap": "8192"},
         "8192"),
    Case("download rate", {"downloadMBps": "0"}, "downloadMBps", {"downloadMBps": "1"}, "140",
         "`downloadMBps` must be greater than 0 (got 0); use a rate of at least 1 MB/s, such as "
         "140"),
    Case("boolean", {"weightPrefetch": "maybe"}, "weightPrefetch", {"weightPrefetch": "true"},
         "true",
         "`weightPrefetch` must be a valid boolean, unable to interpret input (got 'maybe'); use "
         "true or false"),
    Case("cache kind", {"modelCache": "s3"}, "modelCache", {"modelCache": "volume"}, "volume"),
    Case("certificate", {"tlsCertificateArn": "arn:bad"}, "tlsCertificateArn",
         {"tlsCertificateArn": CERTIFICATE}, "ACM certificate"),
    Case("connections zero", {"clientConnections": "0"}, "clientConnections",
         {"clientConnections": "auto"}, "auto",
         "`clientConnections` must be greater than 0 (got 0); use auto or a positive number of "
         "connections such as 16"),
    Case("connections for two", {"clientConnections": "50000"}, "clientConnections",
         {"clientConnections": "auto"}, "auto"),
    Case("sequences above the client's", {"maxSequencesPerRequest": "500"},
         "maxSequencesPerRequest", {"maxSequencesPerRequest": "auto"}, "clientConcurrentRequests"),
    Case("logprobs above vLLM's", {"maxLogprobs": "21"}, "maxLogprobs", {"maxLogprobs": "5"},
         "0 to 20",
         "`maxLogprobs` must be less than or equal to 20 (got 21); use auto or a number from 0 to "
         "20"),
    Case("schema above the body", {"maxSchemaBytes": "99999999"}, "maxSchemaBytes",
         {"maxSchemaBytes": "0"}, "maxRequestBytes"),
    Case("alias bomb", {"tags": BOMB}, "tags", {"tags": "{team: ml}"}, "write the value out"),
    Case("oversized --set", {"owner": "x" * 5000}, "owner", {"owner": "ml-platform"},
         "stack file", file=False),
    Case("secret in --set", {"hfToken": "hf_plain"}, "hfToken", {"hfToken": None},
         "drop --set hfToken", file=False),
    Case("plain secret in a file", {"hfToken": "hf_plain"}, "hfToken", {"hfToken": None},
         "--secret hfToken", cli=False),
    Case("plain secret without the hf_ prefix", {"hfToken": "plain-value-1234567890"}, "hfToken",
         {"hfToken": None}, "--secret hfToken",
         "`hfToken` is a secret but is stored in plain text; run `pulumi config set --secret "
         "hfToken <value>` and remove the plain value", cli=False),
    Case("plain API key in a file", {"apiKey": "plain-value-1234567890"}, "apiKey",
         {"apiKey": None}, "--secret apiKey",
         "`apiKey` is a secret but is stored in plain text; run `pulumi config set --secret "
         "apiKey <value>` and remove the plain value", cli=False),
]  # fmt: skip


def _argv(values: dict[str, str | None]) -> list[str]:
    return [arg for k, v in values.items() if v is not None for arg in ("--set", f"{k}={v}")]


def _file(values: dict[str, str | None]) -> str:
    merged = {**BASE, **values}
    lines = [f"  gemma-graviton:{k}: {v}" for k, v in merged.items() if v is not None]
    return "config:\n" + "\n".join(lines) + "\n"


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2, argv
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: `"), captured.err
    return captured.err


def _refused(case: Case, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line_error(argv, capsys)
    assert err.startswith(f"error: `{case.key}` "), err
    assert case.token in err, err
    if case.message:
        assert err == f"error: {case.message}\n"


def _plans(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err


@pytest.fixture
def stacks(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(stackfile, "STACKS", tmp_path)
    monkeypatch.setattr(stackfile, "REPO", tmp_path.parent)
    return tmp_path


def test_at_least_forty_cases_through_both_readers() -> None:
    assert sum(c.cli and c.file for c in CASES) >= 40


@pytest.mark.parametrize("case", [c for c in CASES if c.cli], ids=lambda c: c.name)
def test_bad_input_through_set(case: Case, stacks, capsys: pytest.CaptureFixture[str]) -> None:
    (stacks / "Pulumi.t.yaml").write_text(_file({}))
    _refused(case, ["--stack", "t", *_argv(case.values)], capsys)
    fixed = {k: v for k, v in {**case.values, **case.fixed}.items() if k not in BASE or v}
    _plans(["--stack", "t", *_argv(fixed)], capsys)


@pytest.mark.parametrize("case", [c for c in CASES if c.file], ids=lambda c: c.name)
def test_bad_input_through_a_stack_file(
    case: Case, stacks, capsys: pytest.CaptureFixture[str]
) -> None:
    (stacks / "Pulumi.bad.yaml").write_text(_file(case.values))
    _refused(case, ["--stack", "bad"], capsys)
    (stacks / "Pulumi.good.yaml").write_text(_file({**case.values, **case.fixed}))
    _plans(["--stack", "good"], capsys)


# Stack files that cannot be read as a stack at all: (case name, text, how the message starts).
UNREADABLE = [
    ("tab", _file({}).replace("  gemma-graviton:owner", "\tgemma-graviton:owner"), "`owner` "),
    ("non-mapping config", "config:\n  - gemma-graviton:owner: x\n", "`config` "),
    ("top-level list", "- config\n", "`--stack` "),
    ("duplicate key", _file({}) + "  gemma-graviton:owner: other\n", "`owner` "),
    ("syntax", _file({}).replace("[203.0.113.0/24]", "[203.0.113.0/24"), "`allowedCidrs` "),
    (
        "foreign namespace",
        _file({}) + "  aws:region: us-east-1\n",
        "`aws:region` is outside the gemma-graviton: namespace",
    ),
    ("oversized", _file({}) + "#" * 70_000 + "\n", "`--stack` "),
]


@pytest.mark.parametrize(
    ("text", "start"), [u[1:] for u in UNREADABLE], ids=[u[0] for u in UNREADABLE]
)
def test_unreadable_stack_file(text: str, start: str, stacks, capsys) -> None:
    (stacks / "Pulumi.bad.yaml").write_text(text)
    err = _one_line_error(["--stack", "bad"], capsys)
    assert err.startswith(f"error: {start}"), err
    (stacks / "Pulumi.good.yaml").write_text(_file({}))
    _plans(["--stack", "good"], capsys)


def test_not_utf8(stacks, capsys) -> None:
    (stacks / "Pulumi.bad.yaml").write_bytes(b"config:\n  gemma-graviton:owner: \xff\n")
    assert "not UTF-8" in _one_line_error(["--stack", "bad"], capsys)


@pytest.mark.parametrize(
    ("argv", "key"),
    [
        (["--need", "context=8192"], "--need"),
        (["--compare", "--need", "context=lots"], "--need"),
        (["--compare", "--need", "speed=3"], "--need"),
        (["--set", "owner"], "--set"),
    ],
)
def test_bad_command_lines(argv: list[str], key: str, capsys) -> None:
    err = _one_line_error(argv, capsys)
    assert err.startswith(f"error: `{key}` ")


@pytest.mark.parametrize("argv", [["--frobnicate"], ["--brief", "--json"]])
def test_a_flag_argparse_refuses_is_one_line(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
