"""The task identity a job carries: stamped into the request's tags and environment."""

from __future__ import annotations

import json

from airflow_hetero.job.identity import IDENTITY_ENV, IDENTITY_TAG, TaskIdentity


def test_stamp_keeps_user_tags_and_environment() -> None:
    identity = TaskIdentity("d", "t", "r")
    request = {
        "Tags": [{"Key": "team", "Value": "ml"}, {"Key": IDENTITY_TAG, "Value": "forged"}],
        "Environment": {"A": "1"},
    }
    stamped = identity.stamp(request)
    assert [t for t in stamped["Tags"] if t["Key"] == IDENTITY_TAG] == [{"Key": IDENTITY_TAG, "Value": identity.digest}]
    assert {"Key": "team", "Value": "ml"} in stamped["Tags"]
    assert stamped["Environment"] == {"A": "1", IDENTITY_ENV: identity.digest}
    assert json.dumps(stamped)  # plain data
