"""The containers of each model pod, as the plan sizes them: every one of them has requests equal
to its limits, so the pod is Guaranteed and the static CPU manager gives vLLM whole cores.

The render and the program must build exactly these (tests/program/test_model_pods.py); a
container added to the pods, by this project or injected by an add-on, fails that test until the
plan counts it.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.manifests.spec import ENGINE_CONTAINER, GATEKEEPER_CONTAINER, PREFETCH_CONTAINER


@dataclass(frozen=True)
class PodContainers:
    """One pod template's container names, in order."""

    init: tuple[str, ...]
    containers: tuple[str, ...]


def model_pod_containers(weight_prefetch: bool, door: bool = False) -> dict[str, PodContainers]:
    """`leader` and `worker` -> their containers: the engine in both, the gatekeeper in the
    leader (not behind an elastic stack's door, which runs it apart, nor with `frontDoor:
    vllm-key`: `door` is true for both), and the weight prefetch as the one init container when
    it is on."""
    init = (PREFETCH_CONTAINER,) if weight_prefetch else ()
    leader = (ENGINE_CONTAINER,) if door else (ENGINE_CONTAINER, GATEKEEPER_CONTAINER)
    return {
        "leader": PodContainers(init, leader),
        "worker": PodContainers(init, (ENGINE_CONTAINER,)),
    }


def describe(weight_prefetch: bool, door: bool = False) -> str:
    """The plan's one-line view of `model_pod_containers`."""
    parts = []
    for role, pod in model_pod_containers(weight_prefetch, door).items():
        init = f" (init: {', '.join(pod.init)})" if pod.init else ""
        parts.append(f"{role}: {', '.join(pod.containers)}{init}")
    return "; ".join(parts) + "; requests = limits in every one"
