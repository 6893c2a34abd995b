"""The IAM role a job runs as: a role ARN, or a role *name* expanded to its ARN when the task runs.

The SageMaker Python SDK v2 (``Session.expand_role``) and the Amazon provider (``expand_role``) take
both and tell them apart the same way: a value with a ``/`` is an ARN, one without is a name (looked
up with IAM ``GetRole``). Definitions and requests follow them. Stdlib only.
"""

from __future__ import annotations

import re

__all__ = ["is_role_name", "role_problem"]

#: botocore's RoleArn pattern, and its length bounds.
_ROLE_ARN = re.compile(r"arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+")
_ARN_LENGTH = (20, 2048)
#: IAM's rule for a role name (``GetRole``'s ``RoleName``).
_ROLE_NAME = re.compile(r"[\w+=,.@-]{1,64}")


def is_role_name(value: str) -> bool:
    """True for a role name (expanded when the task runs), False for anything else (an ARN or neither)."""
    return "/" not in value and _ROLE_NAME.fullmatch(value) is not None


def role_problem(value: str) -> str | None:
    """Why ``value`` is neither a role ARN nor a role name; None when it is one of them."""
    if is_role_name(value) or (_ROLE_ARN.fullmatch(value) and _ARN_LENGTH[0] <= len(value) <= _ARN_LENGTH[1]):
        return None
    if "/" in value:
        return f"'{value}' is not an IAM role ARN; expected arn:aws:iam::<12-digit account>:role/<name>"
    return (
        f"'{value}' is neither an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>) nor a role name "
        "(1-64 letters, digits and +=,.@_-; expanded to its ARN when the task runs)"
    )
