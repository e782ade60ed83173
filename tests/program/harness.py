"""Running the Pulumi program as Pulumi's Python host does, under the recording mocks."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pulumi
import yaml

from tests.fakes.pulumi_mocks import RecordingMocks, run

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "infra"
HF_TOKEN = "hf_" + "x" * 34


def stack_values(stack: str) -> dict[str, Any]:
    document = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return dict(document["config"])


def run_program(
    mocks: RecordingMocks,
    stack: str,
    overrides: dict[str, Any] | None = None,
    hf: bool = True,
    api_key: str | None = None,
) -> None:
    values = {
        **stack_values(stack),
        **{f"gemma-graviton:{k}": v for k, v in (overrides or {}).items()},
    }
    secret_keys = []
    if hf:
        values["gemma-graviton:hfToken"] = HF_TOKEN
        secret_keys.append("gemma-graviton:hfToken")
    if api_key is not None:
        values["gemma-graviton:apiKey"] = api_key
        secret_keys.append("gemma-graviton:apiKey")
    text = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    pulumi.runtime.set_mocks(mocks, project="gemma-graviton", stack=stack, preview=False,
                             monitor=mocks.monitor)  # fmt: skip
    pulumi.runtime.set_all_config(text, secret_keys)
    run(lambda: runpy.run_path(str(PROGRAM), run_name="__main__"))
