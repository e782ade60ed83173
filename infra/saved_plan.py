"""Whether `pulumi up --plan` can apply a plan that `pulumi preview --save-plan` wrote.

deploy-prod.yml runs it on prod's saved plan and routes the update by its answer. A plan cannot
be applied when the preview could not see the Kubernetes objects the update will create:

- When the Kubernetes provider's configuration is unknown at preview time (no cluster yet, so no
  kubeconfig), the engine does not call the provider's `Construct` for pulumi-kubernetes'
  components: it registers the component's URN alone (pulumi/pulumi 1b59498,
  pkg/resource/plugin/provider_plugin.go, `Construct`, `if !pcfg.known`). The plan then holds a
  Helm chart with no objects under it, and `up --plan` stops at the chart's first object, "create
  is not allowed by the plan: no steps were expected for this resource"
  (pkg/resource/deploy/step_generator.go), after the VPC, cluster and nodes exist.
- A provider that is created or replaced is the same case seen from the provider's side: the
  first deploy, or a new cluster behind the same stack. Flagged on its own, since a preview may
  know the new provider's configuration and still have nothing under a chart that is unchanged.
- A chart whose own inputs are unknown at preview time is left the same way by pulumi-kubernetes'
  `Construct` ("Input properties have unknown values. Preview is incomplete.",
  provider/pkg/provider/helm/v4/chart.go, since pulumi/pulumi-kubernetes#2947 and unchanged at
  9497796): the Cluster Autoscaler's values carry its Pod Identity association's id
  (`components.addons.pod_identity`), unknown on the preview that creates or replaces the
  association (an existing stack turned elastic).

The plan file is `apitype.DeploymentPlanV1` (sdk/go/common/apitype/plan.go, written by
pkg/cmd/pulumi/plan/plan.go): `resourcePlans` maps each URN to `goal` (its `type` and `parent`,
absent for a plain delete) and `steps` (the operations, pkg/resource/deploy/step.go `Op*`).
Every resource the program registers has an entry, unchanged ones too (`same`), so a chart whose
objects were rendered has children there. Secret inputs are ciphertext, so the check reads
types, parents and steps only, never inputs.

Run as `python -m infra.saved_plan plan.json`: prints what blocks the plan, writes
`applies=true|false` to `$GITHUB_OUTPUT` and a line to `$GITHUB_STEP_SUMMARY` when those are set,
exits 0 either way, and 2 when the file is not a saved plan (the job fails: no route is guessed).
Standard library only, so the runner's Python runs it before any install.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"
#: pulumi-kubernetes' components that its provider builds in `Construct` (schema.json of
#: pulumi/pulumi-kubernetes, `isComponent`); the program uses the Helm chart.
KUBERNETES_COMPONENTS = frozenset(
    {
        "kubernetes:helm.sh/v4:Chart",
        "kubernetes:yaml/v2:ConfigFile",
        "kubernetes:yaml/v2:ConfigGroup",
        "kubernetes:kustomize/v2:Directory",
    }
)
#: Steps of a provider that the preview did not configure from the provider's earlier state.
NEW_PROVIDER_STEPS = frozenset({"create", "create-replacement", "replace"})
#: Steps of a resource the update keeps or makes (a component only being deleted needs nothing).
KEPT_STEPS = frozenset({"same", "create", "update", "create-replacement", "replace"})
EXIT_NOT_A_PLAN = 2


class NotAPlan(ValueError):
    """The file is not a plan `pulumi preview --save-plan` writes."""


def resource_type(urn: str) -> str:
    """The type of a URN, `urn:pulumi:<stack>::<project>::<parent types$>type::<name>`."""
    parts = urn.split("::")
    if len(parts) < 4 or not parts[0].startswith("urn:pulumi:"):
        raise NotAPlan(f"{urn!r} is not a Pulumi URN")
    return parts[2].rsplit("$", 1)[-1]


def blockers(plan: Mapping[str, Any]) -> list[str]:
    """What in `plan` `pulumi up --plan` would refuse, one line each, sorted; empty if none."""
    resources = plan.get("resourcePlans")
    if not isinstance(resources, Mapping) or "manifest" not in plan:
        raise NotAPlan("no `manifest` and `resourcePlans`: not a file `--save-plan` writes")
    parents = {(entry.get("goal") or {}).get("parent") for entry in resources.values()}
    found = []
    for urn, entry in sorted(resources.items()):
        kind = resource_type(urn)
        steps = set(entry.get("steps") or ())
        if kind == KUBERNETES_PROVIDER and steps & NEW_PROVIDER_STEPS:
            found.append(
                f"{urn}: the Kubernetes provider is created or replaced (steps "
                f"{', '.join(entry['steps'])}), so the preview could not see what it deploys"
            )
        elif kind in KUBERNETES_COMPONENTS and steps & KEPT_STEPS and urn not in parents:
            found.append(
                f"{urn}: the preview registered this {kind} with no objects under it (its "
                "inputs or the Kubernetes provider's configuration were unknown)"
            )
    return found


def _append(variable: str, text: str) -> None:
    path = os.environ.get(variable)
    if path:
        with Path(path).open("a", encoding="utf-8") as handle:
            handle.write(text)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m infra.saved_plan PLAN_FILE", file=sys.stderr)
        return EXIT_NOT_A_PLAN
    try:
        found = blockers(json.loads(Path(args[0]).read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError, NotAPlan, AttributeError) as error:
        print(f"error: {args[0]} is not a saved Pulumi plan: {error}", file=sys.stderr)
        return EXIT_NOT_A_PLAN
    if found:
        print("`pulumi up --plan` cannot apply this plan:", *found, sep="\n  ")
        summary = "**`pulumi up --plan` cannot apply the saved plan:**\n" + "".join(
            f"- {line}\n" for line in found
        )
    else:
        print("`pulumi up --plan` can apply this plan")
        summary = "The saved plan holds every Kubernetes object: `pulumi up --plan` can apply it.\n"
    _append("GITHUB_OUTPUT", f"applies={'false' if found else 'true'}\n")
    _append("GITHUB_STEP_SUMMARY", summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
