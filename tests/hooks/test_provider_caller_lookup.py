"""tests/conftest.py gives the Amazon provider's hook support.aws_caller's look-ups of the operator or executor
that builds a client (its User-Agent names it): they answer what the provider's own ``inspect.stack()`` ones do."""

from __future__ import annotations

import types
from typing import Any

from airflow.providers.amazon.aws.hooks.base_aws import AwsGenericHook
from support import aws_caller


def both(target: str | None) -> tuple[Any, Any]:
    """(the provider's answer, support.aws_caller's) from this very frame's stack."""
    aws_caller.install()
    original, ours = aws_caller.ORIGINAL, aws_caller
    if target is None:
        return original["_find_executor_class_name"](), ours.find_executor_class_name()
    return original["_find_operator_class_name"](target), ours.find_operator_class_name(target)


class TrainingLikeOperator:
    def execute(self) -> tuple[Any, Any]:
        return Inner().poke()


class Inner:
    def poke(self) -> tuple[Any, Any]:
        return both("execute")


class Sensor:
    def poke(self) -> tuple[Any, Any]:
        return both("poke")


def test_the_hook_uses_the_frame_look_ups() -> None:
    assert aws_caller.install()
    assert AwsGenericHook._find_operator_class_name is aws_caller.find_operator_class_name
    assert AwsGenericHook._find_executor_class_name is aws_caller.find_executor_class_name


def test_the_innermost_function_of_that_name_gives_the_class_of_its_self() -> None:
    assert TrainingLikeOperator().execute() == ("TrainingLikeOperator", "TrainingLikeOperator")
    assert Sensor().poke() == ("Sensor", "Sensor")
    assert both("no_such_function") == (None, None)


def test_an_executor_is_the_last_class_of_the_first_module_that_has_a_base_executor() -> None:
    module = types.ModuleType("executors_here")
    exec(
        "class BaseExecutor: pass\nclass LocalishExecutor(BaseExecutor): pass\n"
        "def build(both):\n    return both(None)\n",
        module.__dict__,
    )
    assert module.build(both) == ("LocalishExecutor", "LocalishExecutor")
    assert both(None) == (None, None)
