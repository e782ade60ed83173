"""The quantize Job of a stack that makes its own int8 or int4 checkpoint (`weightsSource:
quantize`), applied as children of the model server; its objects are
`components.manifests.quantize`'s."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from components.manifests import ServerSpec
from components.manifests.quantize import QuantizeSpec, quantize_objects
from components.objects import create


def quantize_job(
    name: str,
    spec: ServerSpec,
    quantize: QuantizeSpec,
    in_ns: pulumi.Output[str],
    needs: Sequence[pulumi.Resource],
    parent: pulumi.Resource,
) -> list[pulumi.Resource]:
    """The quantize Job and its code, after the token, the claims it writes to and the nodes
    (`needs`); the group waits for the Job, which Pulumi awaits until Complete. The Job's name
    is a hash of its inputs: the same inputs are the same object, so a second `pulumi up`
    leaves it be, and new inputs replace it (a Job's template cannot change in place)."""
    priority, code, job = quantize_objects(spec, quantize)
    config = create(code, f"{name}-quantize-code", in_ns, parent=parent)
    # Lets the Job's pod preempt a group that still holds the nodes (a weights change).
    preempts = create(priority, f"{name}-quantize-priority", parent=parent)
    # The pod names the token's Secret, the claims, the ConfigMap and the priority class; its
    # nodes must exist. No data flows from these.
    after = [*needs, config, preempts]
    return [create(job, f"{name}-quantize", in_ns, parent=parent, depends_on=after)]
