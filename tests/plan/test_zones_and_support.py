"""Zone placement against the account's zones, and the Kubernetes support window: pure checks."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from infra.adapters.cli import main
from infra.plan import catalog, prices, support
from infra.plan.config import ConfigError
from infra.plan.stackfile import load_stack, stack_names
from infra.plan.zones import Zone, place
from tests.plan.profiles import small_gemma

US_EAST_1 = [
    Zone("us-east-1a", "use1-az3"),
    Zone("us-east-1b", "use1-az4"),
    Zone("us-east-1c", "use1-az6"),
]
ALL_IDS = {z.zone_id for z in US_EAST_1}
SHA = "0123456789abcdef0123456789abcdef01234567"
#: A small model of Gemma's layout that the catalogue does not hold.
SMALL_PROFILE = small_gemma(4)


def _place(az: str, cp: str = "auto", offered: set[str] = ALL_IDS):
    return place(
        region="us-east-1",
        availability_zone=az,
        control_plane_zone=cp,
        instance_type="m7g.2xlarge",
        zones=US_EAST_1,
        offered_zone_ids=offered,
    )


def test_a_zone_id_is_resolved_and_auto_second_zone_skips_zones_eks_refuses() -> None:
    assert _place("use1-az6").node == Zone("us-east-1c", "use1-az6")
    # us-east-1a is use1-az3 in this account: EKS refuses control-plane subnets there.
    assert _place("us-east-1b").control_plane == Zone("us-east-1c", "use1-az6")


@pytest.mark.parametrize(
    ("az", "cp", "offered", "message"),
    [
        (
            "us-east-1b",
            "auto",
            ALL_IDS - {"use1-az4"},
            "`availabilityZone` us-east-1b (use1-az4) does not offer m7g.2xlarge; choose a zone "
            "that does (us-east-1a, us-east-1c), or another `instanceType`",
        ),
        (
            "us-east-1z",
            "auto",
            ALL_IDS,
            "`availabilityZone` us-east-1z is not an available zone of us-east-1 in this account; "
            "use one of: us-east-1a (use1-az3), us-east-1b (use1-az4), us-east-1c (use1-az6)",
        ),
        (
            "use1-az3",
            "auto",
            ALL_IDS,
            "`availabilityZone` us-east-1a (use1-az3) is a zone where EKS refuses control-plane "
            "subnets; choose another zone: us-east-1b, us-east-1c",
        ),
        (
            "us-east-1b",
            "us-east-1a",
            ALL_IDS,
            "`controlPlaneZone` us-east-1a (use1-az3) is a zone where EKS refuses control-plane "
            "subnets; choose another zone: us-east-1b, us-east-1c",
        ),
        (
            "us-east-1b",
            "use1-az4",
            ALL_IDS,
            "`controlPlaneZone` use1-az4 is the node zone us-east-1b (EKS needs two zones); "
            "choose another zone of the region, or auto",
        ),
    ],
)
def test_a_bad_zone_is_one_line(az: str, cp: str, offered: set[str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        _place(az, cp, offered)
    assert str(error.value) == message


def test_the_default_version_is_in_standard_support_today_and_for_sixty_days() -> None:
    version = prices.EKS_VERSIONS[catalog.DEFAULT_KUBERNETES_VERSION]
    today = dt.date.today()
    assert version.end_of_standard - today > dt.timedelta(days=catalog.SUPPORT_WARNING_DAYS), (
        f"{version.version} leaves standard support on {version.end_of_standard}"
    )
    for stack in stack_names():
        found = support.warnings(load_stack(stack, {"modelRevision": SHA}), today)
        assert found == [], stack


def test_every_catalogued_version_has_fourteen_months_of_standard_support() -> None:
    for version in prices.EKS_VERSIONS.values():
        months = (version.end_of_standard.year - version.released.year) * 12 + (
            version.end_of_standard.month - version.released.month
        )
        assert months == 14, version
        assert version.end_of_extended.year == version.end_of_standard.year + 1


def test_the_plan_warns_sixty_days_before_standard_support_ends() -> None:
    cfg = load_stack("dev", {"kubernetesVersion": "1.34", "modelRevision": SHA})
    assert support.warnings(cfg, dt.date(2026, 10, 1)) == []
    (warning,) = support.warnings(cfg, dt.date(2026, 11, 30))
    assert warning == (
        "`kubernetesVersion` 1.34 leaves EKS standard support on 2026-12-02 (in 2 days); after "
        "that the control plane costs $0.60/h instead of $0.10/h; set `kubernetesVersion` to 1.35"
    )
    (late,) = support.warnings(cfg, dt.date(2026, 12, 3))
    assert late.startswith("`kubernetesVersion` 1.34 left EKS standard support on 2026-12-02")


def test_an_endpoint_open_to_the_internet_is_a_warning() -> None:
    cfg = load_stack("dev", {"endpointPublicAccessCidrs": ["0.0.0.0/0"], "modelRevision": SHA})
    assert support.warnings(cfg, dt.date(2026, 11, 30)) == [
        "`endpointPublicAccessCidrs` admits the whole internet to the EKS API endpoint; list "
        "only your operators' and CI runners' ranges"
    ]


def test_the_cli_shows_the_support_window(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--set", "kubernetesVersion='1.33'"]) == 0
    out = capsys.readouterr().out
    assert "1.33: EXTENDED support since 2026-07-29" in out
    assert "warnings:\n  - `kubernetesVersion` 1.33 left EKS standard support" in out


def test_the_catalogue_pins_a_commit_and_an_unpinned_model_is_a_warning() -> None:
    cfg = load_stack("dev")
    profile = catalog.MODELS[cfg.model]
    assert cfg.revision == profile.revision
    assert re.fullmatch(r"[0-9a-f]{40}", cfg.revision or "")
    assert profile.revision_checked is not None and profile.revision_source
    day = dt.date(2026, 11, 30)
    assert not [w for w in support.warnings(cfg, day) if "modelRevision" in w]
    assert load_stack("dev", {"modelRevision": SHA}).revision == SHA
    # A model the catalogue does not know (a stack's own profile) has no checked commit.
    custom = load_stack("dev", {"model": "example/small", "modelProfile": SMALL_PROFILE})
    assert custom.revision is None
    assert [w for w in support.warnings(custom, day) if "modelRevision" in w] == [
        "`modelRevision` is not pinned and the catalogue holds no checked commit of "
        "example/small: every rank downloads `main` on its own and two ranks can "
        "load different commits; set it to a 40-character commit SHA"
    ]


def test_the_plan_names_the_commit_and_where_it_comes_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pinned = catalog.MODELS["google/gemma-4-12B-it"].revision
    assert main([]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^model revision +{pinned} \(catalogue, checked 2026-12-01: ", out, re.M)
    assert main(["--set", f"modelRevision={SHA}"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^model revision +{SHA} \(`modelRevision`, as the stack sets\)$", out, re.M)
