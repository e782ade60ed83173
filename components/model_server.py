"""The vLLM group and its endpoint: the objects of `components.manifests`, applied through the
cluster's provider, plus the API key the endpoint's gatekeeper requires."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components import manifests
from components.balancer import drain_attributes
from components.manifests import ServerSpec
from components.manifests.spec import KEY_ANNOTATION, key_fingerprint
from components.objects import create

if TYPE_CHECKING:
    from components.manifests.quantize import QuantizeSpec


@dataclass(frozen=True)
class ModelServerArgs:
    """What the model server is built from."""

    #: The group as planned: sizes, flags, names (see `ServerSpec`).
    spec: ServerSpec
    #: Hugging Face token with the model's licence accepted (a secret).
    hf_token: pulumi.Input[str]
    #: The LWS controller install; its webhooks must serve before a LeaderWorkerSet is created.
    lws_controller: pulumi.Resource
    #: The stack's region, where the load balancer's target groups are set (`components.balancer`).
    region: str
    #: What provides `spec.storage_class` (the CSI driver and class), when weights persist.
    storage: pulumi.Resource | None = None
    #: Claim name -> the PersistentVolume made for it (`ModelVolumes.volume_names`); a claim
    #: named here binds to that volume only.
    volume_names: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    #: API key clients must send; `None` generates one that stays stable across updates.
    api_key: pulumi.Input[str] | None = None
    #: The one-time Job that writes an int8 or int4 checkpoint to the weights volumes before the
    #: group exists (`components.manifests.quantize`); None: the group downloads its weights.
    quantize: QuantizeSpec | None = None
    #: During a rotation, the key that stays accepted until `api_key_overlap_until` (a secret).
    api_key_previous: pulumi.Input[str] | None = None
    #: When the previous key stops being accepted (UTC); the gatekeeper compares by time.
    api_key_overlap_until: dt.datetime | None = None
    #: The node group. The group's pods need it, and on destroy the Service (whose NLB and
    #: security-group rules the cloud controller removes) and the group (whose volume claims the
    #: CSI controller on those nodes releases) must be gone before the nodes are.
    nodes: pulumi.Resource | None = None


class ModelServer(pulumi.ComponentResource):
    """A LeaderWorkerSet of vLLM ranks behind a leaders-only LoadBalancer Service.

    Pass the cluster's `k8s.Provider` in `opts.providers`.
    """

    endpoint: pulumi.Output[str]
    """Base URL of the OpenAI-compatible API (ends in /v1)."""
    api_key: pulumi.Output[str]
    """The key clients send as a bearer token (secret)."""
    api_key_fingerprint: pulumi.Output[str]
    """Which key is current: `key_fingerprint` of it (not secret, never the key)."""
    api_key_previous_until: pulumi.Output[str]
    """When the previous key stops being accepted (RFC 3339), or "none" without a rotation."""
    served_model: pulumi.Output[str]
    """Model name clients ask for."""
    max_model_len: pulumi.Output[int]
    """Longest request in tokens."""
    namespace: pulumi.Output[str]
    """Namespace of the group's pods (for `kubectl logs`)."""
    load_balancer_hostname: pulumi.Output[str]
    """DNS name of the load balancer (its CloudWatch dimension derives from it)."""

    def __init__(
        self, name: str, args: ModelServerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma-graviton:model:ModelServer", name, None, opts)
        spec = args.spec
        child = pulumi.ResourceOptions(parent=self)

        # The key given in the args, or a generated one that stays stable across updates.
        api_key = (
            random.RandomPassword(f"{name}-api-key", length=48, special=False, opts=child).result
            if args.api_key is None
            else pulumi.Output.secret(args.api_key)
        )
        # The key vLLM checks, sent by the gatekeeper: generated once, stable across updates
        # and rotations of the client keys.
        engine_key = random.RandomPassword(
            f"{name}-engine-key", length=48, special=False, opts=child
        ).result
        hf_token = pulumi.Output.secret(args.hf_token)

        ns_obj = manifests.namespace(spec)
        ns = k8s.core.v1.Namespace(f"{name}-ns", metadata=ns_obj["metadata"], opts=child)
        in_ns = ns.metadata.name

        token = manifests.secret(spec, "hf-token", "")
        token["stringData"] = {key: hf_token for key in token["stringData"]}
        secrets = [
            create(token, f"{name}-hf-token", in_ns, parent=self),
            _key_secret(name, args, api_key, engine_key, in_ns, self),
        ]

        create(manifests.network_policy(spec), f"{name}-netpol", in_ns, parent=self)
        # With `vllm-key` no gatekeeper runs, so it has no config.
        configs = []
        if not spec.vllm_key:
            from components.manifests import gatekeeper_map  # the gatekeeper layer

            door = gatekeeper_map.config_map(spec)
            configs.append(create(door, f"{name}-gatekeeper", in_ns, parent=self))
        # Immutable. A new digest is a new name: the old ConfigMap stays for the groups a rollout
        # has not reached yet (`pods.programs_config`).
        ran = manifests.programs_config(spec)
        programs = create(ran, f"{name}-programs", in_ns, parent=self, retain_on_delete=True)

        # The class names the CSI driver; on destroy the claims (and so the volumes) go before
        # the class, the driver and the nodes.
        claims = [
            create(
                {**obj, "spec": _bound(obj, args.volume_names)},
                f"{name}-{obj['metadata']['name']}",
                in_ns,
                parent=self,
                depends_on=[*([args.storage] if args.storage else []), *_nodes(args)],
            )
            for obj in manifests.model_claims(spec)
        ]
        made: list[pulumi.Resource] = []
        if args.quantize is not None:
            from components.quantize import quantize_job  # the quantize layer

            needs = [secrets[0], *claims, *_nodes(args)]
            made = quantize_job(name, spec, args.quantize, in_ns, needs, self)
        # Not secret: a slow, truncated digest (`key_fingerprint`), made once. Left
        # secret, it would hide the whole LeaderWorkerSet spec from every preview.
        # The key vLLM checks: the engine key behind the gatekeeper, the client key itself with
        # `vllm-key` (then a new client key rolls the group: vLLM reads its key at start).
        checked = api_key if spec.vllm_key else engine_key
        engine_print = pulumi.Output.unsecret(checked.apply(key_fingerprint))
        group = self._group(
            name, args, in_ns, [*secrets, *configs, programs, *claims, *made], engine_print
        )
        budget = manifests.pod_disruption_budget(spec)
        if budget is not None:
            create(budget, f"{name}-pdb", in_ns, parent=self)

        if spec.door:
            from components.autoscaling import door  # the elastic layer

            door(name, spec, in_ns, [*secrets, *configs], engine_print, self)

        # Destroyed before the nodes and the cluster: pulumi-kubernetes deletes in the
        # foreground and waits until the object is gone, so the cloud controller has removed the
        # NLB (and its finalizer) before the VPC's deletion starts.
        svc = create(
            manifests.service(spec), f"{name}-svc", in_ns, parent=self, depends_on=_nodes(args)
        )

        self.load_balancer_hostname = _hostname(svc)
        drain_attributes(name, svc, self.load_balancer_hostname, spec.drain, args.region, self)
        self.endpoint = _endpoint(spec, self.load_balancer_hostname, group)
        self.api_key = pulumi.Output.secret(api_key)
        self.api_key_fingerprint = pulumi.Output.unsecret(api_key.apply(key_fingerprint))
        until = args.api_key_overlap_until
        self.api_key_previous_until = pulumi.Output.from_input(
            until.isoformat().replace("+00:00", "Z") if until is not None else "none"
        )
        self.served_model = pulumi.Output.from_input(spec.model)
        self.max_model_len = pulumi.Output.from_input(spec.max_model_len)
        self.namespace = ns.metadata.name
        self.register_outputs(
            {
                "endpoint": self.endpoint,
                "apiKey": self.api_key,
                "apiKeyFingerprint": self.api_key_fingerprint,
                "apiKeyPreviousUntil": self.api_key_previous_until,
                "servedModel": self.served_model,
                "maxModelLen": self.max_model_len,
                "namespace": self.namespace,
            }
        )

    def _group(
        self,
        name: str,
        args: ModelServerArgs,
        in_ns: pulumi.Output[str],
        needs: list[pulumi.Resource],
        engine_print: pulumi.Output[str],
    ) -> k8s.apiextensions.CustomResource:
        """The LeaderWorkerSet, created once its controller, secrets, gatekeeper config, claims
        and storage exist. The leader template carries the engine key's fingerprint, so a new
        engine key rolls the group (vLLM and nginx read it only when they start); the client
        keys are re-read by the gatekeeper and roll nothing."""
        lws = manifests.leader_worker_set(args.spec, key_fingerprint="")
        leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
        annotations = leader["metadata"].setdefault("annotations", {})
        annotations[KEY_ANNOTATION] = engine_print
        # No data flows to these: the pods name the secrets and the storage class, the
        # controller's webhooks admit the object.
        after = [args.lws_controller, *needs, *([args.storage] if args.storage else [])]
        return create(lws, f"{name}-lws", in_ns, parent=self, depends_on=[*after, *_nodes(args)])


def _bound(claim: manifests.Manifest, volumes: Mapping[str, pulumi.Input[str]]) -> dict[str, Any]:
    """The claim's spec, bound to its own PersistentVolume when the program made one (the
    volume name flows in, so the claim is created after, and deleted before, the volume)."""
    volume = volumes.get(claim["metadata"]["name"])
    return {**claim["spec"], "volumeName": volume} if volume is not None else dict(claim["spec"])


def _nodes(args: ModelServerArgs) -> list[pulumi.Resource]:
    return [args.nodes] if args.nodes is not None else []


def _key_secret(
    name: str,
    args: ModelServerArgs,
    api_key: pulumi.Output[str],
    engine_key: pulumi.Output[str],
    in_ns: pulumi.Output[str],
    parent: pulumi.Resource,
) -> k8s.core.v1.Secret:
    """The API key's Secret: every entry the builder makes, from the real values. Updated in
    place on a rotation; the kubelet refreshes the gatekeeper's mounted copy."""
    obj = manifests.secret(args.spec, "api-key", "")
    previous = pulumi.Output.secret(args.api_key_previous) if args.api_key_previous else None
    until = args.api_key_overlap_until

    def entries(values: list[Any]) -> dict[str, str]:
        current, engine, old = values
        built = manifests.secret(args.spec, "api-key", current, engine, old, until)
        return dict(built["stringData"])

    data = pulumi.Output.all(api_key, engine_key, previous).apply(entries)
    obj["stringData"] = pulumi.Output.secret(data)
    return create(obj, f"{name}-api-key", in_ns, parent=parent)


def _hostname(svc: k8s.core.v1.Service) -> pulumi.Output[str]:
    return svc.status.apply(
        lambda status: (
            (status.load_balancer.ingress or [None])[0].hostname
            if status and status.load_balancer and status.load_balancer.ingress
            else None
        )
    )


def _endpoint(
    spec: ServerSpec, host: pulumi.Output[str], group: k8s.apiextensions.CustomResource
) -> pulumi.Output[str]:
    """The API's base URL on the load balancer's hostname, announced only once the group
    serves."""
    scheme = "https" if spec.tls_certificate_arn else "http"
    return pulumi.Output.all(host, group.id).apply(lambda parts: f"{scheme}://{parts[0]}/v1")
