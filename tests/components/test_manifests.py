"""The rendered Kubernetes objects: real schemas, the plan's flags, policy, and checkov."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import manifests
from components.manifests import programs
from components.manifests.pods import memory_quantity
from infra.adapters.cli import main
from infra.plan import catalog
from infra.plan.config import ConfigError
from infra.plan.stackfile import load_stack, stack_names
from policies.rules import parse_quantity
from tests import builders
from tests.fakes import k8s_schemas

REPO = Path(__file__).resolve().parents[2]
ACCEPTED = REPO / "tests" / "checkov-accepted.txt"


def _objects(stack: str = "dev", **overrides: Any) -> tuple[Any, Any, list[dict[str, Any]]]:
    region = builders.planned(stack)[0].region
    overrides = {
        k: v.format(region=region) if isinstance(v, str) else v for k, v in overrides.items()
    }
    return (*builders.planned(stack, overrides), builders.rendered(stack, overrides))


def _kind(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def _pod_specs(lws: dict[str, Any]) -> dict[str, dict[str, Any]]:
    template = lws["spec"]["leaderWorkerTemplate"]
    return {role: template[f"{role}Template"]["spec"] for role in ("leader", "worker")}


def _flags(args: list[str]) -> dict[str, str]:
    flags = {}
    for arg in args[2:]:
        key, _, value = arg.partition("=")
        flags[key] = value
    return flags


VARIANTS = [
    {},
    {"weightPrefetch": False},
    {"modelCache": "volume"},
    {"replicas": 2, "instanceType": "m7g.4xlarge"},
    {"tlsCertificateArn": "arn:aws:acm:{region}:123456789012:certificate/0a1b2c3d-aaaa-bbbb"},
    # One-rank groups of int8 and int4, with the quantize Job and its ConfigMap, and a named
    # checkpoint the ranks download.
    {"weights": "int8"},
    {"weights": "int4", "replicas": 2},
    {"weights": "int8", "weightsSource": "someone/gemma-w8a8@" + "0123456789" * 4},
]


@pytest.mark.parametrize("stack", stack_names())
@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: ",".join(o) or "defaults")
def test_objects_pass_the_real_schemas_and_requests_equal_limits(
    stack: str, overrides: dict[str, Any]
) -> None:
    if "replicas" in overrides and load_stack(stack).elastic:
        # An elastic stack's groups are `maxGroups`; it refuses `replicas`.
        overrides = {**overrides, "maxGroups": overrides["replicas"]}
        del overrides["replicas"]
    cfg, p, objects = _objects(stack, **overrides)
    for obj in objects:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        assert k8s_schemas.object_errors(obj, cfg.kubernetes_version) == [], name
    for role, pod in _pod_specs(_kind(objects, "LeaderWorkerSet")).items():
        for c in pod["containers"] + pod.get("initContainers", []):
            res = c["resources"]
            assert res["requests"] == res["limits"], (role, c["name"])
            expected = (
                {
                    "cpu": f"{catalog.GATEKEEPER_MILLICPU}m",
                    "memory": f"{catalog.GATEKEEPER_MEMORY_MIB}Mi",
                }
                if c["name"] == "gatekeeper"
                else {"cpu": str(p.pod_cpu), "memory": memory_quantity(p.pod_memory_gib)}
            )
            assert res["limits"] == expected, (role, c["name"])
            # Exactly the planned bytes: the plan's sixteenths of a GiB are whole MiB.
            memory = parse_quantity(res["limits"]["memory"])
            assert c["name"] == "gatekeeper" or memory == Fraction(p.pod_memory_gib) * 2**30


@pytest.mark.parametrize(
    ("gib", "written"),
    [(26, "26Gi"), (25.8125, "26432Mi"), (239.3125, "245056Mi"), (26.3, "26931Mi")],
)
def test_pod_memory_is_written_in_the_api_server_s_own_form(gib: float, written: str) -> None:
    # `:g` wrote 239.3125 as `239.312Gi`, which is not a whole number of bytes, and 25.8125 as
    # `25.8125Gi`, which a LeaderWorkerSet's webhook patch turns into `26432Mi`: a change on the
    # next preview. A value between MiB (a stack's own 26.3) rounds down.
    assert memory_quantity(gib) == written


def test_schema_check_catches_a_wrong_field() -> None:
    _, _, objects = _objects()
    lws = _kind(objects, "LeaderWorkerSet")
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Always"
    lws["spec"]["startupPolicy"] = "LeaderFirst"
    lws["spec"]["leaderWorkerTemplate"]["sizee"] = 2
    errors = "\n".join(k8s_schemas.lws_errors(lws))
    assert "restartPolicy" in errors and "LeaderFirst" in errors and "sizee" in errors
    svc = _kind(objects, "Service")
    svc["spec"]["loadBalancerSourceRange"] = ["0.0.0.0/0"]
    assert k8s_schemas.core_errors(svc, "1.34")


# The upstream CRD file (kubernetes-sigs/lws v0.10.0, charts/lws/crds) and the committed
# structure-only copy of its v1 schema, as canonical JSON. The copy is checked against the second
# hash on every checkout, and against the upstream file itself wherever ../shared is beside it.
UPSTREAM_CRD_SHA256 = "c5dcad8ed943e495490241f00b9a1b45d51203b6d484020db3636d5bf553568e"
STRUCTURE_SHA256 = "35820124ad89f96c1361e47ddf4f64f835c8b606fa6d4fb80e1b035cf3e871f6"


def _canonical_sha256(node: Any) -> str:
    canonical = json.dumps(node, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def test_committed_structure_copy_matches_the_upstream_crd() -> None:
    """Runs on every checkout: the copy is the one taken from upstream (an edit made to let a
    manifest pass changes its hash); where ../shared is beside the checkout, the upstream file is
    the pinned v0.10.0 and the copy is exactly its schema without descriptions."""
    copy = k8s_schemas.lws_schema_copy()
    assert _canonical_sha256(copy) == STRUCTURE_SHA256, (
        "tests/schemas/lws-v0.10.0-structure.json is not the copy taken from upstream; "
        "regenerate it from the upstream CRD with k8s_schemas.strip_descriptions"
    )
    if k8s_schemas.UPSTREAM_CRD.is_file():
        digest = hashlib.sha256(k8s_schemas.UPSTREAM_CRD.read_bytes()).hexdigest()
        assert digest == UPSTREAM_CRD_SHA256, f"{k8s_schemas.UPSTREAM_CRD} is not v0.10.0's CRD"
        upstream = k8s_schemas.upstream_schema()
        assert upstream is not None
        assert copy == k8s_schemas.strip_descriptions(upstream)


def test_command_lines_are_exactly_the_plan() -> None:
    cfg, p, objects = _objects()
    specs = _pod_specs(_kind(objects, "LeaderWorkerSet"))
    leader, worker = specs["leader"]["containers"][0], specs["worker"]["containers"][0]
    expected_common = {
        "--served-model-name": cfg.model,
        "--pipeline-parallel-size": str(p.stages),
        "--tensor-parallel-size": "1",
        "--nnodes": "$(LWS_GROUP_SIZE)",
        "--node-rank": "$(LWS_WORKER_INDEX)",
        "--master-addr": "$(LWS_LEADER_ADDRESS)",
        "--master-port": "29501",
        "--kv-cache-memory-bytes": str(p.kv_cache_bytes),
        "--max-model-len": str(p.max_model_len),
        "--max-num-batched-tokens": str(p.max_num_batched_tokens),
        "--dtype": "bfloat16",
        "-cc.mode": "2",
        "-cc.backend": "eager",
        "--limit-mm-per-prompt": '{"image":0,"audio":0,"video":0}',
        "--max-logprobs": str(p.front_door.max_logprobs),
    }
    # The engine's entry (`programs/engine.sh`, tests/components/test_programs.py) writes vLLM's
    # logging config into /tmp, starts the check process, then becomes vLLM (`exec`, PID 1).
    assert leader["command"][:3] == ["/bin/sh", "/opt/gemma-graviton/engine.sh", "leader"]
    assert leader["args"][:2] == ["serve", f"/models/{cfg.model}"]
    assert _flags(leader["args"]) == {
        **expected_common,
        "--override-generation-config": f'{{"max_new_tokens":{p.front_door.max_reply_tokens}}}',
        "--fingerprint-mode": "none",
        "--host": "127.0.0.1",
        "--port": "8000",
    }
    assert "ports" not in leader, "vLLM listens on loopback: only the gatekeeper has a port"
    # A worker's entry waits for its leader, then becomes vLLM with these args
    # (tests/components/test_programs.py).
    assert worker["command"][:3] == ["/bin/sh", "/opt/gemma-graviton/engine.sh", "worker"]
    assert worker["command"][-1] == "--" and worker["args"][:2] == leader["args"][:2]
    assert _flags(worker["args"]) == {**expected_common, "--headless": ""}
    assert worker["args"][-1] == "--headless"
    env = {e["name"]: e for e in leader["env"]}
    assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "gemma-api-key"
    assert "VLLM_API_KEY" not in {e["name"] for e in worker["env"]}


def test_volume_cache_uses_a_claim_per_rank() -> None:
    # The claim's and the class's other fields, and no `models` volume beside the claim:
    # tests/components/test_manifest_fields.py.
    _, p, objects = _objects(modelCache="volume")
    template = _kind(objects, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    (claim,) = template["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "models"
    assert claim["spec"]["resources"]["requests"]["storage"] == f"{p.model_volume_gib}Gi"
    assert claim["spec"]["storageClassName"] == "gemma-graviton-gp3"
    assert _kind(objects, "StorageClass")["metadata"]["name"] == "gemma-graviton-gp3"


def test_render_writes_one_file_per_object_and_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "dev"
    assert main(["--render", str(out)]) == 0
    files = sorted(out.glob("*.yaml"))
    assert len(files) == len(_objects()[2])
    text = "\n".join(f.read_text() for f in files)
    assert not re.search(r"hf_[A-Za-z0-9]{20,}", text)
    docs = [yaml.safe_load(f.read_text()) for f in files]
    assert [d["kind"] for d in docs] == [o["kind"] for o in _objects()[2]]
    # No applyable Secret with a known value: none is rendered; the note that says how to make
    # them is not a file `kubectl apply -f DIR` reads.
    assert "Secret" not in {d["kind"] for d in docs}
    names = {p.name for p in out.iterdir()}
    assert "SECRETS.txt" in names
    assert not [n for n in names if n.endswith((".yaml", ".yml", ".json")) and "secret" in n]
    assert (
        "kubectl -n gemma-graviton create secret generic gemma-api-key"
        in (out / "SECRETS.txt").read_text()
    )
    capsys.readouterr()


def _checkov() -> str:
    found = shutil.which("checkov") or str(REPO / ".venv-tools" / "bin" / "checkov")
    if not Path(found).exists():
        pytest.fail(
            "checkov is missing: python3 -m venv .venv-tools && "
            ".venv-tools/bin/pip install -r requirements-tools.txt (make test does this)"
        )
    return found


def _accepted() -> set[tuple[str, str]]:
    rows = set()
    for line in ACCEPTED.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            check, resource, reason = line.split("\t")
            assert reason.strip(), line
            rows.add((check, resource))
    return rows


def test_checkov_finds_nothing_unaccepted(tmp_path: Path) -> None:
    _, _, objects = _objects()
    for index, obj in enumerate(objects):
        (tmp_path / f"{index:02d}.yaml").write_text(yaml.safe_dump(obj))
    # checkov does not know the LWS kind; give it the pods LWS creates, labelled as LWS labels them.
    lws = _kind(objects, "LeaderWorkerSet")
    for role, index in (("leader", 0), ("worker", 1)):
        template = lws["spec"]["leaderWorkerTemplate"][f"{role}Template"]
        labels = {
            **template["metadata"]["labels"],
            manifests.LWS_NAME_LABEL: "gemma-vllm",
            "leaderworkerset.sigs.k8s.io/group-index": "0",
            manifests.LWS_WORKER_INDEX_LABEL: str(index),
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"gemma-vllm-{role}",
                "namespace": "gemma-graviton",
                "labels": labels,
            },
            "spec": template["spec"],
        }
        (tmp_path / f"pod-{role}.yaml").write_text(yaml.safe_dump(pod))
    result = subprocess.run(
        [_checkov(), "-d", str(tmp_path), "--framework", "kubernetes", "--output", "json",
         "--skip-download"],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    report = json.loads(result.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = {
        (c["check_id"], c["resource"])
        for r in reports
        for c in r.get("results", {}).get("failed_checks", [])
    }
    passed = sum(r["summary"]["passed"] for r in reports)
    assert passed > 50, "checkov evaluated almost nothing: the pods were not scanned"
    assert failed - _accepted() == set()
    assert _accepted() - failed == set(), "an accepted finding no longer occurs: drop it"


@pytest.mark.parametrize("stack", stack_names())
def test_liveness_and_startup_probes_are_what_the_plan_says(stack: str) -> None:
    cfg, p, objects = _objects(stack)
    live = p.liveness
    specs = _pod_specs(_kind(objects, "LeaderWorkerSet"))
    leader, worker = specs["leader"]["containers"][0], specs["worker"]["containers"][0]
    for container in (leader, worker):
        probe = container["livenessProbe"]
        assert (probe["periodSeconds"], probe["failureThreshold"], probe["timeoutSeconds"]) == (
            live.probes.period_s,
            live.probes.failures,
            live.probes.timeout_s,
        )
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == str(live.probes.stall_s)
    live_get = {"path": "/live", "port": manifests.probes.LIVENESS_PORT}
    assert leader["livenessProbe"]["httpGet"] == worker["livenessProbe"]["httpGet"] == live_get
    # The check process the probes ask: started by the engine's entry with the check's
    # arguments, before vLLM (`programs/engine.sh`); the leader's take its startup phase's too.
    command = leader["command"]
    assert command[:4] == ["/bin/sh", "/opt/gemma-graviton/engine.sh", "leader", "listen=8082"]
    assert command[-1] == "--"
    assert command[4:11] == [
        "role=leader",
        "port=8000",
        f"request-s={live.probes.request_s}",
        f"model={cfg.model}",
        f"stall-s={live.probes.stall_s}",
        "state=/tmp/gemma-liveness.json",
        # An idle pipeline is proven at most once per idle check, not once per period.
        f"idle-s={live.probes.idle_check_s}",
    ]
    assert "stop-pid=1" in command and f"path={cfg.prefill_path}" in command
    assert live.probes.idle_check_s == 60
    assert "/tmp" in {m["mountPath"] for m in leader["volumeMounts"]}
    lost_leader = worker["command"]
    assert lost_leader[:4] == ["/bin/sh", "/opt/gemma-graviton/engine.sh", "worker", "listen=8082"]
    assert lost_leader[4:-1] == [
        "role=worker",
        # Behind an elastic stack's door or with `vllm-key` the leader's vLLM is asked itself;
        # otherwise the leader's gatekeeper's probe listener.
        f"port={8000 if cfg.elastic or not cfg.gatekeeper else 8081}",
        f"request-s={live.probes.request_s}",
        "host-env=LWS_LEADER_ADDRESS",
        # A check ends before the kubelet gives up on it.
        f"timeout-s={live.probes.timeout_s - 1}",
    ]
    # The worker's liveness starts only after the leader first answered, within the startup budget.
    startup = worker["startupProbe"]
    assert startup["httpGet"] == live_get
    assert startup["periodSeconds"] * startup["failureThreshold"] == p.startup_timeout_seconds
    # Readiness is /health (through the gatekeeper; behind a door, the check process's /ready,
    # /health until the drain): traffic once every rank joined.
    path = "/ready" if cfg.elastic else "/health"
    assert leader["readinessProbe"]["httpGet"]["path"] == path
    # The leader's startup budget and the wait annotation follow the plan.
    lws = _kind(objects, "LeaderWorkerSet")
    annotations = lws["metadata"]["annotations"]
    assert annotations["pulumi.com/waitFor"] == "condition=Available"
    assert annotations["pulumi.com/timeoutSeconds"] == str(p.startup_timeout_seconds)
    probe = leader["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] == p.startup_timeout_seconds
    assert lws["spec"]["startupPolicy"] == "LeaderCreated"


def test_a_private_range_beside_public_ones_is_refused() -> None:
    with pytest.raises(ConfigError) as refused:
        _objects("dev", allowedCidrs=["10.0.0.0/8", "198.51.100.7/32"])
    assert refused.value.key == "allowedCidrs"
    assert "internet-facing load balancer sees clients' public addresses only" in str(refused.value)


# -- promises a single changed value would break quietly ------------------------------------------

# What the model's repository holds (google/gemma-4-12B-it), with sizes small enough to write.
REPOSITORY = {
    ".gitattributes": 1_570,
    "README.md": 25_000,
    "config.json": 4_800,
    "generation_config.json": 200,
    "model-00001-of-00003.safetensors": 3_000,
    "model-00002-of-00003.safetensors": 2_900,
    "model-00003-of-00003.safetensors": 1_100,
    "model.safetensors.index.json": 90_000,
    "chat_template.jinja": 12_000,
    "processor_config.json": 1_600,
    "special_tokens_map.json": 700,
    "tokenizer.json": 33_000,
    "tokenizer.model": 4_700,
    "tokenizer_config.json": 1_200_000,
}

# A stand-in for huggingface_hub: `snapshot_download` writes the files its patterns select (as
# the hub filters them, by fnmatch), plus the hub's own .cache bookkeeping; every byte read
# through `open` is counted per path and written out at exit. FAKE_FAILURES lists what the
# calls raise first, in order ("network", "revision"); `time.sleep` only records its pauses.
_FAKE_ERRORS = """
class RepositoryNotFoundError(Exception):
    pass


class GatedRepoError(RepositoryNotFoundError):
    pass


class RevisionNotFoundError(Exception):
    pass
"""
_FAKE_HUB = """
import atexit, builtins, fnmatch, json, os, time
from pathlib import Path

from huggingface_hub.errors import RevisionNotFoundError

REPOSITORY = json.loads(os.environ["FAKE_REPOSITORY"])
READ = {}
_open = builtins.open


class _Counted:
    def __init__(self, handle, path):
        self._handle, self._path = handle, path
    def read(self, size=-1):
        chunk = self._handle.read(size)
        READ[self._path] = READ.get(self._path, 0) + len(chunk)
        return chunk
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self._handle.close()


def _counting_open(path, mode="r", *args, **kwargs):
    handle = _open(path, mode, *args, **kwargs)
    return _Counted(handle, str(path)) if "b" in mode and "r" in mode else handle


builtins.open = _counting_open
atexit.register(lambda: Path(os.environ["FAKE_READ_LOG"]).write_text(json.dumps(READ)))
FAILURES = [f for f in os.environ.get("FAKE_FAILURES", "").split(",") if f]
time.sleep = lambda seconds: print(f"slept {seconds}")


def snapshot_download(repo_id, local_dir, allow_patterns=None, **kwargs):
    if FAILURES:
        failure = FAILURES.pop(0)
        if failure == "revision":
            raise RevisionNotFoundError(f"404 Client Error: revision {kwargs['revision']}")
        raise OSError("Connection reset by peer")
    target = Path(local_dir)
    for name, size in REPOSITORY.items():
        if allow_patterns is None or any(fnmatch.fnmatch(name, p) for p in allow_patterns):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(b"w" * size)
    (target / ".cache" / "huggingface").mkdir(parents=True, exist_ok=True)
    (target / ".cache" / "huggingface" / "download.lock").write_bytes(b"x" * 10)
    return str(target)
"""


def _run_prefetch(
    tmp_path: Path, init: dict[str, Any], model: str, failures: str = ""
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """The init container's command (`programs/prefetch.py`, the checkout's file) against the
    fake hub; (result, model dir, read log)."""
    import os
    import sys

    hub = tmp_path / "hub" / "huggingface_hub"
    hub.mkdir(parents=True, exist_ok=True)
    (hub / "__init__.py").write_text(_FAKE_HUB)
    (hub / "errors.py").write_text(_FAKE_ERRORS)
    target, log = tmp_path / "models" / model, tmp_path / "read.json"
    env = {e["name"]: e.get("value") for e in init["env"]}
    done = subprocess.run(
        programs.local(init["command"], sys.executable),
        env={
            **os.environ,
            **{name: value for name, value in env.items() if value is not None},
            "PYTHONPATH": str(tmp_path / "hub"),
            "MODEL_DIR": str(target),
            "FAKE_REPOSITORY": json.dumps(REPOSITORY),
            "FAKE_READ_LOG": str(log),
            "FAKE_FAILURES": failures,
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return done, target, log


def test_prefetch_downloads_and_reads_every_weight_file(tmp_path: Path) -> None:
    """The init container exists to put the weights' page cache outside the engine's cgroup: it
    must download the safetensors (not only the small files) and read every byte it downloaded."""
    cfg, _, objects = _objects()
    (init,) = _pod_specs(_kind(objects, "LeaderWorkerSet"))["leader"]["initContainers"]
    done, target, log = _run_prefetch(tmp_path, init, cfg.model)
    assert done.returncode == 0, done.stderr
    downloaded = {p.name for p in target.iterdir() if p.is_file()}
    weights = {n for n in REPOSITORY if n.endswith(".safetensors")}
    needed = weights | {
        "config.json",
        "generation_config.json",
        "model.safetensors.index.json",
        "tokenizer.json",
        "tokenizer.model",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "chat_template.jinja",
    }
    assert needed <= downloaded, needed - downloaded
    read = {Path(p).name: n for p, n in json.loads(log.read_text()).items()}
    assert read == {name: REPOSITORY[name] for name in downloaded}, "every downloaded byte is read"


def test_prefetch_retries_the_network_and_stops_at_a_commit_the_hub_does_not_have(
    tmp_path: Path,
) -> None:
    cfg, _, objects = _objects()
    (init,) = _pod_specs(_kind(objects, "LeaderWorkerSet"))["worker"]["initContainers"]
    flaky, _, _ = _run_prefetch(tmp_path / "flaky", init, cfg.model, "network,network")
    assert flaky.returncode == 0, flaky.stderr
    assert flaky.stdout.count("retrying in") == 2
    assert "slept 15" in flaky.stdout and "slept 30" in flaky.stdout
    missing, target, _ = _run_prefetch(tmp_path / "missing", init, cfg.model, "revision,network")
    assert missing.returncode == 1
    assert "retrying" not in missing.stdout and "slept" not in missing.stdout
    (line,) = missing.stderr.strip().splitlines()
    assert line.startswith(f"{cfg.model}@{cfg.revision} cannot be downloaded: ")
    assert "`modelRevision`" in line
    assert not target.exists() or not any(target.iterdir())


def test_load_balancer_keeps_the_client_address_and_private_clients_get_an_internal_one() -> None:
    # With `Cluster` the NLB's targets see node addresses, and the source ranges stop applying.
    for overrides in ({}, {"allowedCidrs": ["10.0.0.0/8"], "allowPlainHttp": False}):
        _, _, objects = _objects(**overrides)
        service = _kind(objects, "Service")
        assert service["spec"]["externalTrafficPolicy"] == "Local", overrides
    # The private clients' (the last); public ones get "false" (tests/program/test_tags.py).
    annotations = service["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-internal"] == "true"
