"""`infra.saved_plan` against a plan of prod's first deploy and the plans that follow it.

The fixture is hand-made, not saved by `pulumi preview --save-plan`: it has the shape of
`apitype.DeploymentPlanV1` (pulumi/pulumi sdk/go/common/apitype/plan.go: `manifest`, `config`,
`resourcePlans`; each `goal`, `steps`, `state`; `ManifestV1` in apitype/core.go), with the
manifest's `magic` computed as the engine does (`deploy.Manifest.NewMagic`, the hex SHA-256 of
the CLI version), trimmed to the stack, the cluster, the Kubernetes provider and the LWS
controller: on a first deploy the provider is created, its kubeconfig is a secret (ciphertext),
and the LWS chart has no objects under it. `test_the_fixture_has_the_saved_plans_shape` holds it
to those field names.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from infra import saved_plan

FIRST_DEPLOY = Path(__file__).parent / "fixtures" / "plans" / "prod-first-deploy.json"
PROVIDER = (
    "urn:pulumi:prod::gemma-graviton::gemma-graviton:cluster:Cluster"
    "$pulumi:providers:kubernetes::eks-k8s"
)
CHART = (
    "urn:pulumi:prod::gemma-graviton::gemma-graviton:leaderworkerset:LwsController"
    "$kubernetes:helm.sh/v4:Chart::lws-chart"
)
CHART_OBJECT = CHART.replace("::lws-chart", "$kubernetes:apps/v1:Deployment::lws-system/lws")


def _first_deploy() -> dict[str, Any]:
    return json.loads(FIRST_DEPLOY.read_text(encoding="utf-8"))


def _later_update() -> dict[str, Any]:
    """The next run's plan: every resource exists, the chart rendered its objects, one changes."""
    plan = _first_deploy()
    for entry in plan["resourcePlans"].values():
        entry["steps"] = ["same"]
    plan["resourcePlans"][CHART_OBJECT] = {
        "goal": {
            "type": "kubernetes:apps/v1:Deployment",
            "name": "lws-system/lws",
            "custom": True,
            "parent": CHART,
            "inputDiff": {},
            "outputDiff": {},
            "protect": False,
        },
        "steps": ["update"],
        "state": {},
    }
    return plan


#: The JSON names of apitype's plan types (plan.go, core.go `ManifestV1` and `PluginInfoV1`).
PLAN_FIELDS = {"manifest", "config", "resourcePlans"}
MANIFEST_FIELDS = {"time", "magic", "version", "plugins"}
PLUGIN_FIELDS = {"name", "path", "type", "version"}
RESOURCE_PLAN_FIELDS = {"goal", "steps", "state", "seed"}
GOAL_FIELDS = {
    "type", "name", "custom", "inputDiff", "outputDiff", "parent", "protect", "dependencies",
    "provider", "propertyDependencies", "deleteBeforeReplace", "ignoreChanges",
    "ignoreRefreshChanges", "additionalSecretOutputs", "aliases", "structuredAliases", "id",
    "customTimeouts",
}  # fmt: skip
#: GoalV1's fields without `omitempty` (encoding/json writes them always).
GOAL_ALWAYS = {"type", "name", "custom", "inputDiff", "outputDiff", "protect"}
DIFF_FIELDS = {"adds", "deletes", "updates"}


def test_the_fixture_has_the_saved_plans_shape() -> None:
    plan = _first_deploy()
    assert set(plan) == PLAN_FIELDS
    manifest = plan["manifest"]
    assert set(manifest) == MANIFEST_FIELDS
    assert manifest["magic"] == hashlib.sha256(manifest["version"].encode()).hexdigest()
    assert all(set(plugin) == PLUGIN_FIELDS for plugin in manifest["plugins"])
    for urn, entry in plan["resourcePlans"].items():
        assert set(entry) <= RESOURCE_PLAN_FIELDS and "state" in entry, urn
        goal = entry["goal"]
        assert GOAL_ALWAYS <= set(goal) <= GOAL_FIELDS, urn
        assert set(goal["inputDiff"]) | set(goal["outputDiff"]) <= DIFF_FIELDS, urn


def test_the_first_deploys_plan_is_refused_for_its_new_provider_and_its_empty_chart() -> None:
    found = saved_plan.blockers(_first_deploy())
    assert [line.split(": ", 1)[0] for line in found] == [PROVIDER, CHART]


def test_a_later_update_with_the_charts_objects_can_be_applied() -> None:
    assert saved_plan.blockers(_later_update()) == []


def test_a_replaced_provider_is_refused_even_when_the_chart_rendered() -> None:
    plan = _later_update()
    plan["resourcePlans"][PROVIDER]["steps"] = ["create-replacement", "replace", "delete-replaced"]
    (line,) = saved_plan.blockers(plan)
    assert line.startswith(f"{PROVIDER}: the Kubernetes provider is created or replaced")


def test_an_unknown_provider_config_on_an_update_is_refused_by_the_empty_chart() -> None:
    """The provider only updated, its new kubeconfig unknown (hidden in ciphertext): the chart
    has no objects under it, and that alone stops the plan."""
    plan = _later_update()
    plan["resourcePlans"][PROVIDER]["steps"] = ["update"]
    del plan["resourcePlans"][CHART_OBJECT]
    assert [line.split(": ", 1)[0] for line in saved_plan.blockers(plan)] == [CHART]


def test_a_new_chart_with_unknown_values_is_refused_while_the_provider_stays() -> None:
    """An existing stack turned elastic: the provider is the same, but the autoscaler chart's
    values carry its new Pod Identity association's id, unknown at preview, so pulumi-kubernetes
    renders nothing under it; the line names that cause, not only the provider's."""
    plan = _later_update()
    del plan["resourcePlans"][CHART_OBJECT]
    plan["resourcePlans"][CHART]["steps"] = ["create"]
    assert saved_plan.blockers(plan) == [
        f"{CHART}: the preview registered this kubernetes:helm.sh/v4:Chart with no objects "
        "under it (its inputs or the Kubernetes provider's configuration were unknown)"
    ]


def test_a_chart_being_deleted_needs_no_objects() -> None:
    plan = _later_update()
    del plan["resourcePlans"][CHART_OBJECT]
    plan["resourcePlans"][CHART]["steps"] = ["delete"]
    assert saved_plan.blockers(plan) == []


def test_main_routes_through_github_output_and_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output, summary = tmp_path / "output", tmp_path / "summary"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    later = tmp_path / "later.json"
    later.write_text(json.dumps(_later_update()), encoding="utf-8")

    assert saved_plan.main([str(FIRST_DEPLOY)]) == 0
    assert output.read_text() == "applies=false\n"
    assert CHART in summary.read_text() and PROVIDER in summary.read_text()

    assert saved_plan.main([str(later)]) == 0
    assert output.read_text() == "applies=false\napplies=true\n"


@pytest.mark.parametrize(
    "text",
    ["not json", "{}", '{"resourcePlans": {}}', '{"manifest": {}, "resourcePlans": {"x": {}}}'],
    ids=["not json", "empty", "no manifest", "not a URN"],
)
def test_a_file_that_is_not_a_saved_plan_fails_the_job_without_a_route(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    path = tmp_path / "plan.json"
    path.write_text(text, encoding="utf-8")
    assert saved_plan.main([str(path)]) == saved_plan.EXIT_NOT_A_PLAN
    assert not output.exists(), "no route may be written for a file that is not a plan"
