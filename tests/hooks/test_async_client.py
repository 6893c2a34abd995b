"""The hook's async client: botocore's data is read in a worker thread, never in the event loop."""

from __future__ import annotations

import threading
from typing import Any

import botocore.loaders
import pytest
from airflow.providers.amazon.aws.hooks import base_aws
from support.moto_jobs import aws_connection_env

from airflow_hetero.hooks import aws_base
from airflow_hetero.hooks.aws_base import preload_client_data
from airflow_hetero.hooks.training import HeteroTrainingHook


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every botocore data file read from now on, with the reading thread; a cold shared loader."""
    seen: list[tuple[str, int]] = []
    original = botocore.loaders.JSONFileLoader.load_file

    def load_file(self: Any, file_path: str) -> Any:
        seen.append((file_path, threading.get_ident()))
        return original(self, file_path)

    monkeypatch.setattr(botocore.loaders.JSONFileLoader, "load_file", load_file)
    monkeypatch.setattr(base_aws, "_loader", botocore.loaders.Loader())  # nothing cached yet
    monkeypatch.setattr(aws_base, "_preloaded", type(aws_base._preloaded)())
    return seen


async def test_building_the_client_reads_no_file_in_the_event_loop(
    reads: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(*aws_connection_env("async_client_conn", "http://127.0.0.1:9"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    loop_thread = threading.get_ident()
    hook = HeteroTrainingHook(aws_conn_id="async_client_conn")
    async with await hook.async_client() as client:
        assert client.meta.service_model.service_name == "sagemaker"
    assert any("sagemaker" in path for path, _ in reads)  # the model was read, cold ...
    assert [path for path, thread in reads if thread == loop_thread] == []  # ... never by the loop
    reads.clear()
    async with await hook.async_client():
        pass
    assert reads == []  # once per loader: the second client reads nothing


def test_preloading_once_per_loader_and_service(reads: list[tuple[str, int]]) -> None:
    session = base_aws.BaseSessionFactory(conn=None).get_async_session()
    preload_client_data(session, "sagemaker")
    first = len(reads)
    preload_client_data(session, "sagemaker")
    assert first > 0 and len(reads) == first


def test_a_failing_preload_is_only_a_missed_head_start(
    reads: list[tuple[str, int]], caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def get_component(self, name: str) -> object:
            return base_aws._loader

        def create_client(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("no aiohttp today")

    preload_client_data(Broken(), "sagemaker")  # no exception: the real client loads what it needs
    assert "Could not preload" in caplog.text and "no aiohttp today" in caplog.text
