"""The Pulumi program, run the way Pulumi's Python host runs it, under the recording mocks.

`runpy.run_path` on the `infra/` folder with that folder as the working directory and the
repository root NOT on the import path, with the stack's YAML loaded as Pulumi would pass it: a
program that would crash on `pulumi preview` (import paths included) fails here.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pulumi
import pytest

from components import manifests
from components.manifests import chat, gatekeeper, volumes
from components.manifests.spec import key_fingerprint
from infra.adapters import wiring
from infra.plan import elastic
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack, stack_names
from policies.rules import RULES
from tests import builders
from tests.fakes.pulumi_mocks import RecordingMocks, by_type, is_secret, named, one, resolve
from tests.program.harness import (
    HF_TOKEN,
    MODEL_NODES,
    MODEL_SERVICE,
    OWN_VALUES,
    run_program,
    shared_run,
    stacks_with,
)

pytestmark = pytest.mark.usefixtures("as_pulumi_host")

OUTPUTS = {
    "clusterName", "kubeconfig", "region", "availabilityZone", "nodeInstanceType", "nodeCount",
    "plan", "endpoint", "apiKey", "model", "maxModelLen", "kvCacheTokens", "curlExample",
    "namespace", "logGroup", "logsQuery", "lwsController", "dashboardUrl", "alarmTopic", "chatUrl",
    "apiKeyFingerprint", "apiKeyPreviousUntil", "rolloutSurgeNodes",
}  # fmt: skip
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
NODE_GROUP = "eks:index:ManagedNodeGroup"
DOOR_DEPLOYMENT = "model-deployment-gemma-door"


@pytest.mark.parametrize("stack", stack_names())
def test_every_stack_runs_end_to_end(stack: str) -> None:
    mocks, exports = shared_run(stack)
    cfg = load_stack(stack)
    # A layer's outputs exist only with its layer: the chat page's and monitoring's.
    layered = {
        "chatUrl": cfg.chat_page,
        "dashboardUrl": cfg.monitoring,
        "alarmTopic": cfg.monitoring,
    }
    assert set(exports) == OUTPUTS - {name for name, on in layered.items() if not on}
    expected = plan(load_stack(stack, OWN_VALUES[stack]), stack)
    node_group = named(mocks.records, *MODEL_NODES)
    assert node_group.inputs["instanceTypes"] == [expected.instance_type], node_group.urn
    scaling = node_group.inputs["scalingConfig"]
    # An elastic stack's model nodes run from none up to a fixed ceiling that no key moves.
    least, most = (
        (0, elastic.MODEL_NODES_CEILING)
        if load_stack(stack).elastic
        else (expected.nodes, expected.nodes + expected.rollout.surge_nodes)
    )
    assert scaling == {"minSize": least, "desiredSize": least, "maxSize": most}
    assert resolve(exports["nodeCount"]) == expected.nodes
    assert resolve(exports["plan"]) == expected.to_json()
    assert resolve(exports["endpoint"]).endswith("/v1")
    scheme = "https" if load_stack(stack).tls_certificate_arn else "http"
    assert resolve(exports["endpoint"]).startswith(f"{scheme}://")
    if cfg.chat_page:
        assert resolve(exports["chatUrl"]) == resolve(exports["endpoint"]).removesuffix("v1")
    for secret in ("kubeconfig", "apiKey"):
        assert is_secret(exports[secret]), secret
    for plain in ("endpoint", "plan", "curlExample", "model"):
        assert not is_secret(exports[plain]), plain
    assert "--show-secrets apiKey" in resolve(exports["curlExample"])
    api_key = resolve(exports["apiKey"])
    for name, value in exports.items():
        if not is_secret(value):
            text = json.dumps(resolve(value), default=str)
            assert HF_TOKEN not in text and api_key not in text, name
    assert resolve(exports["kvCacheTokens"]) == expected.kv_cache_tokens


@pytest.mark.parametrize(("instance_type", "nodes"), [("m7g.2xlarge", 2), ("m7g.4xlarge", 1)])
def test_node_size_override_flows_into_the_node_group_and_the_pods(
    instance_type: str, nodes: int
) -> None:
    mocks, _ = shared_run("dev", {"instanceType": instance_type})
    expected = plan(load_stack("dev", {"instanceType": instance_type}), "dev")
    node_group = one(mocks.records, NODE_GROUP)
    assert node_group.inputs["instanceTypes"] == [instance_type]
    assert node_group.inputs["scalingConfig"]["desiredSize"] == expected.nodes == nodes
    template = one(mocks.records, "aws:ec2/launchTemplate:LaunchTemplate")
    (device,) = template.inputs["blockDeviceMappings"]
    assert device["ebs"]["volumeSize"] == expected.node_disk_gib, template.urn
    lws = one(mocks.records, LWS)
    group = lws.inputs["spec"]["leaderWorkerTemplate"]
    assert group["size"] == nodes
    # `instance_types` is ForceNew on aws_eks_node_group (hashicorp/terraform-provider-aws
    # internal/service/eks/node_group.go, commit 012e0a32 read 2026-12-03): a new type is a second
    # node group beside the old one until Pulumi deletes the old one last. Only a selector on the
    # type changes the pod template with it and keeps a restarted group off the old nodes; the
    # Cluster Autoscaler's template node of a group at 0 nodes carries the label
    # (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/aws_manager.go
    # `buildGenericLabels`, master at 00a2c93).
    for role in ("leaderTemplate", "workerTemplate"):
        assert group[role]["spec"]["nodeSelector"] == {
            "gemma-graviton.dev/pool": "model",
            "node.kubernetes.io/instance-type": instance_type,
        }, (lws.urn, role)


@pytest.mark.parametrize(
    ("overrides", "hf", "message"),
    [
        (
            {"instanceType": "m7g.large"},
            True,
            "`instanceType` m7g.large leaves no whole CPU for a model pod after its other "
            "tenants; choose r7g.2xlarge, the cheapest type that starts this stack "
            "($475.30/month; `--compare` ranks them all)",
        ),
        (
            {},
            False,
            "`hfToken` is required to download the model (a gated model); run `pulumi config "
            "set --secret hfToken <token with the licence accepted>`",
        ),
        (
            {"vllmExtraArgs": ["--enable-prefix-caching", "--max-model-len", "4096"]},
            True,
            "`vllmExtraArgs` holds --max-model-len, which sets what the plan sets itself "
            "(--max-model-len=8192); remove it; the plan derives that flag from the stack's "
            "keys (docs/planning.md)",
        ),
        (
            {"hfToken": HF_TOKEN},
            False,
            "`hfToken` is a secret but is stored in plain text; run `pulumi config set --secret "
            "hfToken <value>` and remove the plain value",
        ),
    ],
)
def test_refusal_is_a_run_error_and_creates_nothing(
    mocks: RecordingMocks, overrides: dict[str, Any], hf: bool, message: str
) -> None:
    with pytest.raises(pulumi.RunError) as error:
        run_program(mocks, "dev", overrides, hf=hf)
    assert str(error.value) == message
    assert mocks.records == []


def test_workload_policy() -> None:
    mocks, _ = shared_run("dev")
    expected = plan(load_stack("dev"), "dev")
    lws = one(mocks.records, LWS)
    template = lws.inputs["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod = template[role]["spec"]
        # Requests equal limits in every container: test_model_pods.py, on every stack.
        for container in pod["containers"] + pod.get("initContainers", []):
            image = (
                gatekeeper.IMAGE
                if container["name"] == "gatekeeper"
                else OWN_VALUES["dev"]["vllmImage"]
            )
            assert container["image"] == image, (lws.urn, role, container["name"])
        term = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term[0]["topologyKey"] == "kubernetes.io/hostname", lws.urn
    leader_args = template["leaderTemplate"]["spec"]["containers"][0]["args"]
    assert f"--kv-cache-memory-bytes={expected.kv_cache_bytes}" in leader_args
    assert f"--max-model-len={expected.max_model_len}" in leader_args
    assert f"--max-num-batched-tokens={expected.max_num_batched_tokens}" in leader_args
    annotations = lws.inputs["metadata"]["annotations"]
    assert annotations["pulumi.com/waitFor"] == "condition=Available"
    assert annotations["pulumi.com/timeoutSeconds"] == str(expected.startup_timeout_seconds)

    svc = one(mocks.records, "kubernetes:core/v1:Service")
    assert svc.inputs["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    assert svc.inputs["spec"]["loadBalancerSourceRanges"] == OWN_VALUES["dev"]["allowedCidrs"]

    secrets = by_type(mocks.records, "kubernetes:core/v1:Secret")
    assert len(secrets) == 2
    for secret in secrets:
        assert "stringData" in secret.secret_inputs, secret.urn


def test_lws_waits_for_the_controller_and_uses_the_cluster_provider() -> None:
    mocks, _ = shared_run("dev")
    lws = one(mocks.records, LWS)
    chart = one(mocks.records, "kubernetes:helm.sh/v4:Chart")
    assert chart.inputs["chart"] == "oci://registry.k8s.io/lws/charts/lws"
    assert chart.inputs["version"] == "0.10.0"
    assert chart.parent is not None and "LwsController" in chart.parent
    depends = mocks.monitor.dependencies[lws.urn]
    assert chart.urn in depends, (lws.urn, depends)
    k8s_provider = one(mocks.records, "pulumi:providers:kubernetes")
    for record in mocks.records:
        if record.type_.startswith("kubernetes:") and record.custom:
            assert record.provider and record.provider.startswith(k8s_provider.urn), record.urn


def test_logging_addon_and_volume_cache() -> None:
    mocks, exports = shared_run("dev", {"modelCache": "volume"})
    # The add-ons with the volume cache, CSI driver included: test_order.py, on every stack.
    # Each add-on's controller has its own role through EKS Pod Identity, effective before it:
    # test_iam_scope.py holds each association to its role, test_pod_identity_waits.py each add-on
    # to its association's wait, tests/components/test_addons.py to no IRSA role.
    sc = one(mocks.records, "kubernetes:storage.k8s.io/v1:StorageClass")
    rendered = volumes.storage_class(
        wiring.STORAGE_CLASS,
        wiring.STORAGE_THROUGHPUT_MIBPS,
        wiring.stack_tags(load_stack("dev", {"modelCache": "volume"}), "dev"),
    )
    for key in ("provisioner", "parameters", "volumeBindingMode", "reclaimPolicy"):
        assert sc.inputs[key] == rendered[key], (sc.urn, key)
    assert sc.inputs["provisioner"] == "ebs.csi.aws.com"
    assert sc.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    lws = one(mocks.records, LWS)
    (claim,) = lws.inputs["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == sc.inputs["metadata"]["name"]
    assert sc.urn in mocks.monitor.dependencies[lws.urn], lws.urn
    assert "logsQuery" in exports and "gemma-graviton" in resolve(exports["logsQuery"])
    cached = plan(load_stack("dev", {"modelCache": "volume"}), "dev")
    assert cached.warm_restart_seconds < plan(load_stack("dev"), "dev").warm_restart_seconds


def test_without_volume_cache_no_csi_driver() -> None:
    mocks, _ = shared_run("dev")
    addons = {r.inputs["addonName"] for r in by_type(mocks.records, "aws:eks/addon:Addon")}
    assert addons == {"amazon-cloudwatch-observability", "coredns", "eks-pod-identity-agent"}
    assert by_type(mocks.records, "kubernetes:storage.k8s.io/v1:StorageClass") == []


@pytest.mark.parametrize("stack", stack_names())
def test_stacks_pass_every_policy(stack: str) -> None:
    mocks, _ = shared_run(stack)
    violations = [
        (rule.name, record.urn, message)
        for record in mocks.records
        if record.custom
        for rule in RULES
        for message in rule.validate(record.type_, record.inputs)
    ]
    assert violations == []


def _leader(mocks: RecordingMocks) -> dict[str, Any]:
    return one(mocks.records, LWS).inputs["spec"]["leaderWorkerTemplate"]["leaderTemplate"]


def test_a_zone_without_the_instance_type_stops_before_anything_is_built(
    mocks: RecordingMocks,
) -> None:
    # In this account us-west-2a is usw2-az2; the offerings answer leaves m7g out of it.
    mocks.zones_without_offerings = {"usw2-az2"}
    with pytest.raises(pulumi.RunError) as error:
        run_program(mocks, "dev", {"availabilityZone": "us-west-2a"})
    assert str(error.value) == (
        "`availabilityZone` us-west-2a (usw2-az2) does not offer m7g.2xlarge; choose a zone that "
        "does (us-west-2b, us-west-2c, us-west-2d), or another `instanceType`"
    )
    # Only the AWS provider the lookups went through is registered: it creates nothing.
    assert [r.type_ for r in mocks.records] == ["pulumi:providers:aws"]
    tokens = {call.token for call in mocks.calls}
    assert "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings" in tokens


def test_zones_may_be_named_by_id_and_the_second_zone_is_one_eks_accepts(
    mocks: RecordingMocks, exports: dict[str, Any]
) -> None:
    run_program(mocks, "prod", {"availabilityZone": "use1-az6"})
    subnets = by_type(mocks.records, "aws:ec2/subnet:Subnet")
    zones = {s.inputs["availabilityZone"] for s in subnets}
    # use1-az6 is us-east-1c here; us-east-1a is use1-az3, where EKS refuses control planes.
    assert zones == {"us-east-1c", "us-east-1b"}, zones
    assert resolve(exports["availabilityZone"]) == "us-east-1c"


@pytest.mark.parametrize("stack", stacks_with("gatekeeper"))
def test_only_the_gatekeeper_is_exposed(stack: str) -> None:
    mocks, _ = shared_run(stack)
    tls = load_stack(stack).tls_certificate_arn is not None
    svc = named(mocks.records, *MODEL_SERVICE)
    (port,) = svc.inputs["spec"]["ports"]
    assert port["targetPort"] == "gatekeeper", svc.urn
    assert port["port"] == (443 if tls else 80), svc.urn
    annotations = svc.inputs["metadata"]["annotations"]
    assert ("service.beta.kubernetes.io/aws-load-balancer-ssl-cert" in annotations) == tls
    leader = _leader(mocks)["spec"]
    if load_stack(stack).elastic:
        # Elastic: the gatekeeper is the always-on door, apart from the group
        # (tests/components/test_door.py); vLLM admits the door alone (NetworkPolicy).
        (vllm,) = leader["containers"]
        assert "ports" not in vllm, svc.urn
        deployment = named(mocks.records, "kubernetes:apps/v1:Deployment", DOOR_DEPLOYMENT)
        (door,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
        assert svc.inputs["spec"]["selector"]["app.kubernetes.io/component"] == "door"
    else:
        vllm, door = leader["containers"]
        assert "--host=127.0.0.1" in vllm["args"] and "ports" not in vllm, svc.urn
        # The gatekeeper's probe listener by number: vllm declares no ports, and a named probe
        # port resolves only in the probed container (kubernetes v1.35 pkg/probe/util.go
        # findPortByName).
        assert vllm["readinessProbe"]["httpGet"] == {
            "path": "/health",
            "port": gatekeeper.PROBE_PORT,
        }
        policy = one(mocks.records, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
        assert {"ports": [{"port": gatekeeper.PORT, "protocol": "TCP"}]} in policy.inputs["spec"][
            "ingress"
        ]
    assert door["name"] == "gatekeeper" and door["image"] == gatekeeper.IMAGE
    assert door["resources"]["requests"] == door["resources"]["limits"]
    config = named(mocks.records, "kubernetes:core/v1:ConfigMap", "model-gatekeeper")
    assert "location = /v1/chat/completions" in config.inputs["data"]["nginx.conf"]


def test_the_gatekeeper_serves_the_chat_page_from_its_config_map(
    mocks: RecordingMocks, exports: dict[str, Any]
) -> None:
    dev, _ = shared_run("dev")
    expected = builders.planned_spec()
    config = named(dev.records, "kubernetes:core/v1:ConfigMap", "model-gatekeeper")
    data = config.inputs["data"]
    page = chat.ChatPage(expected.model, expected.limits.max_reply_tokens, expected.max_model_len)
    assert data == {
        "nginx.conf": data["nginx.conf"],
        "gatekeeper.js": data["gatekeeper.js"],
        **chat.files(page),
    }, config.urn
    served = re.findall(r"location = (\S+) \{\n.*\n +root (\S+);", data["nginx.conf"])
    assert served == [(path, gatekeeper.CONFIG_MOUNT) for path in chat.ROUTES]
    # The same bytes render and program: the pods roll when the page changes.
    digest = gatekeeper.config_digest(data)
    assert _leader(dev)["metadata"]["annotations"][gatekeeper.CONFIG_ANNOTATION] == digest

    run_program(mocks, "dev", overrides={"chatPage": False})
    config = named(mocks.records, "kubernetes:core/v1:ConfigMap", "model-gatekeeper")
    assert sorted(config.inputs["data"]) == ["gatekeeper.js", "nginx.conf"]
    assert "location = / {" not in config.inputs["data"]["nginx.conf"]
    assert "chatUrl" not in exports
    files = set(chat.files(page))
    minimal = shared_run("minimal")[0].records  # every layer off: none of the page either
    assert not [r.urn for r in minimal if files & set(r.inputs.get("data") or ())]


def test_a_new_key_changes_the_secret_only_and_stays_out_of_plain_values(
    mocks: RecordingMocks, exports: dict[str, Any]
) -> None:
    first, second = "k" * 40, "n" * 40
    run_program(mocks, "dev", api_key=first)
    lws_before = one(mocks.records, LWS).inputs
    secret = named(mocks.records, "kubernetes:core/v1:Secret", "model-api-key")
    assert "stringData" in secret.secret_inputs, secret.urn
    data = secret.inputs["stringData"]
    assert data["api-keys.json"] == gatekeeper.key_file_text(first)
    # vLLM checks the generated engine key; the leader template carries its fingerprint.
    engine = data["engine-key"]
    assert data["engine.map"] == f'default "Bearer {engine}";\n'
    assert engine != first
    leader = lws_before["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert leader["metadata"]["annotations"][gatekeeper.KEY_ANNOTATION] == (key_fingerprint(engine))
    assert resolve(exports["apiKeyFingerprint"]) == key_fingerprint(first)
    assert not is_secret(exports["apiKeyFingerprint"])
    lws_text = json.dumps(lws_before, default=str)
    assert first not in lws_text

    mocks.records.clear()
    exports.clear()
    run_program(mocks, "dev", api_key=second)
    # The same pod templates: a new key rolls no pod (the gatekeeper re-reads its key file).
    assert one(mocks.records, LWS).inputs == lws_before
    secret = named(mocks.records, "kubernetes:core/v1:Secret", "model-api-key")
    assert secret.inputs["stringData"]["api-keys.json"] == gatekeeper.key_file_text(second)
    assert resolve(exports["apiKeyFingerprint"]) == key_fingerprint(second)
    assert resolve(exports["apiKeyPreviousUntil"]) == "none"
    assert not is_secret(exports["plan"])


def test_a_rotation_accepts_the_previous_key_until_its_end_and_says_so(
    mocks: RecordingMocks, exports: dict[str, Any]
) -> None:
    old, new = "o" * 40, "n" * 40
    until = "2026-12-09T00:00:00Z"
    run_program(mocks, "dev", {"apiKeyOverlapUntil": until}, api_key=new, previous_key=old)
    secret = named(mocks.records, "kubernetes:core/v1:Secret", "model-api-key")
    keys = json.loads(secret.inputs["stringData"]["api-keys.json"])["keys"]
    assert keys == [{"key": new, "until": None}, {"key": old, "until": 1_796_774_400}]
    assert resolve(exports["apiKeyPreviousUntil"]) == until
    assert resolve(exports["apiKeyFingerprint"]) == key_fingerprint(new)
    for name, value in exports.items():
        if not is_secret(value):
            assert old not in json.dumps(resolve(value), default=str), name


def test_curl_example_quotes_every_value() -> None:
    _, exports = shared_run("prod")
    text = resolve(exports["curlExample"])
    words = shlex.split(text.replace("$(pulumi stack output --show-secrets apiKey)", "KEY"))
    assert words[0:2] == ["curl", "-sN"]
    assert words[2].startswith("https://") and words[2].endswith("/v1/chat/completions")
    body = json.loads(words[words.index("-d") + 1])
    assert body["model"] == "google/gemma-4-12B-it" and body["stream"] is True


@pytest.mark.parametrize("stack", stack_names())
def test_the_configured_principals_can_use_kubectl(stack: str) -> None:
    mocks, _ = shared_run(stack)
    cfg = load_stack(stack, OWN_VALUES[stack])
    policies = {
        r.inputs["principalArn"]: r.inputs["policyArn"].rsplit("/", 1)[-1]
        for r in by_type(mocks.records, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    }
    assert policies == {
        **dict.fromkeys(cfg.cluster_admin_arns, "AmazonEKSClusterAdminPolicy"),
        **dict.fromkeys(cfg.cluster_viewer_arns, "AmazonEKSAdminViewPolicy"),
    }
    assert cfg.cluster_admin_arns, f"stack {stack} names no cluster admin"
    entries = {
        r.inputs["principalArn"] for r in by_type(mocks.records, "aws:eks/accessEntry:AccessEntry")
    }
    assert entries == set(policies)
    eks_cluster = one(mocks.records, "eks:index:Cluster")
    assert eks_cluster.inputs["publicAccessCidrs"] == [
        str(c) for c in cfg.endpoint_public_access_cidrs
    ]


def test_policy_arns_follow_the_partition(
    mocks: RecordingMocks, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes import pulumi_mocks

    gov = {"id": "aws-us-gov", "partition": "aws-us-gov", "dnsSuffix": "amazonaws.com"}
    monkeypatch.setitem(pulumi_mocks._INVOKES, "aws:index/getPartition:getPartition", lambda _: gov)
    run_program(mocks, "dev", {"modelCache": "volume"})
    arns = [
        r.inputs["policyArn"]
        for r in by_type(mocks.records, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    ]
    assert arns
    assert all(arn.startswith("arn:aws-us-gov:") for arn in arns), arns


def test_the_program_drains_rolls_and_keeps_a_group_serving(
    mocks: RecordingMocks, exports: dict[str, Any]
) -> None:
    run_program(mocks, "dev", {"replicas": 2})
    expected = plan(load_stack("dev", {**OWN_VALUES["dev"], "replicas": 2}), "dev")
    spec = one(mocks.records, LWS).inputs["spec"]
    # A fixed node group cannot surge: one group at a time, the other serving.
    assert spec["rolloutStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1},
    }
    for role in ("leaderTemplate", "workerTemplate"):
        pod = spec["leaderWorkerTemplate"][role]["spec"]
        assert pod["terminationGracePeriodSeconds"] == expected.drain.grace_s
        assert pod["terminationGracePeriodSeconds"] >= expected.front_door.reply_timeout_seconds
        for container in pod["containers"]:
            assert "preStop" in container["lifecycle"], (role, container["name"])
    budget = one(mocks.records, "kubernetes:policy/v1:PodDisruptionBudget")
    assert budget.inputs["spec"]["maxUnavailable"] == 1
    assert budget.inputs["spec"]["selector"] == {
        "matchLabels": {manifests.LWS_NAME_LABEL: "gemma-vllm"}
    }
    assert resolve(exports["rolloutSurgeNodes"]) == 0
    assert not by_type(shared_run("dev")[0].records, "kubernetes:policy/v1:PodDisruptionBudget")
