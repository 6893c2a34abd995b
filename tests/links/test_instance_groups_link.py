"""The "Instance groups" extra link: its URL, and the XCom it pushes on Airflow 3 only."""

from __future__ import annotations

import pytest

from airflow_hetero._compat import AIRFLOW_V_3


def test_extra_link_url_and_push() -> None:
    from unittest.mock import MagicMock

    from airflow_hetero.links.instance_groups import InstanceGroupsLink, persist_instance_groups_link

    key = MagicMock(dag_id="my dag", run_id="manual__2026-01-01T00:00:00+00:00", task_id="s", map_index=2)
    url = InstanceGroupsLink().get_link(MagicMock(), ti_key=key)
    assert url == (
        "/hetero/instance-groups?dag_id=my+dag&run_id=manual__2026-01-01T00%3A00%3A00%2B00%3A00&task_id=s&map_index=2"
    )
    ti = MagicMock(dag_id="d", run_id="r", task_id="t", map_index=-1)
    persist_instance_groups_link({"ti": ti})  # type: ignore[typeddict-item]
    if not AIRFLOW_V_3:  # Airflow 2 calls get_link (above) instead of reading an XCom
        ti.xcom_push.assert_not_called()
        return
    ti.xcom_push.assert_called_once_with(
        key="_link_InstanceGroupsLink", value="/hetero/instance-groups?dag_id=d&run_id=r&task_id=t&map_index=-1"
    )


def test_extra_link_on_airflow_2_pushes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow 2's BaseOperatorLink has no ``xcom_key``: the webserver calls get_link instead."""
    from unittest.mock import MagicMock

    from airflow_hetero.links import instance_groups

    class Airflow2Link:
        name = "Instance groups"

    monkeypatch.setattr(instance_groups, "InstanceGroupsLink", Airflow2Link)
    ti = MagicMock(dag_id="d", run_id="r", task_id="t", map_index=-1)
    instance_groups.persist_instance_groups_link({"ti": ti})  # type: ignore[typeddict-item]
    ti.xcom_push.assert_not_called()
