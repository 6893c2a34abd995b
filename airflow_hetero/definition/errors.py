"""Definition errors that name the field, say what was wrong and what is allowed.

Every problem in a definition is collected and reported at once, one line each:
``instance_groups[1].instance_type: 'ml.bogus' is not a SageMaker training instance type ...``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_hetero.definition.display import escape

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

Loc = tuple[str | int, ...]


def format_loc(loc: Sequence[str | int]) -> str:
    """``("instance_groups", 1, "instance_type")`` -> ``instance_groups[1].instance_type``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = part if part else '""'
            out += f".{name}" if out else name
    return out or "(definition)"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a definition: where (``loc``) and what (``msg``)."""

    loc: str
    msg: str

    def __post_init__(self) -> None:
        # names come from the file: control and non-ASCII characters are shown as escapes
        object.__setattr__(self, "loc", escape(self.loc))
        object.__setattr__(self, "msg", escape(self.msg))

    def __str__(self) -> str:
        return f"{self.loc}: {self.msg}"


class JobDefinitionError(ValueError):
    """A training-job definition is invalid; ``problems`` lists every reason at once."""

    def __init__(self, problems: Iterable[Problem], title: str = "invalid training job definition") -> None:
        self.problems: list[Problem] = list(problems)
        self.title = title
        count = len(self.problems)
        head = f"{title} ({count} problem{'s' if count != 1 else ''})"
        super().__init__("\n".join([head, *(f"  {p}" for p in self.problems)]))

    def errors(self) -> list[dict[str, str]]:
        """Plain ``[{"loc": ..., "msg": ...}]`` for programs (CLI JSON output, XCom, tests)."""
        return [{"loc": p.loc, "msg": p.msg} for p in self.problems]

    @classmethod
    def from_validation_error(cls, err: ValidationError, model: type[BaseModel]) -> JobDefinitionError:
        """Turn pydantic's error into ours, with friendlier messages for the common types."""
        problems: list[Problem] = []
        seen: set[tuple[str, str]] = set()
        for item in err.errors(include_url=False):
            loc = tuple(item["loc"])
            msg = _friendly_message(item, loc, model)
            key = (format_loc(loc), msg)
            if key not in seen:
                seen.add(key)
                problems.append(Problem(*key))
        return cls(problems, title=f"invalid {model.__name__} definition")


def _friendly_message(item: Any, loc: Loc, model: type[BaseModel]) -> str:
    kind = item["type"]
    if kind == "extra_forbidden":
        allowed = _fields_at(model, loc[:-1])
        name = str(loc[-1])
        import difflib  # only when there is a problem to explain

        hint = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
        did_you_mean = f"; did you mean '{hint[0]}'?" if hint else ""
        return f"unknown field '{name}'{did_you_mean} (allowed: {', '.join(sorted(allowed))})"
    if kind == "missing":
        return "field required"
    msg = str(item["msg"])
    if kind == "value_error" and msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return msg


def _fields_at(model: type[BaseModel], loc: Loc) -> list[str]:
    """Field names of the (nested) model found at ``loc`` below ``model``."""
    from pydantic import BaseModel

    current: Any = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        field = current.model_fields.get(part)
        if field is None:
            continue  # a dict key such as a channel name: the value type is already current
        current = _model_in(field.annotation, BaseModel)
    return list(current.model_fields) if current is not None else []


def _model_in(annotation: Any, base: type[Any]) -> Any:
    """The first pydantic model class inside a type annotation (list[X] | None -> X)."""
    if isinstance(annotation, type) and issubclass(annotation, base):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg, base)
        if found is not None:
            return found
    return None
