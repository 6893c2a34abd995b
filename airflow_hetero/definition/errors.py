"""What is wrong with a definition or a request: one :class:`Problem` type, one :data:`Loc`, one error.

Both forms report with them: definition mode's rules (``cross_field``, ``distribution``, the field
checks) and request mode's checks (:mod:`airflow_hetero.definition.raw_request`). Every problem is
collected and reported at once, one line each, by the path of the field:
``instance_groups[1].instance_type: 'ml.bogus' is not a SageMaker training instance type ...``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_hetero.definition.display import escape

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

#: Where a problem is: the path of the field, ``("instance_groups", 1, "instance_type")``.
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


@dataclass(frozen=True, init=False)
class Problem:
    """One thing wrong with a definition or a request: where (``path``) and what (``msg``).

    ``loc`` is a field's path (a :data:`Loc`) or one place as written (a file name, ``"job_name"``);
    :attr:`loc` writes the path out, ``instance_groups[1].instance_type``.
    """

    path: Loc
    msg: str

    def __init__(self, loc: Loc | str, msg: str) -> None:
        object.__setattr__(self, "path", (loc,) if isinstance(loc, str) else tuple(loc))
        # names come from the file: control and non-ASCII characters are shown as escapes
        object.__setattr__(self, "msg", escape(msg))

    @property
    def loc(self) -> str:
        """The path written out, ``instance_groups[1].instance_type`` (escaped as :attr:`msg` is)."""
        return escape(format_loc(self.path))

    def within(self, prefix: Loc) -> Problem:
        """The same problem at ``prefix`` + its path (a part's problem placed in the whole)."""
        return Problem((*prefix, *self.path), self.msg)

    def __str__(self) -> str:
        return f"{self.loc}: {self.msg}"


def unique(problems: Iterable[Problem]) -> list[Problem]:
    """``problems`` in order, each line once (two checks may find the same thing)."""
    seen: set[tuple[str, str]] = set()
    out: list[Problem] = []
    for problem in problems:
        if (problem.loc, problem.msg) not in seen:
            seen.add((problem.loc, problem.msg))
            out.append(problem)
    return out


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
        loc_items = [(tuple(item["loc"]), item) for item in err.errors(include_url=False)]
        problems = unique(Problem(loc, _friendly_message(item, loc, model)) for loc, item in loc_items)
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
