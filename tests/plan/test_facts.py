"""The facts table (`infra/plan/instances.toml`): every figure traced to a dated source, and a
broken table refused in one line naming the file, the row and the column."""

from pathlib import Path

import pytest

from infra.plan import catalog, facts, prices

TABLE = facts.FACTS
FIGURES = ("vcpu", "memory_gib", "max_pods", "network_mbps", "usd_per_hour", "decode_gbps_per_vcpu")


@pytest.mark.parametrize("name", sorted(TABLE.types))
def test_every_figure_of_every_row_has_a_source_of_its_kind(name: str) -> None:
    row = TABLE.types[name]
    assert sorted(row.sources) == sorted(FIGURES), name
    for column, source in row.sources.items():
        where = f"{name} {column}: {source.cite}"
        if source.kind == "published":
            assert source.read is not None and source.cite, where
        elif source.kind == "measured":
            assert source.machine == name and source.date is not None and source.pod_vcpu, where
        else:
            assert source.kind == "modelled" and source.cite, where


def test_the_one_measured_decode_is_the_calibrated_type_and_the_others_derive_from_it() -> None:
    measured = [
        t for t in TABLE.types.values() if t.sources["decode_gbps_per_vcpu"].kind == "measured"
    ]
    assert [t.name for t in measured] == [catalog.MEASURED_DECODE_TYPE] == ["m7g.2xlarge"]
    assert catalog.MEASURED_DECODE_CPU == 6
    rate = measured[0].decode_gbps_per_vcpu
    reference_mts = TABLE.generations[measured[0].generation].mt_per_s
    for row in TABLE.types.values():
        scaled = round(rate * TABLE.generations[row.generation].mt_per_s / reference_mts, 2)
        assert row.decode_gbps_per_vcpu == scaled, row.name


def test_every_catalogue_type_has_a_price_that_prints_the_day_its_source_was_read() -> None:
    for key, price in TABLE.prices.items():
        assert f"read {prices.READ_ON}" in price.source, key
    for name in catalog.INSTANCE_TYPES:
        price = prices.ec2_price(name)
        assert price is not None and price.usd > 0 and price.as_of, name
        assert f"read {prices.READ_ON}" in price.source, name
    calendar = TABLE.sources["eks-calendar"]
    assert calendar.read == prices.READ_ON and f"read {calendar.read}" in calendar.cite
    node = prices.ec2_price("m7g.2xlarge")
    assert node is not None and node.usd == 0.3264 and node.as_of == "2026-07-20"
    assert prices.ec2_price("m7g.16xlarge") is None


BROKEN = [
    (
        '["m7g.2xlarge", "graviton3", 8,',
        '["m7g.2xlarge", "graviton3", "8",',
        "[types] row 18 (m7g.2xlarge), column `vcpu`: '8' is not a whole number; write a whole "
        "number there",
    ),
    (
        '16.5,  "field-report"]',
        '16.5,  "field-reprot"]',
        "[types] row 18 (m7g.2xlarge), column `decode_gbps_per_vcpu`: source 'field-reprot' is "
        "not in [sources]; add it there or fix the name",
    ),
    (
        '58,  3750,  0.3264,  16.5,  "field-report"]',
        '58,  3750,  0.3264,  "field-report"]',
        "[types] row 18: 8 values for 9 columns; give each one",
    ),
    (
        '["m6g.large",',
        '["m7g.2xlarge",',
        "[types] row 18 (m7g.2xlarge), column `name`: a second row of m7g.2xlarge; keep one",
    ),
    (
        'machine = "m7g.2xlarge"\n',
        "",
        "[sources.field-report], column `machine`: a measured source needs its machine and date",
    ),
    (
        "read = 2026-12-06\n",
        "",
        "[sources.ec2-types], column `read`: a published source needs the day it was read",
    ),
    (
        '["1.30", 2024-05-23, 2025-07-23, 2026-07-23]',
        '["1.30", 2024-05-23, 2025-07-23, "2026-07-23"]',
        "[eks_versions] row 1 (1.30), column `end_of_extended`: '2026-07-23' is not a date "
        "(YYYY-MM-DD); write a date (YYYY-MM-DD) there",
    ),
]


@pytest.mark.parametrize(("old", "new", "message"), BROKEN)
def test_a_broken_table_is_refused_naming_file_row_and_column(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    text = facts.PATH.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "instances.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(facts.FactsError) as raised:
        facts.load(path)
    assert str(raised.value) == f"{path} {message}"
