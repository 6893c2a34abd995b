"""``LocalEndpoint``'s option objects: each default stated once (its class), the flat keywords of earlier
releases still work for one release and warn, ``local serve`` builds the objects from its flags."""

from __future__ import annotations

import argparse
import warnings
from dataclasses import fields

import pytest

from airflow_hetero.local import BatchOptions, LocalEndpoint, RunOptions, SpotOptions
from airflow_hetero.local.api.flat_options import FLAT_KEYWORDS
from airflow_hetero.local.cli import register


def test_the_option_objects_are_the_endpoints_options() -> None:
    run, spot, batch = RunOptions(stop_grace=1.0), SpotOptions(restart_delay=0.5), BatchOptions(poll_interval=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new form warns about nothing
        endpoint = LocalEndpoint(seed=3, run=run, spot=spot, batch=batch, capacity={"ml.p3.2xlarge": 0})
    assert endpoint.options == RunOptions(stop_grace=1.0, spot=SpotOptions(restart_delay=0.5, seed=3))
    assert endpoint.batch_options == batch
    assert endpoint.capacity.state()["capacity"] == {"ml.p3.2xlarge": 0}
    defaults = LocalEndpoint()
    assert (defaults.options, defaults.batch_options) == (RunOptions(), BatchOptions())
    nested = LocalEndpoint(seed=2, run=RunOptions(spot=SpotOptions(saving=0.5)))  # run.spot is the spot too
    assert nested.options.spot == SpotOptions(saving=0.5, seed=2)


def test_the_spot_options_are_given_once() -> None:
    with pytest.raises(ValueError, match="give the spot options once"):
        LocalEndpoint(run=RunOptions(spot=SpotOptions(saving=0.5)), spot=SpotOptions(saving=0.6))


def test_the_flat_keywords_still_work_and_say_what_to_write_instead() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        old = LocalEndpoint(
            seed=7,
            stop_grace=1.0,
            max_request_bytes=1024,
            spot_interrupt_after=60,
            spot_restart_delay=0.2,
            checkpoint_sync_interval=0.3,
            batch_requeue_delay=0.3,
        )
    assert len(caught) == 1 and caught[0].filename == __file__  # the caller's line, not the endpoint's
    assert str(caught[0].message) == (
        "LocalEndpoint(stop_grace=..., max_request_bytes=..., spot_interrupt_after=..., spot_restart_delay=..., "
        "checkpoint_sync_interval=..., batch_requeue_delay=...) is deprecated and goes in the next release; "
        "write LocalEndpoint(run=RunOptions(stop_grace=..., max_request_bytes=...), "
        "spot=SpotOptions(interrupt_after=..., restart_delay=..., checkpoint_sync_interval=...), "
        "batch=BatchOptions(requeue_delay=...)) (RunOptions, SpotOptions and BatchOptions: "
        "from airflow_hetero.local import ...)"
    )
    new = LocalEndpoint(
        seed=7,
        run=RunOptions(stop_grace=1.0, max_request_bytes=1024),
        spot=SpotOptions(interrupt_after=(60.0,), restart_delay=0.2, checkpoint_sync_interval=0.3),
        batch=BatchOptions(requeue_delay=0.3),
    )
    assert (old.options, old.batch_options) == (new.options, new.batch_options)


def test_every_flat_keyword_lands_on_its_field() -> None:
    for name, (argument, cls, field) in FLAT_KEYWORDS.items():
        value = (5.0,) if name == "spot_interrupt_after" else 0.5
        with pytest.warns(DeprecationWarning, match=rf"{argument}={cls}\({field}=\.\.\.\)"):
            endpoint = LocalEndpoint(**{name: value})
        options = {"run": endpoint.options, "spot": endpoint.options.spot, "batch": endpoint.batch_options}
        assert getattr(options[argument], field) == value, name


def test_flat_keywords_fold_into_given_objects_and_keep_their_checks() -> None:
    with pytest.warns(DeprecationWarning):
        endpoint = LocalEndpoint(run=RunOptions(metrics_interval=0.3, spot=SpotOptions(saving=0.5)), stop_grace=1.0)
    assert endpoint.options == RunOptions(metrics_interval=0.3, stop_grace=1.0, spot=SpotOptions(saving=0.5))
    with pytest.warns(DeprecationWarning):
        endpoint = LocalEndpoint(run=RunOptions(spot=SpotOptions(saving=0.5)), spot_restart_delay=2.0)
    assert endpoint.options.spot == SpotOptions(saving=0.5, restart_delay=2.0)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="spot_saving must be at least 0"):
        LocalEndpoint(spot_saving=1.5)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="batch_poll_interval must be above 0"):
        LocalEndpoint(batch_poll_interval=0)


def test_a_keyword_never_known_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'stop_grase'"):
        LocalEndpoint(stop_grase=1.0)


def test_local_serve_reads_its_defaults_from_the_option_classes() -> None:
    parser = argparse.ArgumentParser(prog="airflow-hetero")
    register(parser.add_subparsers(dest="command"))
    args = vars(parser.parse_args(["local", "serve"]))
    flags = {"batch_requeue_delay": BatchOptions.requeue_delay}
    flags |= {f.name: getattr(RunOptions, f.name) for f in fields(RunOptions) if f.name in args}
    flags |= {f"spot_{f.name}": getattr(SpotOptions, f.name) for f in fields(SpotOptions) if f"spot_{f.name}" in args}
    flags["checkpoint_sync_interval"] = SpotOptions.checkpoint_sync_interval
    assert len(flags) == 12  # 5 of RunOptions, 1 of BatchOptions, 6 of SpotOptions (interrupt_after: a list)
    flags["spot_interrupt_after"] = []
    assert {name: args[name] for name in flags} == flags


def test_the_reference_states_the_option_classes_defaults() -> None:
    """docs/local.md's "Reference: LocalEndpoint" writes each option class with its defaults, as the class has them."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "local.md").read_text()
    reference = page.split("## Reference: `LocalEndpoint`", 1)[1].split("\n## ", 1)[0]
    classes = {"RunOptions": RunOptions, "SpotOptions": SpotOptions, "BatchOptions": BatchOptions}
    stated = re.findall(r"^((RunOptions|SpotOptions|BatchOptions)\(.*?\))$", reference, re.MULTILINE | re.DOTALL)
    assert [name for _, name in stated] == ["RunOptions", "SpotOptions", "BatchOptions"]
    for text, name in stated:
        assert eval(text, dict(classes)) == classes[name](), name  # the page's own text
        written = set(re.findall(r"(\w+)=", text))
        assert written == {f.name for f in fields(classes[name])}, name  # every field, none else
