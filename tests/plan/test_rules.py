"""The input rules that depend on the day, and the catalogue's reading of instance names."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, fields

import pytest

from infra.plan import catalog, prices, rules
from infra.plan.config import ConfigError
from infra.plan.loading import load_config
from infra.plan.sizing import Plan, plan
from tests.plan.profiles import REQUIRED as BASE

TODAY = dt.date(2026, 12, 1)


def _minor(version: str) -> int:
    return int(version.split(".")[1])


OLDEST = min(prices.EKS_VERSIONS, key=_minor)
NEWEST = max(prices.EKS_VERSIONS, key=_minor)


def test_an_end_date_of_today_is_still_accepted() -> None:
    cfg = load_config({**BASE, "endDate": str(TODAY)})
    rules.check_dates(cfg, TODAY)
    with pytest.raises(ConfigError) as error:
        rules.check_dates(cfg, TODAY + dt.timedelta(days=1))
    assert str(error.value) == (
        f"`endDate` {TODAY} is in the past (today is {TODAY + dt.timedelta(days=1)}); clean-up "
        "jobs treat the stack as expired; set a future date such as "
        f"{TODAY + dt.timedelta(days=1 + rules.END_DATE_FIX_DAYS)}"
    )


def test_a_version_older_than_any_eks_runs_is_refused_and_a_newer_one_passes() -> None:
    newer = f"1.{_minor(NEWEST) + 1}"
    rules.check_dates(load_config({**BASE, "kubernetesVersion": newer}), TODAY)
    older = f"1.{_minor(OLDEST) - 1}"
    cfg = load_config({**BASE, "kubernetesVersion": older})
    with pytest.raises(ConfigError) as error:
        rules.check_dates(cfg, TODAY)
    assert str(error.value) == (
        f"`kubernetesVersion` {older} is older than any version EKS still runs; use {NEWEST}"
    )


def test_a_version_runs_until_its_extended_support_ends() -> None:
    for version, support in prices.EKS_VERSIONS.items():
        cfg = load_config({**BASE, "kubernetesVersion": version, "endDate": "2099-01-01"})
        rules.check_dates(cfg, support.end_of_extended)
        with pytest.raises(ConfigError) as error:
            rules.check_dates(cfg, support.end_of_extended + dt.timedelta(days=1))
        assert str(error.value) == (
            f"`kubernetesVersion` {version} left EKS extended support on "
            f"{support.end_of_extended}; EKS no longer creates clusters of it; use {NEWEST}"
        )


@pytest.mark.parametrize(
    ("name", "graviton"),
    [
        ("m7g.2xlarge", True),
        ("c7gn.large", True),
        ("r8gd.xlarge", True),
        ("x2gd.16xlarge", True),
        ("m7g.metal", True),
        ("m7i.2xlarge", False),
        ("m5.large", False),
        ("t4g", False),
        ("M7G.2XLARGE", False),
        ("m7g.2xlarge.extra", False),
        ("m7gx2xlarge", False),
    ],
)
def test_graviton_names_carry_a_g_after_the_generation(name: str, graviton: bool) -> None:
    assert catalog.is_graviton_name(name) is graviton


def test_the_plan_as_json_has_every_field_as_plain_data() -> None:
    p = plan(load_config(BASE))
    data = p.to_json()
    assert set(data) == {f.name for f in fields(Plan)} | {
        "weights_gib_per_stage",
        "overhead_gib_per_pod",
    }
    assert data["ranks"] == [asdict(r) for r in p.ranks]
    assert data["reasons"] == list(p.reasons)
    assert data["front_door"]["reasons"] == list(p.front_door.reasons)
    assert data["weights_gib_per_stage"] == [r.weights_gib for r in p.ranks]
    assert data["overhead_gib_per_pod"] == max(r.overhead_gib for r in p.ranks)
    # Lists, not tuples: what `json.loads` of the CLI's `--json` gives back is the same object.
    assert json.loads(json.dumps(data)) == data
    for key in ("ranks", "reasons", "weights_gib_per_stage"):
        assert isinstance(data[key], list), key
    assert isinstance(data["front_door"]["reasons"], list)


def test_versions_are_ordered_by_minor_number_not_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # As text "1.10" sorts before "1.9"; the newest and the oldest are chosen by minor number.
    support = prices.EKS_VERSIONS[NEWEST]
    monkeypatch.setattr(prices, "EKS_VERSIONS", {"1.9": support, "1.10": support})
    load_config({**BASE, "kubernetesVersion": "1.11"})
    with pytest.raises(ConfigError) as error:
        load_config({**BASE, "kubernetesVersion": "1.12"})
    assert str(error.value) == (
        "`kubernetesVersion` 1.12 is newer than any EKS version the catalogue knows (newest "
        "1.10); use 1.10"
    )
    # Minor 9, written with two digits: the oldest the catalogue knows, so still accepted.
    rules.check_dates(load_config({**BASE, "kubernetesVersion": "1.09"}), TODAY)
    with pytest.raises(ConfigError) as error:
        rules.check_dates(load_config({**BASE, "kubernetesVersion": "1.08"}), TODAY)
    assert str(error.value) == (
        "`kubernetesVersion` 1.08 is older than any version EKS still runs; use 1.10"
    )
