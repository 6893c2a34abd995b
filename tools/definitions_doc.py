"""Render ``docs/definitions.md`` from the models and the rule examples, so it cannot drift.

    python tools/definitions_doc.py          # rewrite docs/definitions.md
    python tools/definitions_doc.py --check  # exit 1 when the committed page is stale

The rule examples (``tests/rule_examples.yaml``) are run through the real validator: the
messages in the page are the ones the code produces. ``tests/definition/test_rules.py`` checks every
example's exact problems.
"""

from __future__ import annotations

import copy
import re
import sys
import typing
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "rule_examples.yaml"
PAGE = ROOT / "docs" / "definitions.md"
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def load() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLES.read_text(encoding="utf-8"))
    return data


def placeholders() -> dict[str, Any]:
    """Values the examples refer to as {name}: computed, not copied."""
    from airflow_hetero.definition.facts.images import catalogue
    from airflow_hetero.definition.facts.instance_types import training_instance_types

    torch = catalogue()["frameworks"]["pytorch"]
    known = sorted(set(torch["versions"]) | set(torch["version_aliases"]), key=_version_key)
    return {
        "n_instance_types": len(training_instance_types()),
        "pytorch_versions": ", ".join(known),
        "many_hyperparameters": {f"hp{i}": i for i in range(92)},
        "long_value": "x" * 2500,
        "long_uri": "s3://my-bucket/" + "k" * 1010,
        "long_key": "k" * 257,
        "long_text": "x" * 600,
        "long_tag_key": "t" * 129,
        "many_subnets": [f"subnet-{i:017x}" for i in range(17)],
        "many_variables": {f"VAR_{i}": "1" for i in range(101)},
    }


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def _steps(path: str, values: dict[str, Any] | None = None) -> list[str | int]:
    steps: list[str | int] = []
    for name, index in _STEP.findall(path):
        if not name:
            steps.append(int(index))
        elif values and name.startswith("{") and name.endswith("}") and name[1:-1] in values:
            steps.append(str(values[name[1:-1]]))
        else:
            steps.append(name)
    return steps


def _fill_values(given: Any, values: dict[str, Any]) -> Any:
    """Replace "{name}" placeholders anywhere inside an example's value."""
    if isinstance(given, str) and given.startswith("{") and given.endswith("}") and given[1:-1] in values:
        return values[given[1:-1]]
    if isinstance(given, dict):
        return {k: _fill_values(v, values) for k, v in given.items()}
    if isinstance(given, list):
        return [_fill_values(v, values) for v in given]
    return given


def apply(base: dict[str, Any], example: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The base definition with the example's ``set`` and ``remove`` applied."""
    data = copy.deepcopy(base)
    for path, given in (example.get("set") or {}).items():
        value = _fill_values(given, values)
        *parents, last = _steps(path, values)
        node: Any = data
        for step in parents:
            node = node[step]
        node[last] = value
    for path in example.get("remove") or []:
        *parents, last = _steps(path)
        node = data
        for step in parents:
            node = node[step]
        del node[last]
    return data


def expected(example: dict[str, Any], values: dict[str, Any]) -> list[tuple[str, str]]:
    def fill(text: str) -> str:
        return re.sub(r"\{([a-z_]+)\}", lambda m: str(values.get(m.group(1), m.group(0))), text)

    return [(fill(loc), fill(msg)) for loc, msg in example["problems"]]


def problems_of(definition: dict[str, Any]) -> list[tuple[str, str]]:
    from airflow_hetero.definition.job import JobDefinitionError, load_job

    try:
        load_job(definition)
    except JobDefinitionError as err:
        return [(p.loc, p.msg) for p in err.problems]
    return []


def _type_name(annotation: Any) -> str:
    text = str(annotation) if not isinstance(annotation, type) else annotation.__name__
    text = text.replace("typing.", "").replace("airflow_hetero.definition.model.", "")
    text = re.sub(r"Literal\[([^\]]*)\]", lambda m: " | ".join(p.strip() for p in m.group(1).split(",")), text)
    return re.sub(r"^Optional\[(.*)\]$", r"\1 | None", text)


def _fields_table(model: Any) -> list[str]:
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    hints = typing.get_type_hints(model)
    for name, field in model.model_fields.items():
        if field.is_required():
            default = "required"
        elif field.default_factory is not None:
            default = repr(field.default_factory())
        else:
            default = repr(field.default)
        kind = _type_name(hints[name]).replace("|", "\\|")
        rows.append(f"| `{name}` | `{kind}` | {default} | {field.description or ''} |")
    return rows


def render() -> str:
    from airflow_hetero.definition.job import HeteroTrainingJob, InstanceGroup, ShuffleConfig, TrainingInput
    from airflow_hetero.definition.naming import MAX_BASE_JOB_NAME, SUFFIX_LENGTH

    data, values = load(), placeholders()
    lines = [
        "# Definitions reference",
        "",
        "<!-- Generated by tools/definitions_doc.py from the models and tests/rule_examples.yaml."
        " Do not edit by hand. -->",
        "",
        "A definition is a YAML/JSON file, a mapping, or a `HeteroTrainingJob` built in Python. Field names",
        "follow the SageMaker Python SDK's estimator arguments. Unknown fields are errors. Every problem",
        "is reported at once, one line each, as `field.path: what is wrong and what is allowed`.",
        "",
        "All rules below run when the definition is built (at DAG-parse time), including the instance-type",
        "check against botocore's `TrainingInstanceType` enum: it reads botocore's service model file directly",
        "(about 10 ms, without importing botocore). The only checks left for submission time need the region:",
        "that the framework image is published there, and the job name (`build_training_request`).",
        f"Derived job names append at least {SUFFIX_LENGTH} characters to `base_job_name` (a hash of the task",
        f"instance that fills the 63-character limit, and a retry suffix), hence its limit of {MAX_BASE_JOB_NAME}.",
        "",
        "## HeteroTrainingJob",
        "",
        *_fields_table(HeteroTrainingJob),
        "",
        "## InstanceGroup",
        "",
        *_fields_table(InstanceGroup),
        "",
        "## TrainingInput",
        "",
        "In `inputs`, a channel may also be a plain S3 URI string (a `TrainingInput` with defaults).",
        "",
        *_fields_table(TrainingInput),
        "",
        "`shuffle_config` (`ShuffleConfig`):",
        "",
        *_fields_table(ShuffleConfig),
        "",
        "## Rules and their errors",
        "",
        "Each rule with a definition that breaks it (a change to the",
        "[example below](#the-base-definition-of-the-examples)) and the exact error it produces.",
    ]
    section = None
    for example in data["examples"]:
        if example["section"] != section:
            section = example["section"]
            lines += ["", f"### {section}", ""]
        change = {k: example[k] for k in ("set", "remove") if k in example}
        shown = yaml.safe_dump(change, sort_keys=False, width=100).strip()
        shown = re.sub(r"'\{([a-z_]+)\}'", r"<\1>", shown)
        lines += [f"**{example['rule']}**", "", "```yaml", shown, "```", ""]
        lines += [f"    {loc}: {msg}" for loc, msg in expected(example, values)]
        lines.append("")
    lines += [
        "## The base definition of the examples",
        "",
        "The cluster from the SageMaker documentation: two CPU instances and one GPU instance, MPI on the GPU group.",
        "",
        "```yaml",
        yaml.safe_dump(data["base"], sort_keys=False, width=100).strip(),
        "```",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} is stale: run python tools/definitions_doc.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
