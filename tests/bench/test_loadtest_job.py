"""The in-cluster capacity Job: real schema, pod security, the key from the Secret, the script."""

from __future__ import annotations

import dataclasses
import subprocess
from typing import Any

import pytest
import yaml

from components import manifests
from infra.plan import catalog
from infra.plan.stackfile import stack_names
from tests import builders
from tests.components.test_pod_security import baseline_findings, restricted_findings
from tests.fakes import k8s_schemas
from tools.bench import capacity
from tools.bench import loadtest_job as loadtest


def _job(stack: str = "dev") -> dict[str, Any]:
    # Through the CLI's own output: what `--job | kubectl apply -f -` applies.
    cfg, p = builders.planned(stack)
    return yaml.safe_load(capacity.job_manifest(cfg, p, capacity.default_points(p)))


@pytest.mark.parametrize("stack", stack_names())
def test_the_job_passes_the_real_schema_and_the_restricted_level(stack: str) -> None:
    job = _job(stack)
    assert k8s_schemas.core_errors(job, catalog.DEFAULT_KUBERNETES_VERSION) == []
    pod = job["spec"]["template"]["spec"]
    assert baseline_findings(pod) == []
    assert restricted_findings(pod) == []


def test_the_job_runs_the_stack_s_image_with_the_key_and_token_from_its_secrets() -> None:
    cfg, spec = builders.planned()[0], builders.planned_spec()
    job = _job()
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["image"] == cfg.vllm_image
    env = {e["name"]: e for e in container["env"]}
    assert env["OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": spec.api_key_secret_name,
        "key": manifests.API_KEY_KEY,
    }
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": spec.hf_secret_name,
        "key": manifests.HF_TOKEN_KEY,
    }
    assert env["MODEL_REVISION"]["value"] == spec.model_revision
    assert job["metadata"]["namespace"] == spec.namespace
    assert job["spec"]["backoffLimit"] == 0
    limits = container["resources"]
    assert limits["requests"] == limits["limits"]


def test_the_script_measures_every_point_through_the_service_and_prints_each_result() -> None:
    points = capacity.default_points(builders.planned()[1])
    (container,) = _job()["spec"]["template"]["spec"]["containers"]
    script = container["command"][2]
    assert container["command"][:2] == ["/bin/sh", "-c"]
    url = f"--base-url=http://gemma.{builders.planned_spec().namespace}.svc.cluster.local:80"
    assert script.count("vllm bench serve ") == len(points) == 4
    assert script.count(url) == len(points)
    assert script.count(f"--tokenizer={loadtest.TOKENIZER_DIR}") == len(points)
    for point in points:
        assert f"echo '{loadtest.RESULT_MARKER}{point.name}'" in script
        assert f"cat {loadtest.RESULTS_DIR}/{point.name}.json" in script
    # The script is valid shell, and the key never appears in it.
    subprocess.run(["sh", "-n", "-c", script], check=True)
    assert "OPENAI_API_KEY" not in script


def test_with_a_certificate_the_service_is_reached_on_443_in_plain_http() -> None:
    spec = builders.planned_spec()
    assert loadtest.service_url(spec).endswith(".svc.cluster.local:80")
    tls = dataclasses.replace(spec, tls_certificate_arn="arn:aws:acm:us-east-1:1:certificate/x")
    assert loadtest.service_url(tls) == f"http://gemma.{spec.namespace}.svc.cluster.local:443"


def test_the_deadline_covers_twice_the_modelled_run() -> None:
    cfg, p = builders.planned()
    points = capacity.default_points(p)
    modelled = capacity.modelled_seconds(cfg, p, points)
    assert _job()["spec"]["activeDeadlineSeconds"] == int(2 * modelled) + 600
    assert modelled > 600
