"""What every object is built from: the `ServerSpec`, the shared names and labels."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from components.manifests.drain import DrainSpec
from components.manifests.engine import EngineSpec
from components.manifests.probes import ProbeSpec

if TYPE_CHECKING:
    from components.manifests.door import DoorSpec
    from components.manifests.gatekeeper_conf import GatekeeperLimits

LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
#: On an autoscaled stack's leaders and its queue floor (`components.manifests.scaling`): the pods
#: whose `/metrics` KEDA's queue trigger sums, and nothing else. Not the LWS labels: the floor is
#: no group's pod, and the LWS controller and the metrics collector select by those.
QUEUE_SOURCE_LABEL = "gemma-graviton.dev/queue-source"
#: The model nodes' taint in an elastic stack: only the model pods tolerate it, so every other
#: pod runs on the always-on system nodes and an empty model node can be removed.
MODEL_TAINT = {"key": "gemma-graviton.dev/pool", "value": "model", "effect": "NoSchedule"}
#: The model nodes' taint in a cluster the stack does not own (`existingCluster`), valued with
#: the stack's name: the cluster's other pods cannot take the memory the plan gives the ranks
#: (their requests equal their limits, so one pod landing first leaves a rank Pending), and
#: another stack's model pods, which select the same pool label, stay off this stack's nodes.
STACK_TAINT_KEY = "gemma-graviton.dev/stack"


def stack_taint(stack: str) -> dict[str, str]:
    """The taint of `stack`'s model nodes in a cluster it does not own."""
    return {"key": STACK_TAINT_KEY, "value": stack, "effect": "NoSchedule"}


def toleration(taint: Mapping[str, str]) -> dict[str, str]:
    """The toleration of exactly `taint` (its key, value and effect)."""
    return {"operator": "Equal", **taint}


#: On the endpoint Service and the leaders' template with `frontDoor: vllm-key`: the policy
#: pack's sign that vLLM checks the key itself (policies/rules.py).
FRONT_DOOR_LABEL = "gemma-graviton.dev/front-door"
HF_TOKEN_KEY = "token"
API_KEY_KEY = "api-key"
#: The key vLLM checks and the gatekeeper sends it (never a client's).
ENGINE_KEY_KEY = "engine-key"
MODELS_MOUNT = "/models"
CACHE_MOUNT = "/cache"
HF_TOKEN_MOUNT = "/var/run/secrets/huggingface"
RUN_AS = 10001
#: The model pods' containers: one home, which the planner's pod accounting imports.
ENGINE_CONTAINER = "vllm"
PREFETCH_CONTAINER = "prefetch-weights"
GATEKEEPER_CONTAINER = "gatekeeper"
#: The gatekeeper's public port and its probe listener's (`probe_listen`: /health and /ready for
#: the kubelet and the group's workers only), which a worker's drain and probes name.
GATEKEEPER_PORT = 8080
GATEKEEPER_PROBE_PORT = 8081
#: A pod-template annotation that changes when the engine key changes, so `pulumi up` rolls the
#: leader pods (vLLM reads its key only at start).
KEY_ANNOTATION = "gemma-graviton.dev/api-key-fingerprint"
#: Characters of an acceptable key: RFC 6750's b64token. Anything else (quotes, spaces, `$`)
#: could change the meaning of the config line the key is written into. At least 32 of them:
#: the failed-key rate limit slows guessing, the length makes it hopeless. At most 256: the
#: gatekeeper reads a request's head into 1.5 KiB (`gatekeeper.conf.tmpl`), which the OpenAI SDK's
#: and Chromium's headers with a 256-character key fit (tests/components/test_gatekeeper_crowd.py)
#: and a ~480-character one does not.
KEY_ALPHABET = "A-Z a-z 0-9 . _ ~ + / = -"
KEY_MIN_CHARS, KEY_MAX_CHARS = 32, 256
KEY_SHAPE = re.compile(rf"[A-Za-z0-9._~+/=-]{{{KEY_MIN_CHARS},{KEY_MAX_CHARS}}}")
#: Slow key derivation for the rotation fingerprint, so a weak user-chosen key cannot be found
#: by hashing a word list against the (plain) pod annotation.
_FINGERPRINT_ROUNDS = 200_000
_FINGERPRINT_SALT = b"gemma-graviton api-key fingerprint"


def key_fingerprint(api_key: str) -> str:
    """A short, slow-to-invert digest of the key for the pod template: it changes with the key,
    so a new key rolls the leader pods, and does not reveal the key."""
    digest = hashlib.pbkdf2_hmac(
        "sha256", api_key.encode("utf-8"), _FINGERPRINT_SALT, _FINGERPRINT_ROUNDS
    )
    return digest[:8].hex()


def config_digest(files: dict[str, str] | str) -> str:
    """A short digest of a ConfigMap's files (or one text), for a pod-template annotation."""
    if isinstance(files, str):
        return hashlib.sha256(files.encode("utf-8")).hexdigest()[:16]
    joined = "".join(f"{name}\0{text}\0" for name, text in sorted(files.items()))
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16]


def pod_security_context() -> dict[str, Any]:
    """Every pod's own security context: the non-root user and group `RUN_AS` (volumes owned by
    that group) and the runtime's default seccomp profile."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "fsGroup": RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


Manifest = dict[str, Any]


@dataclass(frozen=True)
class EndpointLimits:
    """What every front door has (`infra.plan.vllm_key.plan_endpoint`): the load balancer's
    listener and the caps vLLM applies itself; `GatekeeperLimits` has these fields too."""

    #: HTTPS on 443 at the load balancer (an ACM certificate), else HTTP on 80.
    tls: bool
    listener_port: int
    #: vLLM's --max-logprobs and its generation config's max_new_tokens (`maxReplyTokens`).
    max_logprobs: int
    max_reply_tokens: int
    #: The first-byte bound plus the longest reply's decode, in seconds: the drain's and clients'.
    reply_timeout_seconds: float


@dataclass(frozen=True)
class ServerSpec:
    """Everything the model server's objects are built from."""

    #: Base name; every object's name derives from it.
    name: str
    namespace: str
    image: str
    #: Hugging Face repository id of the model.
    model: str
    stages: int
    replicas: int
    pod_memory_gib: float
    pod_cpu: int
    shm_gib: int
    kv_cache_bytes: int
    max_model_len: int
    max_num_batched_tokens: int
    #: Download and read the weights in an init container before the engine starts.
    weight_prefetch: bool
    #: Size of the per-rank model directory (emptyDir limit, or the EBS claim).
    model_volume_gib: int
    #: Keep the weights on a persistent volume claim per rank instead of the node's disk.
    persistent_models: bool
    #: Storage class of the per-rank claims (when `persistent_models`).
    storage_class: str | None
    startup_timeout_seconds: int
    #: Labels of the nodes the model pods must run on.
    node_selector: Mapping[str, str]
    #: The model node group's own labels, without the instance type: the nodes a fixed stack's
    #: load balancer targets, old and new alike while an `instanceType` change moves the groups.
    node_pool: Mapping[str, str]
    allowed_cidrs: Sequence[str]
    #: The caps vLLM applies itself (`max_reply_tokens` as its generation config,
    #: `max_logprobs`) and, with the gatekeeper, what it lets through to vLLM and the chat page.
    limits: EndpointLimits | GatekeeperLimits
    #: The gatekeeper container's CPU and memory (requests equal limits).
    gatekeeper_millicpu: int
    gatekeeper_memory_mib: int
    #: How a pod told to stop finishes its streams (`components.manifests.drain`).
    drain: DrainSpec
    #: ACM certificate for a TLS listener on 443; plain HTTP on 80 without it.
    tls_certificate_arn: str | None = None
    #: Every admitted client range is private (a VPN, peered VPCs): the NLB gets private
    #: addresses only, since an internet-facing one would see those clients' public egress.
    internal_load_balancer: bool = False
    #: vLLM's port on the leader's loopback; only the gatekeeper reaches it.
    port: int = 8000
    master_port: int = 29501
    #: Liveness bounds of the ranks (`components.manifests.probes`).
    probes: ProbeSpec = field(default_factory=ProbeSpec)
    #: Hub commit every rank downloads (None: the repository's `main`, unpinned).
    model_revision: str | None = None
    #: AWS tags for what AWS creates on the objects' behalf (the load balancer).
    aws_tags: Mapping[str, str] = field(default_factory=dict)
    #: KEDA owns the number of groups (the LeaderWorkerSet's scale subresource): the object
    #: leaves `replicas` unset.
    autoscaled: bool = False
    #: The model nodes' taint, which the pods that must run there tolerate (the ranks, the
    #: quantize Job, the load test): `MODEL_TAINT` on an elastic stack, `stack_taint` in a
    #: cluster the stack does not own; None where the model nodes are the cluster's only nodes.
    model_taint: Mapping[str, str] | None = None
    #: Weight format served (bf16, int8, int4); vLLM reads an int8 or int4 checkpoint's
    #: compressed-tensors config from the checkpoint itself.
    weights: str = "bf16"
    #: A compressed-tensors checkpoint the ranks download instead of `model` (`weightsSource`
    #: naming one), and its commit.
    checkpoint_repo: str | None = None
    checkpoint_revision: str | None = None
    #: The quantize Job writes the checkpoint to every rank's volume: the ranks only check it.
    produced_checkpoint: bool = False
    #: Surge groups of a rollout (LWS `maxSurge`; 0 rolls one group at a time in place).
    rollout_surge: int = 0
    #: An elastic stack's door; None keeps the gatekeeper in each leader pod (fixed stacks).
    door: DoorSpec | None = None
    #: Further `vllm serve` flags on every rank (`EngineSpec.extra_args`).
    engine_extra_args: tuple[str, ...] = ()
    #: What checks the API key: the gatekeeper, or vLLM itself (`vllm-key`: no nginx at all;
    #: the load balancer reaches vLLM's port and vLLM checks the client key).
    front_door: str = "gatekeeper"

    @property
    def vllm_key(self) -> bool:
        """vLLM checks the client key itself: no gatekeeper anywhere (`frontDoor: vllm-key`)."""
        return self.front_door == "vllm-key"

    @property
    def gatekeeper_in_pod(self) -> bool:
        """The leader pod runs the gatekeeper and vLLM listens on loopback behind it. Otherwise
        (an elastic stack's door, or `vllm-key`) vLLM listens on the pod network and the
        probes, the drain and the collector reach it on its own port."""
        return self.door is None and not self.vllm_key

    @property
    def lws_name(self) -> str:
        return f"{self.name}-vllm"

    @property
    def hf_secret_name(self) -> str:
        return f"{self.name}-hf-token"

    @property
    def api_key_secret_name(self) -> str:
        return f"{self.name}-api-key"

    @property
    def gatekeeper_config_name(self) -> str:
        return f"{self.name}-gatekeeper"

    @property
    def model_dir(self) -> str:
        """Where the ranks find the weights they load: `model`'s, a named checkpoint's, or the
        one the quantize Job made (beside where the bf16 would go, named by its format)."""
        if self.produced_checkpoint:
            return f"{MODELS_MOUNT}/{self.model}-{self.weights}"
        return f"{MODELS_MOUNT}/{self.checkpoint_repo or self.model}"

    @property
    def download_repo(self) -> tuple[str, str | None]:
        """The repository and commit a rank (or vLLM itself) downloads."""
        if self.checkpoint_repo is not None:
            return self.checkpoint_repo, self.checkpoint_revision
        return self.model, self.model_revision

    def engine(self) -> EngineSpec:
        local = self.weight_prefetch or self.produced_checkpoint
        repo, revision = self.download_repo
        return EngineSpec(
            model=self.model_dir if local else repo,
            served_model_name=self.model,
            pipeline_stages=self.stages,
            kv_cache_bytes=self.kv_cache_bytes,
            max_model_len=self.max_model_len,
            max_num_batched_tokens=self.max_num_batched_tokens,
            nnodes="$(LWS_GROUP_SIZE)",
            node_rank="$(LWS_WORKER_INDEX)",
            master_addr="$(LWS_LEADER_ADDRESS)",
            master_port=self.master_port,
            port=self.port,
            max_reply_tokens=self.limits.max_reply_tokens,
            max_logprobs=self.limits.max_logprobs,
            # A prefetched directory is already that commit; vLLM downloading itself needs it.
            revision=None if local else revision,
            # Behind a door or with `vllm-key`, vLLM is reached over the pod network (the
            # NetworkPolicy says from where); beside its gatekeeper, on loopback only.
            **({} if self.gatekeeper_in_pod else {"host": "0.0.0.0"}),
            extra_args=self.engine_extra_args,
            # With `vllm-key` no gatekeeper stops taking requests before vLLM does, and pooled
            # clients keep their connections through the load balancer's drain: vLLM drains
            # itself, the longest reply, on SIGTERM (`drain.engine_pre_stop`).
            shutdown_timeout_s=self.drain.reply_s if self.vllm_key else None,
        )


def object_labels(spec: ServerSpec, component: str) -> dict[str, str]:
    """The labels every object of the model server carries."""
    return {
        "app.kubernetes.io/name": spec.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "gemma-graviton",
    }


def leaders_selector(spec: ServerSpec) -> dict[str, str]:
    """Pods a client may reach: leaders only (worker index "0"); workers serve no HTTP."""
    return {LWS_NAME_LABEL: spec.lws_name, LWS_WORKER_INDEX_LABEL: "0"}


def object_meta(spec: ServerSpec, name: str, component: str, **extra: Any) -> dict[str, Any]:
    """Name, namespace and labels of a namespaced object, plus `extra` (annotations)."""
    return {
        "name": name,
        "namespace": spec.namespace,
        "labels": object_labels(spec, component),
        **extra,
    }
