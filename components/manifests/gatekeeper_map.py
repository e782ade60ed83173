"""The gatekeeper's ConfigMap: nginx.conf, its njs script and the chat page's files, and what the
group's NetworkPolicy admits to it (the gatekeeper layer, `frontDoor: gatekeeper` only)."""

from __future__ import annotations

from typing import Any

from components.manifests import gatekeeper, metrics, scaling
from components.manifests.spec import GATEKEEPER_PORT, Manifest, ServerSpec, object_meta


def files(spec: ServerSpec) -> dict[str, str]:
    """Every file of the gatekeeper's ConfigMap: nginx.conf and its njs script, then the chat
    page's files when the stack serves it (`chatPage`), mounted beside the config."""
    page_root = gatekeeper.CONFIG_MOUNT if spec.limits.chat_page else None
    if spec.door:  # the elastic layer's door and the chat page, imported only when asked for
        from components.manifests import door
    if page_root:
        from components.manifests import chat
    # An elastic stack's door too takes the limits per client as planned (grammar slots
    # included): one client's share does not grow with the groups (`all_requests` does).
    where = (
        door.config_where(spec)
        if spec.door
        else {"upstream_port": spec.port, "self_metrics": gatekeeper.SELF_METRICS_PATH}
    )
    config = gatekeeper.config_files(spec.limits, page_root=page_root, **where)
    if spec.limits.chat_page:
        page = chat.ChatPage(spec.model, spec.limits.max_reply_tokens, spec.max_model_len)
        config |= chat.files(page)
    return config


def config_map(spec: ServerSpec) -> Manifest:
    """The gatekeeper's nginx.conf and njs script, generated from the plan's limits (no secret
    in them), and the chat page's files."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(spec, spec.gatekeeper_config_name, "gatekeeper"),
        "data": files(spec),
    }


def group_ingress(spec: ServerSpec, group: dict[str, Any]) -> list[dict[str, Any]]:
    """What the group's NetworkPolicy admits beside the gatekeeper: the ranks (`group`, the
    policy's own pod selector, one object that the rendered YAML writes once) among themselves,
    the gatekeeper's port from anyone, and its metrics port from the metrics collector and, on
    an autoscaled stack, KEDA's operator only."""
    return [
        {"from": [{"podSelector": group}]},
        {"ports": [{"port": GATEKEEPER_PORT, "protocol": "TCP"}]},
        {
            "from": [
                metrics.scraper_peer(spec.namespace),
                *([scaling.keda_peer()] if spec.autoscaled else []),
            ],
            "ports": [{"port": gatekeeper.METRICS_PORT, "protocol": "TCP"}],
        },
    ]
