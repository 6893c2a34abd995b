"""Pure parts of the local endpoint's host plan: seeded, shuffled, complete."""

from __future__ import annotations

from pathlib import Path

from airflow_hetero.job.resource_config import GroupSpec
from airflow_hetero.local.training.layout import plan_cluster


def test_plan_is_seeded_shuffled_and_complete(tmp_path: Path) -> None:
    groups = [GroupSpec("data", "ml.c5.xlarge", 3), GroupSpec("dnn", "ml.p3.2xlarge", 2)]
    plans = [plan_cluster(groups, seed=f"0/job-{i}", slot=7, hosts_root=tmp_path) for i in range(20)]
    for plan in plans:
        assert [h.name for h in plan.hosts] == [f"algo-{n}" for n in range(1, 6)]
        assert sorted(plan.members["data"] + plan.members["dnn"]) == sorted(h.name for h in plan.hosts)
        assert len(plan.members["data"]) == 3
        assert {h.address for h in plan.hosts} == {f"127.0.7.{n}" for n in range(1, 6)}
        assert all(h.base_dir == tmp_path / h.name for h in plan.hosts)
    again = plan_cluster(groups, seed="0/job-3", slot=7, hosts_root=tmp_path)
    assert again.members == plans[3].members
    # not simply "first group gets the first numbers"
    assert any(p.members["data"] != ["algo-1", "algo-2", "algo-3"] for p in plans)
    resource = plans[0].resource_config(plans[0].hosts[0])
    assert resource["instance_groups"][0]["hosts"] == plans[0].members["data"]
