"""The Amazon provider's caller look-up, done on the frames alone (installed by tests/conftest.py).

The provider's ``AwsGenericHook`` names the operator (or executor) that builds an AWS client in the client's
User-Agent. It finds it with ``inspect.stack()``, which reads the source lines of every frame on the stack; a
frame's source is never used, only its function name, its ``self`` and its module's globals. Under pytest the
stack is some eighty frames deep, and the suite builds well over a thousand clients: the look-up was about a
tenth of the xdist workers' CPU (py-spy, the Airflow 3 suite). :func:`install` gives the hook the same two
look-ups walking the frames themselves: the same frames in the same order, the same answer, no source read.
A provider whose hook has no such static methods is left as it is.
"""

from __future__ import annotations

import inspect
import sys
from types import FrameType
from typing import Any

BASE_AWS = "airflow.providers.amazon.aws.hooks.base_aws"
#: The provider's own functions, kept for the test that compares their answers with these.
ORIGINAL: dict[str, Any] = {}


def _frames() -> list[FrameType]:
    """The caller's frame and its callers, outermost last (what ``inspect.stack()`` lists, as frames)."""
    frames = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def find_operator_class_name(target_function_name: str) -> str | None:
    """The class of ``self`` in the innermost frame running a function named ``target_function_name``."""
    for frame in _frames():
        if frame.f_code.co_name == target_function_name:
            return str(frame.f_locals["self"].__class__.__name__)  # KeyError without a self, as before
    return None


def find_executor_class_name() -> str | None:
    """In the innermost frame whose module has a class named ``BaseExecutor``, the last class of that module."""
    for frame in _frames():
        classes = [name for name, obj in frame.f_globals.items() if inspect.isclass(obj)]
        if "BaseExecutor" in classes:
            return classes[-1]
    return None


def install() -> bool:
    """Give the provider's hook these look-ups, once its module is imported; True once there is nothing left to do
    (installed, or a provider whose hook looks its caller up some other way)."""
    module = sys.modules.get(BASE_AWS)
    if module is None:
        return False
    hook = module.AwsGenericHook
    replacements = {
        "_find_operator_class_name": find_operator_class_name,
        "_find_executor_class_name": find_executor_class_name,
    }
    if not all(isinstance(inspect.getattr_static(hook, name, None), staticmethod) for name in replacements):
        return True
    for name, function in replacements.items():
        ORIGINAL.setdefault(name, getattr(hook, name))
        if getattr(hook, name) is not function:
            setattr(hook, name, staticmethod(function))
    return True
