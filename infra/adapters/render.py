"""Write the Kubernetes objects a stack applies, one YAML file each, and no Secret.

The two Secrets need values no file should hold (the Hugging Face token, the API key): they are
described in `SECRETS.txt`, which `kubectl apply -f DIR` does not read (it takes only .yaml, .yml
and .json), with the commands that create them from values the operator holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from components import manifests
from components.manifests import door, gatekeeper, gatekeeper_map, volumes
from components.manifests.scaling import floor_objects, metrics_service, scaled_object
from components.manifests.spec import LWS_NAME_LABEL, ServerSpec, config_digest
from infra.adapters.wiring import (
    STORAGE_CLASS,
    STORAGE_THROUGHPUT_MIBPS,
    server_spec,
    stack_tags,
)
from infra.plan import elastic
from infra.plan.config import StackConfig
from infra.plan.sizing import Plan

if TYPE_CHECKING:
    from components.manifests.quantize import QuantizeSpec

SECRETS_NOTE = "SECRETS.txt"


def all_objects(spec: ServerSpec, quantize: QuantizeSpec | None = None) -> list[manifests.Manifest]:
    """Every object of the model server but its two Secrets, in apply order. The Secrets
    (`manifests.secret`) need the real values: the program creates them; `--render` says how to.
    A stack that makes its own checkpoint gets the quantize Job (`quantize`) between the claims
    it writes to and the group that loads from them."""
    made, door_config = [], []
    if not spec.vllm_key:
        door_config = [gatekeeper_map.config_map(spec)]
    if quantize is not None:
        from components.manifests.quantize import quantize_objects  # the quantize layer

        made = quantize_objects(spec, quantize)
    objects = [
        manifests.namespace(spec),
        *door_config,
        manifests.programs_config(spec),
        manifests.network_policy(spec),
        *manifests.model_claims(spec),
        *made,
        manifests.leader_worker_set(spec),
        *[budget for budget in [manifests.pod_disruption_budget(spec)] if budget is not None],
        manifests.service(spec),
    ]
    if spec.door:
        objects += door.objects(spec, config_digest(gatekeeper_map.files(spec)))
    return objects


def rendered_objects(cfg: StackConfig, plan: Plan) -> list[manifests.Manifest]:
    """The model server's objects as the program applies them, without the Secrets.

    The LeaderWorkerSet controller itself comes from its pinned Helm chart and is not rendered.
    """
    objects = []
    if plan.model_cache == "volume":
        objects.append(
            volumes.storage_class(
                STORAGE_CLASS, STORAGE_THROUGHPUT_MIBPS, stack_tags(cfg, plan.stack)
            )
        )
    spec = server_spec(cfg, plan)
    quantize = None
    if plan.quantize is not None:
        from infra.adapters.quantize_layer import quantize_spec  # the quantize layer

        quantize = quantize_spec(plan)
    objects += all_objects(spec, quantize)
    if cfg.elastic:
        wake = [door.wake_trigger(spec)] if spec.door else []
        objects += [
            metrics_service(spec),
            *floor_objects(spec),
            scaled_object(spec, elastic.scaling_parameters(cfg, plan), wake),
        ]
    return objects


def secrets_note(cfg: StackConfig, plan: Plan) -> str:
    """How to create the two Secrets the rendered objects name, without writing their values.

    The commands are shell as written: each backslash the shell reads (a line's continuation,
    printf's newline) is doubled in this f-string."""
    spec = server_spec(cfg, plan)
    ns = spec.namespace
    return f"""The rendered objects name two Secrets that are not rendered: a file must not hold
their values. `pulumi up` creates them from the stack's secrets. To apply the rendered objects
by hand, create them first in namespace {ns}, from values you hold in your shell:

  kubectl -n {ns} create secret generic {spec.hf_secret_name} \\
    --from-literal={manifests.HF_TOKEN_KEY}="$HF_TOKEN"
{_vllm_key_note(spec) if spec.vllm_key else _gatekeeper_note(spec)}"""


def _vllm_key_note(spec: ServerSpec) -> str:
    """`frontDoor: vllm-key`: one key, which vLLM reads once, at start."""
    ns = spec.namespace
    return f"""
  # The key vLLM checks: 32 or more of A-Z a-z 0-9 . _ ~ + / = - (e.g. API_KEY=$(openssl rand
  # -hex 24)); vLLM does not start with a shorter one, or an empty one.
  kubectl -n {ns} create secret generic {spec.api_key_secret_name} \\
    --from-literal={manifests.API_KEY_KEY}="$API_KEY"

vLLM reads the key once, when it starts: a new key takes effect when the group restarts, and
the old one works until then. Restart it after changing the Secret:

  kubectl -n {ns} delete pods -l {LWS_NAME_LABEL}={spec.lws_name}
"""


def _gatekeeper_note(spec: ServerSpec) -> str:
    """The gatekeeper's key files beside the key, and the engine key it sends vLLM."""
    ns = spec.namespace
    return f"""
  # The key: 32 or more of A-Z a-z 0-9 . _ ~ + / = - (e.g. API_KEY=$(openssl rand -hex 24)),
  # and the engine key vLLM checks, which the gatekeeper sends it (ENGINE_KEY likewise).
  # The gatekeeper reads {gatekeeper.KEY_FILE} (the accepted keys) and
  # {gatekeeper.ENGINE_FILE}; without them every request but /health and /ready is refused.
  printf '{{"keys": [{{"key": "%s", "until": null}}]}}\\n' "$API_KEY" > {gatekeeper.KEY_FILE}
  printf 'default "Bearer %s";\\n' "$ENGINE_KEY" > {gatekeeper.ENGINE_FILE}
  kubectl -n {ns} create secret generic {spec.api_key_secret_name} \\
    --from-literal={manifests.API_KEY_KEY}="$API_KEY" \\
    --from-literal={manifests.ENGINE_KEY_KEY}="$ENGINE_KEY" \\
    --from-file={gatekeeper.KEY_FILE} --from-file={gatekeeper.ENGINE_FILE}
  rm {gatekeeper.KEY_FILE} {gatekeeper.ENGINE_FILE}

A new client key takes effect without restarting any pod: the kubelet refreshes the mounted
Secret and the gatekeeper reads {gatekeeper.KEY_FILE} on every keyed request. During a rotation
the file lists the previous key too, with "until" (Unix seconds) when it stops.
"""


def file_name(index: int, obj: manifests.Manifest) -> str:
    return f"{index:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def render_stack(cfg: StackConfig, plan: Plan, out_dir: Path) -> list[Path]:
    """Replace `out_dir`'s YAML files with the stack's objects; return the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.yaml"):
        stale.unlink()
    written = []
    for index, obj in enumerate(rendered_objects(cfg, plan)):
        path = out_dir / file_name(index, obj)
        path.write_text(yaml.safe_dump(obj, sort_keys=False, width=100))
        written.append(path)
    (out_dir / SECRETS_NOTE).write_text(secrets_note(cfg, plan))
    return written
