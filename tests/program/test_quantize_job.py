"""The quantize Job under the mocks: the stack that makes its own int8 or int4 checkpoint gets one
Job, writing to every rank's volume, before the group; the same inputs twice give the same Job;
bf16 stacks and named checkpoints get none."""

from __future__ import annotations

from typing import Any

import pytest

from infra.plan.stackfile import stack_names
from tests.fakes.pulumi_mocks import Recorded, RecordingMocks, by_type, named, one
from tests.program.harness import MODEL_NODES, groups, run_program, shared_run
from tests.program.test_order import _depends_on

pytestmark = pytest.mark.usefixtures("as_pulumi_host")

JOB = "kubernetes:batch/v1:Job"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
SECRET = "kubernetes:core/v1:Secret"
VOLUME = "aws:ebs/volume:Volume"
ROLE = "aws:iam/role:Role"
NAMED = "someone/gemma-4-12B-it-W8A8@" + "0123456789" * 4


def _quantize_jobs(mocks: RecordingMocks) -> list[Recorded]:
    return [j for j in by_type(mocks.records, JOB) if j.name == "model-quantize"]


@pytest.mark.parametrize("stack", stack_names())
def test_the_job_writes_every_ranks_volume_before_the_group(stack: str) -> None:
    mocks, exports = shared_run(stack, {"weights": "int8", **groups(stack, 2)})
    (job,) = _quantize_jobs(mocks)
    lws = one(mocks.records, LWS)
    template = lws.inputs["spec"]["leaderWorkerTemplate"]
    assert int(template["size"]) == 1, "int8 fits one m7g.2xlarge: one-rank groups"
    # Storage: one encrypted volume and claim per rank, each mounted by the Job.
    claims = by_type(mocks.records, PVC)
    # Two one-rank groups, and a rollout's surge group where the node group can grow for it.
    ranks = 2 + int(exports["rolloutSurgeNodes"])
    assert len(claims) == ranks and len(by_type(mocks.records, VOLUME)) == ranks
    assert all(v.inputs["encrypted"] is True for v in by_type(mocks.records, VOLUME))
    pod = job.inputs["spec"]["template"]["spec"]
    mounted = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert mounted == {c.inputs["metadata"]["name"] for c in claims}, job.urn
    # Ordering: the Job after the claims, the token and the nodes; the group after the Job.
    for claim in claims:
        _depends_on(mocks, job, claim)
    _depends_on(mocks, job, named(mocks.records, SECRET, "model-hf-token"))
    _depends_on(mocks, job, named(mocks.records, *MODEL_NODES))
    _depends_on(mocks, lws, job)
    # Pulumi waits longer than the Job's own deadline, so the Job's failure is what is reported.
    timeout = int(job.inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"])
    assert timeout > job.inputs["spec"]["activeDeadlineSeconds"] >= 45 * 60, job.urn
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["SCHEME"], env["SOURCE_REPO"]) == ("int8", "google/gemma-4-12B-it")
    assert env["SOURCE_REVISION"] == "707f0a3b8a3c7ad586ed01e27eafbad8a27dd0f7"
    assert container["image"] == template["leaderTemplate"]["spec"]["containers"][0]["image"]
    assert container["resources"]["requests"] == container["resources"]["limits"]
    # The ranks load what the Job wrote: no download, the marker checked.
    leader = template["leaderTemplate"]["spec"]
    (init,) = leader["initContainers"]
    init_env = {e["name"]: e.get("value") for e in init["env"]}
    assert init_env["CHECKPOINT_MARKER"] == "quantized.json"
    assert init_env["MODEL_DIR"] == "/models/google/gemma-4-12B-it-int8"
    assert env["OUT_DIRS"].split(":") == [
        f"/out/{rank}/google/gemma-4-12B-it-int8" for rank in range(ranks)
    ]
    args = leader["containers"][0]["args"]
    assert args[1] == "/models/google/gemma-4-12B-it-int8"
    assert "--pipeline-parallel-size=1" in args
    assert not any(a.startswith(("--nnodes", "--master-addr", "--node-rank")) for a in args)


def test_the_job_ships_the_quantizer_and_needs_no_new_role() -> None:
    mocks, _ = shared_run("dev", {"weights": "int4"})
    (job,) = _quantize_jobs(mocks)
    code = named(mocks.records, CONFIG_MAP, "model-quantize-code")
    assert "infra.quantize.__main__.py" in code.inputs["data"]
    assert "requirements-quantize.txt" in code.inputs["data"]
    volumes = job.inputs["spec"]["template"]["spec"]["volumes"]
    (mounted,) = [v for v in volumes if v["name"] == "code"]
    assert mounted["configMap"]["name"] == code.inputs["metadata"]["name"]
    # It may preempt the group it replaces (a weights change on a running stack).
    priority = one(mocks.records, "kubernetes:scheduling.k8s.io/v1:PriorityClass")
    pod = job.inputs["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == priority.inputs["metadata"]["name"]
    assert priority.inputs["value"] > 0, priority.urn
    assert priority.inputs["preemptionPolicy"] == "PreemptLowerPriority", priority.urn
    _depends_on(mocks, job, priority)
    leader = one(mocks.records, LWS).inputs["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert "priorityClassName" not in leader["spec"]
    # The volumes are attached by the EBS CSI driver's role: the Job adds no IAM role.
    roles = {r.name for r in by_type(mocks.records, ROLE)}
    volume, _ = shared_run("dev", {"modelCache": "volume"})
    assert roles == {r.name for r in by_type(volume.records, ROLE)}


def test_the_same_inputs_twice_give_the_same_job(exports: dict[str, Any]) -> None:
    """What `pulumi up` compares: the same URN with the same inputs is no change, so a second
    run with the same inputs creates and replaces nothing; new inputs give the Job a new name
    (a replacement: a Job's template cannot change in place)."""
    mocks = RecordingMocks().install()
    run_program(mocks, "dev", {"weights": "int8"})
    (first,) = _quantize_jobs(mocks)
    (second,) = _quantize_jobs(shared_run("dev", {"weights": "int8"})[0])
    (other,) = _quantize_jobs(shared_run("dev", {"weights": "int4"})[0])
    assert (first.urn, first.inputs) == (second.urn, second.inputs)
    assert other.inputs["metadata"]["name"] != first.inputs["metadata"]["name"]


@pytest.mark.parametrize("values", [{}, {"weights": "int8", "weightsSource": NAMED}])
def test_bf16_and_named_checkpoints_get_no_job(values: dict[str, str]) -> None:
    mocks, _ = shared_run("dev", values)
    assert _quantize_jobs(mocks) == []
    assert [c for c in by_type(mocks.records, CONFIG_MAP) if "quantize" in c.name] == []
    leader = one(mocks.records, LWS).inputs["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    (init,) = leader["spec"]["initContainers"]
    env = {e["name"]: e.get("value") for e in init["env"]}
    assert "CHECKPOINT_MARKER" not in env
    if values:
        repo, _, commit = NAMED.partition("@")
        assert (env["MODEL_REPO"], env["MODEL_REVISION"]) == (repo, commit)
        assert env["MODEL_DIR"] == f"/models/{repo}"
    else:
        assert env["MODEL_REPO"] == "google/gemma-4-12B-it"
        args = leader["spec"]["containers"][0]["args"]
        assert "--pipeline-parallel-size=2" in args and "--nnodes=$(LWS_GROUP_SIZE)" in args
