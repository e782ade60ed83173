"""What the door of an elastic stack says while the model sleeps, from the plan: the wake time
it promises (`Retry-After`), how long one refused request keeps the wake flag up, and the
extra KEDA trigger that turns that flag into a group (`components.manifests.door.wake_trigger`).

Pure. The wake time is the slow end of what a request that finds no group waits: KEDA's next
poll of the flag, a model node launched and joined, the vLLM image pulled on it, and the group's
start (the plan's cold start without a weights volume, its warm restart with one, as the
volume keeps the weights across sleeps).
"""

from __future__ import annotations

import math

from components.manifests.asleep import Asleep
from infra.plan.sizing import Plan

#: KEDA's `pollingInterval` for the ScaledObject (KEDA's default, 30 s: keda.sh docs
#: "Scaling Deployments, StatefulSets & Custom Resources", ScaledObject spec, read 2026-12-02).
KEDA_POLLING_SECONDS = 30
#: An m7g node from the autoscaler's request to Ready, the slow end (modelled: EC2 launch, boot,
#: kubelet join and the CNI, each a fraction of a minute on EKS's AL2023 image).
NODE_READY_SECONDS = 120
#: Pulling the vLLM CPU image (`catalog.IMAGE_DISK_GIB` unpacked) onto a new node, the slow end
#: (modelled: ~100 MB/s from ECR Public in-region, compressed about half the unpacked size).
IMAGE_PULL_SECONDS = 75
#: The wake flag lasts two polls: one poll missed (a slow KEDA operator, a restart) still wakes.
SIGNAL_POLLS = 2


def wake_seconds(plan: Plan) -> int:
    """From a request that finds no group to a group that serves, the slow end (modelled)."""
    start = plan.warm_restart_seconds if plan.model_cache == "volume" else plan.cold_start_seconds
    total = KEDA_POLLING_SECONDS + NODE_READY_SECONDS + IMAGE_PULL_SECONDS + start
    return int(math.ceil(total / 30) * 30)


def door_asleep(plan: Plan) -> Asleep:
    """The door's asleep answers for this plan."""
    return Asleep(
        wake_seconds=wake_seconds(plan), signal_seconds=SIGNAL_POLLS * KEDA_POLLING_SECONDS
    )
