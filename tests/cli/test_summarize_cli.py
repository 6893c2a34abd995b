"""``airflow-hetero summarize``: its arguments fail before any AWS call, with one line each (the run
against the offline endpoint is in tests/local/test_log_summary_endpoint.py)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from airflow_hetero.cli import main, parse_prices


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("bad arguments must fail before any connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_prices_parse_into_the_prices_mapping() -> None:
    assert parse_prices(["ml.p4d.24xlarge=37.69", " ml.c5.xlarge = 0.2"]) == {
        "ml.p4d.24xlarge": 37.69,
        "ml.c5.xlarge": 0.2,
    }
    assert parse_prices([]) == {}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--price", "ml.p4d.24xlarge"], "--price 'ml.p4d.24xlarge': expected TYPE=PRICE"),
        (["--price", "ml.p4d.24xlarge=cheap"], "--price 'ml.p4d.24xlarge=cheap': expected TYPE=PRICE"),
        (["--price", "ml.p4d.24xlarge=-1"], "prices: ml.p4d.24xlarge must be a price per instance-hour >= 0"),
        (["--price", "ml.p4d.24xlarge=inf"], "prices: ml.p4d.24xlarge must be a price per instance-hour >= 0"),
        (["--price", "p4d=3"], "prices: 'p4d' is not an instance type"),
        (["--currency", "euro"], "currency must be a three-letter ISO-4217 code"),
        (["--tail-lines", "-1", "--region", "us-east-1", "--no-pricing-api"], "tail_lines"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["summarize", "job-1", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("airflow-hetero summarize: ") and message in err, err
    assert len(err.strip().splitlines()) == 1


def test_no_region_exits_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    assert main(["summarize", "job-1"]) == 2
    assert "no AWS region: give --region" in capsys.readouterr().err
