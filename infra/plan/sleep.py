"""What the door of an elastic stack says while the model sleeps, from the plan's scaling
parameters (`infra.plan.elastic`): the wake time it promises in `Retry-After`, and how long one
refused request keeps the wake flag up (`components.manifests.asleep`); and the door itself as
the program wires it (`door_spec`).

Pure. The promise is the slow end of what a request that finds no group waits: KEDA's next poll
of the flag, then the planned wake-up of a group from zero nodes (a node, the image, the group's
start with this stack's model cache).
"""

from __future__ import annotations

from components.manifests.asleep import Asleep
from components.manifests.door import DoorSpec
from infra.plan import elastic
from infra.plan.config import StackConfig
from infra.plan.sizing import Plan

#: The wake flag lasts two of KEDA's polls: one poll missed (a slow operator, a restart) still
#: wakes the model. Longer only keeps a group a little longer; shorter could miss the request.
SIGNAL_POLLS = 2


def retry_after_seconds(cfg: StackConfig, p: Plan) -> int:
    """From a request that finds no group to a group that serves, the slow end (modelled)."""
    volume = cfg.model_cache == "volume"
    return elastic.POLLING_SECONDS + elastic.wake_seconds(cfg, p, volume)


def door_asleep(cfg: StackConfig, p: Plan) -> Asleep:
    """The door's asleep answers for this stack."""
    return Asleep(
        wake_seconds=retry_after_seconds(cfg, p),
        signal_seconds=SIGNAL_POLLS * elastic.POLLING_SECONDS,
    )


def door_spec(cfg: StackConfig, p: Plan, node_selector: dict[str, str]) -> DoorSpec:
    """An elastic stack's door: on the system nodes (`node_selector`), its asleep answers from
    the plan."""
    return DoorSpec(
        asleep=door_asleep(cfg, p),
        max_groups=elastic.scaling_parameters(cfg, p).max_groups,
        node_selector=node_selector,
    )


def describe(cfg: StackConfig, p: Plan) -> tuple[str, str]:
    """The plan's row for the door of an elastic stack."""
    asleep = door_asleep(cfg, p)
    return (
        "asleep",
        "an always-on door on the system nodes answers while no group runs: a model request "
        f"gets 503 with Retry-After {asleep.wake_seconds} s (KEDA's poll + the wake-up, slow "
        f"end) and wakes one group (wake flag up {asleep.signal_seconds} s, read by KEDA); "
        '/health says "asleep" and wakes nothing',
    )
