"""What pulumi-kubernetes would do to a later `pulumi up` (pulumi/pulumi-kubernetes v4.32.0, read
2026-12-01): the model Service waits for its load balancer's hostname only, not for ready
endpoints, and a rotated Secret is patched in place, not deleted and created again."""

from __future__ import annotations

import pytest

from tests.fakes.pulumi_mocks import by_type, named, one
from tests.program.harness import MODEL_SERVICE, shared_run

pytestmark = pytest.mark.usefixtures("as_pulumi_host")

SECRET = "kubernetes:core/v1:Secret"
K8S_PROVIDER = "pulumi:providers:kubernetes"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_model_service_cannot_fail_an_up_during_a_cold_start(stack: str) -> None:
    mocks, exports = shared_run(stack)
    svc = named(mocks.records, *MODEL_SERVICE)
    annotations = svc.inputs["metadata"]["annotations"]
    # provider/pkg/await/service.go (`checkAndLogStatus`): without an override the provider waits
    # for endpoints with no address pending, 10 minutes by default, which a group that is still
    # loading its weights never has. provider/pkg/await/await.go (`Creation`, `Update`): a
    # `pulumi.com/waitFor` annotation replaces that wait; a JSONPath without a value waits for
    # the field to exist (provider/pkg/jsonpath/jsonpath.go, `Matches`).
    assert annotations["pulumi.com/waitFor"] == (
        "jsonpath={.status.loadBalancer.ingress[0].hostname}"
    ), svc.urn
    # skipAwait would return before the hostname exists: the first `up` would export no endpoint.
    assert "pulumi.com/skipAwait" not in annotations, svc.urn
    assert svc.inputs["spec"]["type"] == "LoadBalancer", svc.urn
    assert exports["endpoint"] is not None


def test_secrets_are_patched_in_place_on_rotation() -> None:
    mocks, _ = shared_run("prod")
    provider = one(mocks.records, K8S_PROVIDER)
    # provider/pkg/provider/diff.go (`forceNewProperties`): a Secret's `.data`/`.stringData` is
    # replace-only unless the provider has `enableSecretMutable` and the Secret is not immutable.
    # Provider inputs cross the wire JSON-encoded, so the flag arrives as a string.
    assert provider.inputs.get("enableSecretMutable") == "true", provider.urn
    secrets = by_type(mocks.records, SECRET)
    assert len(secrets) >= 2, [s.name for s in secrets]  # the HF token and the API key
    for secret in secrets:
        assert not secret.inputs.get("immutable"), secret.urn
        assert secret.provider and secret.provider.startswith(provider.urn), secret.urn


def test_config_maps_are_patched_in_place_and_the_programs_are_kept_for_old_templates() -> None:
    mocks, _ = shared_run("prod")
    provider = one(mocks.records, K8S_PROVIDER)
    # diff.go (`forceNewProperties`): a ConfigMap's `.data` is replace-only unless the provider
    # has `enableConfigMapMutable` and the ConfigMap is not immutable.
    assert provider.inputs.get("enableConfigMapMutable") == "true", provider.urn
    maps = by_type(mocks.records, "kubernetes:core/v1:ConfigMap")
    (programs,) = [r for r in maps if "programs" in r.name]
    # The programs are immutable and named by their digest: a change is a new ConfigMap, and
    # the one the groups not yet rolled mount stays (retain_on_delete), gone with the namespace.
    assert programs.inputs["immutable"] is True, programs.urn
    assert programs.inputs["metadata"]["name"].startswith("gemma-programs-"), programs.urn
    assert {r.urn for r in maps} & mocks.monitor.retained == {programs.urn}
