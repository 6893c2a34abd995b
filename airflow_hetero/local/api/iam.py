"""IAM's ``SimulatePrincipalPolicy``, answered here: the endpoint enforces no IAM, so every action is allowed.

The SageMaker Python SDK v3 checks its role with this call before it builds a job (``ModelTrainer()``
and the bucket check of ``train()``); moto's IAM lacks it and answered a 500 HTML page, which
botocore cannot parse ("invalid XML received"). IAM speaks the query protocol: a form-encoded
``POST`` (``Action=...&ActionNames.member.1=...``) answered in XML. The request is decoded and
checked against botocore's own ``iam`` model (required members, types, and the model's min/max,
pattern and enum constraints, in IAM's wording), and the answer is written from the model's output
shape, so a botocore client parses it as it parses IAM's. Other IAM actions stay moto's.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from airflow_hetero.local.api.constraints import constraint_problems, service_model
from airflow_hetero.local.api.errors import ServiceError

#: IAM actions answered here (the rest go to moto).
ACTIONS = frozenset({"SimulatePrincipalPolicy"})
#: IAM's default page size of SimulatePrincipalPolicy (``MaxItems``).
DEFAULT_MAX_ITEMS = 100


def form_action(body: bytes) -> tuple[str, dict[str, str]]:
    """The query-protocol ``Action`` of a form body and all its fields."""
    fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return fields.get("Action", ""), fields


def _decode(shape: Any, form: dict[str, str], key: str) -> Any:
    """The value of ``shape`` under query key ``key`` (``A.member.1``, ``A.B``), None when absent."""
    kind = shape.type_name
    if kind == "structure":
        found = {}
        for name, member in shape.members.items():
            value = _decode(member, form, f"{key}.{name}" if key else name)
            if value is not None:
                found[name] = value
        return found if found or not key else None
    if kind == "list":
        if form.get(key) == "":  # botocore's encoding of an empty list
            return []
        items: list[Any] = []
        while True:
            item_key = f"{key}.member.{len(items) + 1}"
            if item_key not in form and not any(k.startswith(item_key + ".") for k in form):
                return items or None
            items.append(_decode(shape.member, form, item_key))
    if key not in form:
        return None
    raw = form[key]
    if kind in ("integer", "long"):
        try:
            return int(raw)
        except ValueError:
            return raw  # the validator names it
    if kind == "boolean":
        return raw.lower() == "true"
    return raw


def decode_request(action: str, form: dict[str, str]) -> dict[str, Any]:
    """The parameters of IAM ``action`` in a form body, refused as IAM refuses them when invalid."""
    from botocore.validate import ParamValidator

    shape = service_model("iam").operation_model(action).input_shape
    params: dict[str, Any] = _decode(shape, form, "")
    problems = constraint_problems(action, params, "iam")  # IAM's own wording for what the model constrains
    if problems:
        noun = "error" if len(problems) == 1 else "errors"
        raise ServiceError("ValidationError", f"{len(problems)} validation {noun} detected: " + "; ".join(problems))
    report = ParamValidator().validate(params, shape)  # what is left: wrong types
    if report.has_errors():
        raise ServiceError("ValidationError", report.generate_report())
    return params


def simulate_principal_policy(params: dict[str, Any]) -> dict[str, Any]:
    """Every (action, resource) pair ``allowed``, paged by ``MaxItems``/``Marker`` as IAM pages it."""
    resources = params.get("ResourceArns") or ["*"]
    results = [
        {
            "EvalActionName": action,
            "EvalResourceName": resource,
            "EvalDecision": "allowed",
            "MatchedStatements": [],
            "MissingContextValues": [],
        }
        for action in params["ActionNames"]
        for resource in resources
    ]
    start = int(params["Marker"]) if str(params.get("Marker", "")).isdigit() else 0
    end = start + int(params.get("MaxItems") or DEFAULT_MAX_ITEMS)
    answer: dict[str, Any] = {"EvaluationResults": results[start:end], "IsTruncated": end < len(results)}
    if end < len(results):
        answer["Marker"] = str(end)
    return answer


def _xml(shape: Any, value: Any) -> str:
    """``value`` as the query protocol's XML body of ``shape`` (lists as ``<member>`` items)."""
    kind = shape.type_name
    if kind == "structure":
        return "".join(
            f"<{name}>{_xml(member, value[name])}</{name}>"
            for name, member in shape.members.items()
            if value.get(name) is not None
        )
    if kind == "list":
        return "".join(f"<member>{_xml(shape.member, item)}</member>" for item in value)
    if kind == "boolean":
        return "true" if value else "false"
    return escape(str(value))


def answer_xml(action: str, result: dict[str, Any]) -> bytes:
    """IAM's XML answer: ``<ActionResponse><ActionResult>...</ActionResult><ResponseMetadata>``."""
    model = service_model("iam")
    shape = model.operation_model(action).output_shape
    namespace = model.metadata["xmlNamespace"]
    return (
        f'<{action}Response xmlns="{namespace}"><{action}Result>{_xml(shape, result)}</{action}Result>'
        f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata></{action}Response>"
    ).encode()


def answer(action: str, form: dict[str, str]) -> bytes:
    """The XML answer to IAM ``action`` (one of :data:`ACTIONS`); :class:`ServiceError` when refused."""
    return answer_xml(action, simulate_principal_policy(decode_request(action, form)))
