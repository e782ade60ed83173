"""The weight download: one pinned commit for every rank, retried inside the init container."""

from __future__ import annotations

import pytest

from components import manifests
from components.manifests import programs
from components.manifests.pods import DOWNLOAD_ATTEMPTS
from tests import builders

SHA = "0123456789abcdef0123456789abcdef01234567"


def _lws(**overrides: object) -> dict:
    spec = builders.server_spec(model_revision=SHA, **overrides)
    assert spec.stages > 1  # a leader and a worker template
    return manifests.leader_worker_set(spec)


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container["env"]}


def test_every_rank_downloads_the_same_pinned_commit_with_retries() -> None:
    template = _lws()["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        (prefetch,) = template[role]["spec"]["initContainers"]
        env = _env(prefetch)
        assert env["MODEL_REVISION"] == SHA, role
        assert int(env["DOWNLOAD_ATTEMPTS"]) == DOWNLOAD_ATTEMPTS > 1, role
        # The mounted program (`programs/prefetch.py`), not text in the pod spec.
        assert f"{programs.MOUNT}/prefetch.py" in prefetch["command"], prefetch["command"]
        script = programs.files()["prefetch.py"]
        assert "revision=revision" in script and "time.sleep(pause)" in script
        # The engine loads the prefetched directory (already that commit), offline.
        engine = template[role]["spec"]["containers"][0]
        assert _env(engine)["HF_HUB_OFFLINE"] == "1"


@pytest.mark.parametrize("role", ["leaderTemplate", "workerTemplate"])
def test_without_the_prefetch_vllm_is_given_the_commit(role: str) -> None:
    template = _lws(weight_prefetch=False)["spec"]["leaderWorkerTemplate"]
    args = template[role]["spec"]["containers"][0]["args"]
    assert f"--revision={SHA}" in args
    assert f"--tokenizer-revision={SHA}" in args
