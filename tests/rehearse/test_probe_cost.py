"""The rehearsal's liveness-cost row (`tools.rehearse.measure.probe_cost`), run directly against
the stand-in leader: both ways run the same check, and the served one costs less CPU."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.vllm_leader import fake_leader
from tools.rehearse.measure import probe_cost


def test_a_served_check_costs_less_cpu_than_a_spawned_python(tmp_path: Path) -> None:
    with fake_leader() as (port, leader):
        row = probe_cost.row(port, "m", "k", tmp_path)
        # One proof each way, then only /health and /metrics: the idle check runs hourly here.
        assert len(leader.completions) == 2
        assert leader.keys == ["Bearer k", "Bearer k"]
    print(row.note)
    assert row.ok, row.note
    spawned, served = (float(part.split(" ms")[0]) for part in row.observed.split(", "))
    assert 0 < served < spawned
    assert (tmp_path / "spawned.json").exists() and (tmp_path / "served.json").exists()
