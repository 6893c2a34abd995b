"""``airflow-hetero local serve`` where the package's ``local`` extra is not installed."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.installed import run_without_modules

from airflow_hetero.local import BatchOptions, RunOptions, SpotOptions
from airflow_hetero.sagemaker_facts import STAND_IN_SPOT_SAVING


@pytest.mark.parametrize("missing", ["moto", "werkzeug", "psutil"])
def test_serve_without_the_local_extra_says_what_to_install_in_one_line(tmp_path: Path, missing: str) -> None:
    proc = run_without_modules((missing,), "local", "serve", "--workdir", str(tmp_path / "endpoint"))
    assert proc.returncode == 3
    assert proc.stderr == (
        f"airflow-hetero local serve: the offline endpoint needs the 'local' extra (No module named '{missing}'): "
        "pip install 'airflow-hetero[local]'\n"
    )
    assert proc.stdout == ""  # no banner: nothing was started
    assert not (tmp_path / "endpoint").exists()


def test_endpoint_started_from_python_without_the_extra_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from airflow_hetero.local.api.server import LocalEndpoint

    monkeypatch.setitem(sys.modules, "werkzeug.serving", None)  # import raises ImportError, as when absent
    with pytest.raises(RuntimeError, match=r"needs the 'local' extra .*pip install 'airflow-hetero\[local\]'$"):
        LocalEndpoint(workdir=tmp_path / "endpoint").start()
    assert not (tmp_path / "endpoint").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--capacity", "ml.bogus=1"], "argument --capacity: 'ml.bogus' is not a SageMaker training instance type"),
        (["--capacity", "ml.p4d.24xlarge=-1"], "ml.p4d.24xlarge must be a whole number of instances >= 0, not -1"),
        (["--quota", "ml.p4d.24xlarge"], "argument --quota: 'ml.p4d.24xlarge' is not TYPE=N"),
        (["--quota", "ml.g5.xlarge=lots"], "argument --quota: ml.g5.xlarge must be a whole number"),
    ],
)
def test_bad_capacity_and_quota_flags_are_refused_clearly(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_hetero.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["local", "serve", *args])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_capacity_and_quota_flags_reach_the_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_hetero.cli import main
    from airflow_hetero.local.api import server

    made: dict[str, object] = {}

    class Stop(Exception):
        pass

    class Endpoint:
        def __init__(self, **kwargs: object) -> None:
            made.update(kwargs)

        def start(self) -> None:
            raise Stop

        def stop(self) -> None:
            return None

    monkeypatch.setattr(server, "LocalEndpoint", Endpoint)
    argv = ["local", "serve", "--workdir", str(tmp_path), "--capacity", "ml.p4d.24xlarge=0,ml.g5.12xlarge=2"]
    with pytest.raises(Stop):
        main([*argv, "--capacity", "ml.g5.12xlarge=3", "--quota", "ml.p4d.24xlarge=unlimited,ml.c5.xlarge=10"])
    assert made["capacity"] == {"ml.p4d.24xlarge": 0, "ml.g5.12xlarge": 3}  # a later flag wins for its types
    assert made["quota"] == {"ml.p4d.24xlarge": None, "ml.c5.xlarge": 10}
    with pytest.raises(Stop):
        main(["local", "serve", "--workdir", str(tmp_path)])
    assert made["capacity"] == {} and made["quota"] == {}  # unlimited


def test_spot_flags_reach_the_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_hetero.cli import main
    from airflow_hetero.local.api import server

    made: dict[str, object] = {}

    class Stop(Exception):
        pass

    def endpoint(**kwargs: object) -> None:
        made.update(kwargs)
        raise Stop

    monkeypatch.setattr(server, "LocalEndpoint", endpoint)
    spot = ["--spot-interrupt-after", "60", "--spot-interrupt-after", "30", "--spot-interrupt-probability", "0.1"]
    spot += ["--spot-interrupt-interval", "5", "--spot-restart-delay", "2", "--spot-saving", "0.6"]
    with pytest.raises(Stop):
        main(["local", "serve", "--workdir", str(tmp_path), "--seed", "4", *spot, "--checkpoint-sync-interval", "3"])
    assert made["spot"] == SpotOptions(
        interrupt_after=(60.0, 30.0),
        interrupt_probability=0.1,
        interrupt_interval=5.0,
        restart_delay=2.0,
        saving=0.6,
        checkpoint_sync_interval=3.0,
    )
    assert made["seed"] == 4
    with pytest.raises(Stop):
        main(["local", "serve", "--workdir", str(tmp_path)])
    assert made["spot"] == SpotOptions() and SpotOptions().saving == STAND_IN_SPOT_SAVING
    assert (made["run"], made["batch"]) == (RunOptions(), BatchOptions())  # every default is its class's


def test_a_spot_flag_out_of_range_is_refused_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_hetero.cli import main

    assert main(["local", "serve", "--workdir", str(tmp_path), "--spot-saving", "1.5"]) == 2
    assert "airflow-hetero local serve: spot_saving must be at least 0 and below 1" in capsys.readouterr().err


@pytest.mark.slow
def test_a_served_endpoint_shows_its_capacity_and_another_process_changes_it(tmp_path: Path) -> None:
    from support.serve_process import serve

    from airflow_hetero.local.api.control import change_capacity

    proc, url, banner, _ = serve(tmp_path / "endpoint", "--capacity", "ml.p4d.24xlarge=0", "--quota", "ml.g5.xlarge=4")
    try:
        assert "capacity (other types unlimited): ml.p4d.24xlarge=0" in banner
        assert "quota (other types unlimited): ml.g5.xlarge=4" in banner
        assert f"{url}/_airflow-hetero/capacity" in "\n".join(banner)
        assert f"{url}/_airflow-hetero/interrupt" in "\n".join(banner)
        state = change_capacity(url, capacity={"ml.p4d.24xlarge": 2})
        assert state["capacity"] == {"ml.p4d.24xlarge": 2} and state["quota"] == {"ml.g5.xlarge": 4}
    finally:
        proc.terminate()
        proc.wait(60)
