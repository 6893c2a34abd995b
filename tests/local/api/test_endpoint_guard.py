"""The endpoint refuses what a web page could make a browser send: Origin, cross-site fetches, other Hosts.

Each refusal is checked against a control: the same raw request without the offending header is
served (a job is created, an object written), so a refusal is the guard's doing.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.local_jobkit import BUCKET, put_source, request, unique, wait

from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.api.app import RequestGuard, allowed_hosts

pytestmark = pytest.mark.slow

EVIL = "http://evil.example"
JSON_11 = "application/x-amz-json-1.1"


def _send(
    endpoint: LocalEndpoint, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One raw HTTP request to the endpoint (a ``Host`` in ``headers`` replaces the real one)."""
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _create_job(endpoint: LocalEndpoint, job: str, source: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """A browser-style CreateTrainingJob: unsigned JSON 1.1 POST, extra ``headers``."""
    body = json.dumps(request(job, source)).encode()
    base = {"X-Amz-Target": "SageMaker.CreateTrainingJob", "Content-Type": JSON_11}
    return _send(endpoint, "POST", "/", body, {**base, **headers})


def _put_object(endpoint: LocalEndpoint, key: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    return _send(endpoint, "PUT", f"/{BUCKET}/{key}", b"#!/bin/sh\necho pwned\n", headers)


def _no_job(endpoint: LocalEndpoint, sm: Any, job: str) -> None:
    with pytest.raises(ClientError) as err:
        sm.describe_training_job(TrainingJobName=job)
    assert err.value.response["Error"]["Message"] == "Requested resource not found."
    assert not endpoint.job_dir(job).exists()


def _no_object(s3: Any, key: str) -> None:
    with pytest.raises(ClientError) as err:
        s3.head_object(Bucket=BUCKET, Key=key)
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def _refused(status: int, headers: dict[str, str], body: bytes, why: str) -> None:
    assert status == 403
    assert "access-control-allow-origin" not in headers  # nothing lets the page read the answer
    assert b"Refused by the airflow-hetero local endpoint" in body
    assert why.encode() in body


@pytest.fixture(scope="module")
def source(s3: Any) -> str:
    return put_source(s3, "guard-tests", "print('ran')\n")


@pytest.mark.parametrize("method", ["OPTIONS", "POST"])
def test_cors_preflight_and_post_with_an_origin_are_refused(endpoint: LocalEndpoint, method: str) -> None:
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-amz-target"}
    status, headers, body = _send(endpoint, method, "/", headers={"Origin": EVIL, **preflight})
    _refused(status, headers, body, f"Origin: {EVIL}")
    control, control_headers, _ = _send(endpoint, method, "/", headers=preflight)
    assert control != 403 and "access-control-allow-origin" not in control_headers


def test_cross_origin_create_training_job_runs_nothing(endpoint: LocalEndpoint, sm: Any, source: str) -> None:
    job = unique("cors")
    for origin in (EVIL, "null", endpoint.url):  # the last: even a page the endpoint itself served
        status, headers, body = _create_job(endpoint, job, source, Origin=origin)
        _refused(status, headers, body, f"Origin: {origin}")
        assert json.loads(body)["__type"] == "AccessDeniedException"
        _no_job(endpoint, sm, job)
    status, _, body = _create_job(endpoint, job, source)  # the same request without Origin is served
    assert status == 200, body
    assert wait(sm, job)["TrainingJobStatus"] == "Completed"


def test_cross_origin_s3_put_writes_nothing(endpoint: LocalEndpoint, s3: Any) -> None:
    key = f"{unique('cors')}/sourcedir.tar.gz"
    status, headers, body = _put_object(endpoint, key, Origin=EVIL)
    _refused(status, headers, body, "Origin")
    assert b"<Code>AccessDenied</Code>" in body
    _no_object(s3, key)
    status, _, _ = _put_object(endpoint, key)
    assert status == 200
    s3.head_object(Bucket=BUCKET, Key=key)


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_cross_site_fetches_without_origin_are_refused(endpoint: LocalEndpoint, s3: Any, site: str) -> None:
    key = unique("fetch")
    status, headers, body = _put_object(endpoint, key, **{"Sec-Fetch-Site": site})
    _refused(status, headers, body, f"Sec-Fetch-Site: {site}")
    _no_object(s3, key)
    for own in ("none", "same-origin"):  # typed into the address bar / a page of the endpoint itself
        status, _, _ = _send(endpoint, "GET", f"/{BUCKET}", headers={"Sec-Fetch-Site": own})
        assert status == 200


@pytest.mark.parametrize("host", ["evil.example:{port}", "evil.example", "127.0.0.1:1", "127.0.0.2:{port}", ""])
def test_requests_naming_another_host_are_refused(
    endpoint: LocalEndpoint, sm: Any, s3: Any, source: str, host: str
) -> None:
    host = host.format(port=endpoint.port)  # a DNS-rebinding page sends its own host name
    job = unique("rebind")
    _refused(*_create_job(endpoint, job, source, Host=host), f"Host {host!r}")
    _no_job(endpoint, sm, job)
    key = unique("rebind")
    _refused(*_put_object(endpoint, key, Host=host), "is not this endpoint's address")
    _no_object(s3, key)


def test_loopback_names_of_the_port_are_accepted(endpoint: LocalEndpoint, s3: Any) -> None:
    for name in ("127.0.0.1", "localhost", "LOCALHOST", "[::1]"):
        key = unique("loopback")
        status, _, body = _put_object(endpoint, key, Host=f"{name}:{endpoint.port}")
        assert status == 200, (name, body)
        s3.head_object(Bucket=BUCKET, Key=key)


@pytest.mark.parametrize(
    ("service", "operation"),
    [
        ("sagemaker", "list_training_jobs"),
        ("s3", "list_buckets"),
        ("logs", "describe_log_groups"),
        ("cloudwatch", "list_metrics"),
        ("iam", "list_roles"),
        ("sts", "get_caller_identity"),
    ],
)
def test_a_client_with_a_wrong_host_gets_a_clear_error(endpoint: LocalEndpoint, service: str, operation: str) -> None:
    client = endpoint.client(service)
    getattr(client, operation)()  # served as is

    def rewrite(request: Any, **_: Any) -> None:
        request.headers["Host"] = f"evil.example:{endpoint.port}"

    client.meta.events.register("before-send", rewrite)
    with pytest.raises(ClientError) as err:
        getattr(client, operation)()
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert err.value.response["Error"]["Code"] in ("AccessDenied", "AccessDeniedException")
    message = err.value.response["Error"]["Message"]
    assert "Host 'evil.example:" in message and f"127.0.0.1:{endpoint.port}" in message


async def test_aiobotocore_clients_of_every_service_are_served(endpoint: LocalEndpoint) -> None:
    from aiobotocore.session import get_session

    session = get_session()
    options = {
        "endpoint_url": endpoint.url,
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    key = f"{unique('aio')}/hello.txt"
    async with session.create_client("s3", **options) as s3:
        await s3.put_object(Bucket=BUCKET, Key=key, Body=b"hello")
        got = await s3.get_object(Bucket=BUCKET, Key=key)
        async with got["Body"] as stream:
            assert await stream.read() == b"hello"
    async with session.create_client("cloudwatch", **options) as cloudwatch:
        await cloudwatch.put_metric_data(Namespace="Guard", MetricData=[{"MetricName": "aio", "Value": 2.0}])
        metrics = await cloudwatch.list_metrics(Namespace="Guard")
        assert [m["MetricName"] for m in metrics["Metrics"]] == ["aio"]
    async with session.create_client("iam", **options) as iam:
        role = await iam.create_role(RoleName="GuardRole", AssumeRolePolicyDocument="{}")
        assert role["Role"]["Arn"] == "arn:aws:iam::123456789012:role/GuardRole"
    async with session.create_client("sts", **options) as sts:
        assert (await sts.get_caller_identity())["Account"] == "123456789012"


# -- the guard on its own (no server): bind addresses, the port, failing closed -------------------


def _call(guard: RequestGuard, **headers: str) -> tuple[str, bytes]:
    """Status line and body of ``guard`` for a GET with ``headers`` (WSGI names, e.g. HTTP_HOST)."""
    seen: list[str] = []

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen.append(status)

    body = b"".join(guard({"REQUEST_METHOD": "GET", "PATH_INFO": "/", **headers}, start_response))
    return seen[0], body


def _ok_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("200 OK", [])
    return [b"served"]


def test_allowed_hosts_are_the_bound_address_and_loopback_names_with_the_port() -> None:
    assert allowed_hosts("127.0.0.1", 4566) == {"127.0.0.1:4566", "localhost:4566", "[::1]:4566"}
    assert allowed_hosts("::1", 4566) == {"127.0.0.1:4566", "localhost:4566", "[::1]:4566"}
    assert "10.1.2.3:4566" in allowed_hosts("10.1.2.3", 4566)
    assert allowed_hosts("127.0.0.1", 80) >= {"127.0.0.1", "localhost", "[::1]", "127.0.0.1:80"}


def test_guard_refuses_every_host_until_bound() -> None:
    guard = RequestGuard(_ok_app, "127.0.0.1")
    status, body = _call(guard, HTTP_HOST="127.0.0.1:4566")
    assert status == "403 Forbidden" and b"accepted: none yet" in body
    guard.bind(4566)
    assert _call(guard, HTTP_HOST="127.0.0.1:4566") == ("200 OK", b"served")
    assert _call(guard, HTTP_HOST="127.0.0.1:4567")[0] == "403 Forbidden"
    assert _call(guard)[0] == "403 Forbidden"  # no Host at all


@pytest.mark.parametrize("bind", ["0.0.0.0", "", "::"])
def test_guard_bound_to_every_interface_accepts_any_host_but_no_origin(bind: str) -> None:
    guard = RequestGuard(_ok_app, bind)
    guard.bind(4566)
    assert _call(guard, HTTP_HOST="my-laptop.lan:4566") == ("200 OK", b"served")
    status, body = _call(guard, HTTP_HOST="my-laptop.lan:4566", HTTP_ORIGIN="http://my-laptop.lan:4566")
    assert status == "403 Forbidden" and b"Origin: http://my-laptop.lan:4566" in body
    assert _call(guard, HTTP_HOST="x:4566", HTTP_SEC_FETCH_SITE="cross-site")[0] == "403 Forbidden"
