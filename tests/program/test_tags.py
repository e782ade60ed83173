"""Everything a stack pays for carries its tags, `endDate` above all: clean-up jobs stop
instances without one. Checked on what the program registers under the mocks and on the render.

Three paths, because the provider's default tags reach only what the provider itself creates:
- AWS resources of the program: the provider's `defaultTags` (every one must use that provider);
- what the node group's Auto Scaling group launches (instances, root volumes, network
  interfaces): the launch template's `tagSpecifications`;
- what Kubernetes controllers create in AWS: the EBS CSI driver's volumes (storage class
  `tagSpecification_<n>` parameters) and the cloud provider's NLB (the additional-resource-tags
  annotation).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from components import manifests
from infra.adapters.render import rendered_objects
from infra.plan import changes
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack, stack_names
from tests.fakes.pulumi_mocks import RecordingMocks, by_type, named, one
from tests.program.harness import run_program, shared_run

REQUIRED = ("endDate", "owner", "project", "stack")
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
SERVICE = "kubernetes:core/v1:Service"


def _expected(stack: str) -> dict[str, str]:
    cfg = load_stack(stack)
    return {
        "endDate": cfg.end_date.isoformat(),
        "owner": cfg.owner,
        "project": "gemma-graviton",
        "stack": stack,
    }


def _csi_tags(storage_class: dict[str, Any]) -> dict[str, str]:
    params = storage_class["parameters"]
    pairs = [v.split("=", 1) for k, v in params.items() if k.startswith("tagSpecification_")]
    return dict(pairs)


def _nlb_tags(service: dict[str, Any]) -> dict[str, str]:
    text = service["metadata"]["annotations"][manifests.NLB_TAGS_ANNOTATION]
    return dict(pair.split("=", 1) for pair in text.split(","))


@pytest.mark.parametrize("stack", stack_names())
def test_everything_the_stack_pays_for_is_tagged(stack: str) -> None:
    mocks, _ = shared_run(stack, {"modelCache": "volume"})
    want = _expected(stack)

    provider = named(mocks.records, "pulumi:providers:aws", "aws")
    # Provider inputs reach the engine as JSON text; the stack's own `tags` ride along.
    default_tags = json.loads(provider.inputs["defaultTags"])["tags"]
    assert default_tags == {**want, **load_stack(stack).tags}, provider.urn
    assert provider.inputs["region"] == load_stack(stack).region, provider.urn
    aws_resources = [r for r in mocks.records if r.custom and r.type_.startswith("aws:")]
    assert aws_resources
    for record in aws_resources:
        assert record.provider and record.provider.startswith(provider.urn), record.urn
    # Every node group (an elastic stack's system group too) launches through the provider.
    for record in by_type(mocks.records, "eks:index:Cluster") + by_type(
        mocks.records, "eks:index:ManagedNodeGroup"
    ):
        assert record.providers.get("aws", "").startswith(provider.urn), record.urn

    template = one(mocks.records, "aws:ec2/launchTemplate:LaunchTemplate")
    specs = {s["resourceType"]: s["tags"] for s in template.inputs["tagSpecifications"]}
    assert set(specs) == {"instance", "volume", "network-interface"}, template.urn
    for kind, tags in specs.items():
        assert {k: tags[k] for k in REQUIRED} == want, (template.urn, kind)

    sc = one(mocks.records, STORAGE_CLASS)
    assert {k: _csi_tags(sc.inputs)[k] for k in REQUIRED} == want, sc.urn
    (svc,) = [
        r for r in by_type(mocks.records, SERVICE) if r.inputs["spec"]["type"] == "LoadBalancer"
    ]
    assert {k: _nlb_tags(svc.inputs)[k] for k in REQUIRED} == want, svc.urn


@pytest.mark.parametrize("stack", stack_names())
def test_the_render_tags_the_csi_volumes_and_the_load_balancer(stack: str) -> None:
    cfg = load_stack(stack, {"modelCache": "volume"})
    objects = rendered_objects(cfg, plan(cfg, stack))
    want = _expected(stack)
    (sc,) = [o for o in objects if o["kind"] == "StorageClass"]
    assert {k: _csi_tags(sc)[k] for k in REQUIRED} == want
    (svc,) = [o for o in objects if o["kind"] == "Service" and o["spec"]["type"] == "LoadBalancer"]
    assert {k: _nlb_tags(svc)[k] for k in REQUIRED} == want
    for key, value in cfg.tags.items():
        assert _csi_tags(sc)[key] == value and _nlb_tags(svc)[key] == value


def test_the_load_balancer_states_its_scheme_in_the_annotation_both_controllers_read() -> None:
    cfg = load_stack("dev")
    (svc,) = [o for o in rendered_objects(cfg, plan(cfg, "dev")) if o["kind"] == "Service"]
    annotations = svc["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-type"] == "nlb"
    # Internet-facing, said rather than left to a controller's default.
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-internal"] == "false"
    # The AWS Load Balancer Controller's own, which the in-tree controller never reads.
    assert "service.beta.kubernetes.io/aws-load-balancer-scheme" not in annotations


@pytest.mark.usefixtures("as_pulumi_host")
@pytest.mark.parametrize("key", ["owner", "endDate", "tags"])
def test_a_tag_edit_reaches_the_launch_template_as_the_plan_says(
    key: str, mocks: RecordingMocks
) -> None:
    """Editing a tag key changes the nodes' launch template (a new version: EKS replaces every
    node), which `infra.plan.changes` lists under node replacement."""
    edits = {"owner": "inference-team", "endDate": "2027-03-30", "tags": {"team": "ml"}}
    before = one(shared_run("dev")[0].records, "aws:ec2/launchTemplate:LaunchTemplate").inputs
    run_program(mocks, "dev", {key: edits[key]})
    after = one(mocks.records, "aws:ec2/launchTemplate:LaunchTemplate").inputs
    assert before["tagSpecifications"] != after["tagSpecifications"]
    assert key in changes.NODE_KEYS
