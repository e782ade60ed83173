"""Running the Pulumi program as Pulumi's Python host does, under the recording mocks."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pulumi
import yaml

from components.manifests import identity
from infra.adapters.wiring import NAMESPACE
from infra.plan import iam
from infra.plan.stackfile import load_stack
from tests.fakes.pulumi_mocks import ACCOUNT_ID, RecordingMocks, run

ROLE_TYPE = "aws:iam/role:Role"

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "infra"
HF_TOKEN = "hf_" + "x" * 34


def stack_values(stack: str) -> dict[str, Any]:
    document = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return dict(document["config"])


#: The vLLM image with a digest of the right shape, as a user sets it (the mocks pull nothing).
VLLM_IMAGE = "vllm/vllm-openai-cpu:v0.31.0-arm64@sha256:" + "0123456789abcdef" * 4
#: What a user sets in place of each committed stack's placeholders before `pulumi up`, which
#: refuses them (`infra.plan.placeholders`): public ranges outside the documentation ranges, a
#: certificate ARN that is not all zeros, the vLLM image with its digest, kubectl principals in an
#: account of the user's own rather than the documentation's.
OWN_ACCOUNT = "210987654321"
OWN_VALUES: dict[str, dict[str, Any]] = {
    "dev": {
        "allowedCidrs": ["100.24.0.10/32"],
        "endpointPublicAccessCidrs": ["100.24.0.0/24"],
        "vllmImage": VLLM_IMAGE,
        "clusterAdminArns": [f"arn:aws:iam::{OWN_ACCOUNT}:role/platform-admin"],
    },
    "prod": {
        "vllmImage": VLLM_IMAGE,
        "allowedCidrs": ["100.25.0.0/24"],
        "endpointPublicAccessCidrs": ["100.25.0.0/24"],
        "tlsCertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/"
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        "clusterAdminArns": [f"arn:aws:iam::{OWN_ACCOUNT}:role/platform-admin"],
        "clusterViewerArns": [f"arn:aws:iam::{OWN_ACCOUNT}:role/ml-oncall"],
    },
}


def bootstrap_roles(stack: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The roles the bootstrap creates for `stack` (`components.manifests.identity`), as IAM
    returns them: (type, name) -> state."""
    region = load_stack(stack).region
    found = {}
    for role in identity.stack_roles(stack, region, NAMESPACE):
        name = identity.role_name(stack, role.key)
        path = iam.role_path(stack)
        found[(ROLE_TYPE, name)] = {
            "name": name,
            "path": path,
            "arn": f"arn:aws:iam::{ACCOUNT_ID}:role{path}{name}",
            "permissionsBoundary": iam.boundary_arn(stack, account=ACCOUNT_ID),
            "assumeRolePolicy": json.dumps(role.trust(ACCOUNT_ID, "aws", region, stack)),
        }
    return found


def run_program(
    mocks: RecordingMocks,
    stack: str,
    overrides: dict[str, Any] | None = None,
    hf: bool = True,
    api_key: str | None = None,
    preview: bool = False,
    as_shipped: bool = False,
    previous_key: str | None = None,
    bootstrapped: bool = True,
) -> None:
    """Run the program on a committed stack as `pulumi up` (or, with `preview`, as `pulumi
    preview`) would. The stack's placeholders are replaced by `OWN_VALUES` unless `as_shipped`.
    The account holds the bootstrap's roles of `stack` unless not `bootstrapped`."""
    own = {} if as_shipped else OWN_VALUES.get(stack, {})
    values = {
        **stack_values(stack),
        **{f"gemma-graviton:{k}": v for k, v in {**own, **(overrides or {})}.items()},
    }
    secret_keys = []
    if hf:
        values["gemma-graviton:hfToken"] = HF_TOKEN
        secret_keys.append("gemma-graviton:hfToken")
    if api_key is not None:
        values["gemma-graviton:apiKey"] = api_key
        secret_keys.append("gemma-graviton:apiKey")
    if previous_key is not None:
        values["gemma-graviton:apiKeyPrevious"] = previous_key
        secret_keys.append("gemma-graviton:apiKeyPrevious")
    text = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    if bootstrapped:
        mocks.existing |= bootstrap_roles(stack)
    pulumi.runtime.set_mocks(mocks, project="gemma-graviton", stack=stack, preview=preview,
                             monitor=mocks.monitor)  # fmt: skip
    pulumi.runtime.set_all_config(text, secret_keys)
    run(lambda: runpy.run_path(str(PROGRAM), run_name="__main__"))


#: The model's node group and its front door's Service, by name: an elastic stack adds a system
#: node group and the leaders' metrics Service beside them.
MODEL_NODES = ("eks:index:ManagedNodeGroup", "eks-nodes")
SYSTEM_NODES = ("eks:index:ManagedNodeGroup", "eks-system-nodes")
MODEL_SERVICE = ("kubernetes:core/v1:Service", "model-svc")


def groups(stack: str, count: int) -> dict[str, Any]:
    """`count` groups on `stack`: `replicas` on a fixed stack, `maxGroups` on an elastic one
    (which refuses `replicas`). Read from the stack file: under the host the project's modules
    are not importable until the program has run."""
    elastic = "gemma-graviton:minGroups" in stack_values(stack)
    return {"maxGroups": count} if elastic else {"replicas": count}
