"""The ``distribution`` rules: what the SageMaker Python SDK v2 accepts, checked before submitting.

The SDK (2.257.7: ``fw_utils.validate_distribution`` and friends, ``Framework._distribution_configuration``,
``PyTorch.__init__``, ``_validate_mwms_config``) refuses some distributions when the estimator
is built and others only when ``fit`` runs; here they are all refused when the definition is
read, with the field path. Strategies may be combined as the SDK allows (``smdistributed``
modelparallel with ``mpi`` as its launcher, ``torch_distributed`` with ``smdistributed``, ...).
The model-parallel ``parameters`` are checked in :mod:`airflow_hetero.definition.rules.model_parallel`.

Pure Python: no pydantic, Airflow, boto3 or botocore.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping
from typing import Any

from airflow_hetero.definition.display import confusable_hint
from airflow_hetero.definition.errors import Loc, Problem
from airflow_hetero.definition.facts import instance_types

STRATEGIES = (
    "mpi",
    "smdistributed",
    "torch_distributed",
    "pytorchddp",
    "pytorchxla",
    "parameter_server",
    "multi_worker_mirrored_strategy",
)
PYTORCH_ONLY = frozenset({"torch_distributed", "pytorchddp", "pytorchxla"})
TENSORFLOW_ONLY = frozenset({"parameter_server", "multi_worker_mirrored_strategy"})
OPTION_KEYS: dict[str, frozenset[str]] = {
    "mpi": frozenset({"enabled", "processes_per_host", "custom_mpi_options"}),
    "dataparallel": frozenset({"enabled", "custom_mpi_options"}),
    "pytorchddp": frozenset({"enabled", "custom_mpi_options"}),  # the SDK turns it into dataparallel
    "modelparallel": frozenset({"enabled", "parameters"}),
}

# Lists of sagemaker 2.257.7 (fw_utils.py, estimator.py); tests/sdk_cases/sdk_constants.json holds
# the values generate.py read from the SDK, and a test keeps these equal to them.
SMDDP_FRAMEWORK_VERSIONS: dict[str, tuple[str, ...]] = {
    "tensorflow": (
        "2.3", "2.3.1", "2.3.2", "2.4", "2.4.1", "2.4.3", "2.5", "2.5.0", "2.5.1", "2.6", "2.6.0",
        "2.6.2", "2.6.3", "2.7", "2.7.1", "2.8", "2.8.0", "2.9", "2.9.1", "2.9.2", "2.10", "2.10.1",
        "2.11", "2.11.0",
    ),
    "pytorch": (
        "1.6", "1.6.0", "1.7", "1.7.1", "1.8", "1.8.0", "1.8.1", "1.9", "1.9.0", "1.9.1", "1.10",
        "1.10.0", "1.10.2", "1.11", "1.11.0", "1.12", "1.12.0", "1.12.1", "1.13.1", "2.0.0", "2.0.1",
        "2.1.0", "2.1.2", "2.2.0",
    ),
}  # fmt: skip
TORCH_DISTRIBUTED_GPU_VERSIONS: tuple[str, ...] = (
    "1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.2", "2.2.0", "2.3.0", "2.3.1", "2.4.1", "2.5.1",
    "2.6.0", "2.7.1", "2.8.0",
)  # fmt: skip
TORCH_DISTRIBUTED_TRAINIUM_VERSIONS: tuple[str, ...] = ("1.11", "1.11.0", "1.12", "1.12.0", "1.12.1", "1.13.1", "2.0.0")
#: Image tags the SDK refuses for smdistributed unless torch_distributed is enabled.
SMDISTRIBUTED_UNSUPPORTED_IMAGES = ("2.0.1-gpu-py310-cu121",)
#: The SDK refuses smdistributed when any instance type contains this, unless torch_distributed is on.
P5 = "p5.48xlarge"
MWMS_MINIMUM = (2, 9)
LAUNCHERS = "mpi, smdistributed dataparallel (or pytorchddp) or torch_distributed"


def enabled(options: Any) -> bool:
    """A strategy's ``enabled`` switch (missing or malformed: off)."""
    return isinstance(options, Mapping) and options.get("enabled") is True


def sdk_form(dist: Mapping[str, Any], framework: Any) -> dict[str, Any]:
    """The distribution as the SDK keeps it: for PyTorch, ``pytorchddp`` becomes smdistributed dataparallel."""
    out = dict(dist)
    if framework == "pytorch" and "pytorchddp" in out and "smdistributed" not in out:
        out["smdistributed"] = {"dataparallel": out.pop("pytorchddp")}
    return out


def smddp_enabled(dist: Mapping[str, Any]) -> bool:
    """smdistributed dataparallel is switched on (``dist`` in :func:`sdk_form`)."""
    smd = dist.get("smdistributed")
    return isinstance(smd, Mapping) and enabled(smd.get("dataparallel"))


def torch_distributed_launches(dist: Mapping[str, Any], framework: Any) -> bool:
    """PyTorch launches torchrun (the SDK then skips its other distribution keys unless smdistributed is set)."""
    return framework == "pytorch" and enabled(dist.get("torch_distributed"))


def distribution_group(distribution: Any, names: list[str]) -> str | None:
    """The group that runs the strategy: the one named, or the only group of the job."""
    if not isinstance(distribution, Mapping):
        return None
    named = distribution.get("instance_groups")
    if isinstance(named, list) and len(named) == 1 and isinstance(named[0], str):
        return named[0]
    if named is None and len(names) == 1:
        return names[0]
    return None


def check(raw: Mapping[str, Any], groups: list[dict[str, Any]], names: list[str]) -> Iterator[Problem]:
    """Every distribution rule, on the raw definition (tolerant of invalid fields)."""
    dist = raw.get("distribution")
    if not isinstance(dist, Mapping):
        return  # None, or a type error the field reports
    framework = raw.get("framework")
    for key in dist:
        if key not in STRATEGIES and key != "instance_groups":
            yield Problem(
                ("distribution", str(key)), f"unknown key '{key}'; allowed: instance_groups, {', '.join(STRATEGIES)}"
            )
    if framework is None and raw.get("image_uri") is not None:
        yield Problem(
            ("distribution",),
            (
                "needs framework (pytorch or tensorflow): the strategy is launched by the framework "
                "container's training toolkit"
            ),
        )
    for key in (k for k in STRATEGIES if k in dist):
        if framework == "tensorflow" and key in PYTORCH_ONLY:
            yield Problem(("distribution", key), f"'{key}' is a PyTorch strategy; this job uses tensorflow")
        elif framework == "pytorch" and key in TENSORFLOW_ONLY:
            yield Problem(("distribution", key), f"'{key}' is a TensorFlow strategy; this job uses pytorch")
        yield from _options(key, dist[key])
    yield from _combinations(raw, dist, framework)
    target = yield from _groups(raw, dist, names)
    sdk = sdk_form(dist, framework)
    yield from _launcher(raw, dist, sdk, framework)
    kind = _target_type(raw, groups, target)
    if kind is not None:
        where = f"group '{target}'" if target is not None else "the cluster"
        yield from _trainium(dist, kind)
        yield from _torch_distributed(raw, sdk, framework, kind, where)
        yield from _smddp(raw, dist, sdk, framework, kind=kind, where=where)
    yield from _smdistributed_images(raw, dist, sdk, framework, groups)
    yield from _model_parallel(sdk)
    yield from _smp_image(raw, sdk, framework)


def _options(key: str, options: Any) -> Iterator[Problem]:
    loc: Loc = ("distribution", key)
    if not isinstance(options, Mapping):
        yield Problem(loc, "must be a mapping, e.g. {enabled: true}")
        return
    if key == "smdistributed":
        kinds = [k for k in options if k in ("dataparallel", "modelparallel")]
        for other in (k for k in options if k not in ("dataparallel", "modelparallel")):
            yield Problem((*loc, str(other)), f"unknown key '{other}'; allowed: dataparallel or modelparallel")
        if len(kinds) > 1:
            yield Problem(loc, "give one of dataparallel or modelparallel, not both")
        for kind in kinds:
            yield from _option_keys((*loc, kind), options[kind], OPTION_KEYS[kind])
        return
    yield from _option_keys(loc, options, OPTION_KEYS.get(key, frozenset({"enabled"})))
    per_host = options.get("processes_per_host")
    if (
        key == "mpi"
        and per_host is not None
        and (isinstance(per_host, bool) or not isinstance(per_host, int) or per_host < 1)
    ):
        yield Problem((*loc, "processes_per_host"), f"must be a whole number of at least 1 (got {per_host!r})")


def _option_keys(loc: Loc, options: Any, allowed: frozenset[str]) -> Iterator[Problem]:
    if not isinstance(options, Mapping):
        yield Problem(loc, "must be a mapping, e.g. {enabled: true}")
        return
    for key in options:
        if key not in allowed:
            yield Problem((*loc, str(key)), f"unknown option '{key}'; allowed: {', '.join(sorted(allowed))}")
    switch = options.get("enabled")
    if switch is not None and not isinstance(switch, bool):
        yield Problem((*loc, "enabled"), f"must be true or false (got {switch!r})")


def _combinations(raw: Mapping[str, Any], dist: Mapping[str, Any], framework: Any) -> Iterator[Problem]:
    """Strategies the SDK refuses outright or together."""
    if framework == "pytorch" and "pytorchddp" in dist and "smdistributed" in dist:
        yield Problem(
            ("distribution", "pytorchddp"),
            (
                "cannot be combined with smdistributed: pytorchddp is the SDK's other name for "
                "smdistributed dataparallel; keep one of them"
            ),
        )
    if framework == "pytorch" and "pytorchxla" in dist:
        yield Problem(
            ("distribution", "pytorchxla"),
            (
                "needs SageMaker Training Compiler (the SDK refuses pytorchxla without compiler_config, "
                "which job definitions do not have); use torch_distributed or smdistributed instead"
            ),
        )
    if framework == "tensorflow" and enabled(dist.get("multi_worker_mirrored_strategy")):
        loc: Loc = ("distribution", "multi_worker_mirrored_strategy")
        others = [k for k in ("smdistributed", "parameter_server") if k in dist]
        if others:
            yield Problem(loc, f"cannot run together with {' or '.join(others)}; remove one of them")
        version = _version(raw.get("framework_version"))
        if version is not None and version < MWMS_MINIMUM:
            floor = ".".join(map(str, MWMS_MINIMUM))
            yield Problem(loc, f"needs tensorflow {floor} or newer (got {raw.get('framework_version')})")


def _groups(raw: Mapping[str, Any], dist: Mapping[str, Any], names: list[str]) -> Generator[Problem, None, str | None]:
    """Structure of ``distribution.instance_groups``; returns the group that runs the strategy."""
    loc: Loc = ("distribution", "instance_groups")
    named = dist.get("instance_groups")
    hetero = raw.get("instance_groups") is not None
    if named is not None and not hetero:
        yield Problem(loc, "only a heterogeneous job (one with instance_groups) can name distribution groups")
        return None
    if named is None:
        if hetero and len(names) > 1:
            yield Problem(
                loc,
                (
                    f"required for a job with {len(names)} instance groups: name the one group "
                    f"that runs the strategy (one of: {', '.join(names)})"
                ),
            )
        return names[0] if hetero and len(names) == 1 else None
    if not isinstance(named, list) or not all(isinstance(n, str) for n in named):
        yield Problem(loc, "must be a list with one group name, e.g. [dnn_group]")
    elif len(named) != 1:
        yield Problem(loc, f"names {len(named)} groups; a distribution strategy runs on exactly one instance group")
    elif named[0] not in names:
        hint = confusable_hint(named[0], names)
        yield Problem(
            loc, f"unknown instance group '{named[0]}'; the job's groups are: {', '.join(names) or '(none)'}{hint}"
        )
    else:
        return str(named[0])
    return None


def _launcher(
    raw: Mapping[str, Any], dist: Mapping[str, Any], sdk: Mapping[str, Any], framework: Any
) -> Iterator[Problem]:
    """A heterogeneous job's distribution must start something on its group (SDK, at fit time)."""
    if raw.get("instance_groups") is None or framework not in ("pytorch", "tensorflow") or not _switches_valid(dist):
        return
    if enabled(sdk.get("mpi")) or smddp_enabled(sdk):
        return
    if torch_distributed_launches(sdk, framework):
        if "smdistributed" not in sdk:
            return
        yield Problem(
            ("distribution",),
            (
                "torch_distributed together with smdistributed runs on the instance group only with "
                "mpi or smdistributed dataparallel enabled. The SDK refuses it: \"Don't set training "
                'instance groups while no distribution strategies enabled!"'
            ),
        )
        return
    present = [k for k in STRATEGIES if k in dist]
    has = f"enables none of them (it has {', '.join(present)})" if present else "names no strategy"
    yield Problem(
        ("distribution",),
        (
            f"in a heterogeneous job the distribution runs on one instance group, which needs {LAUNCHERS} "
            f"enabled; this one {has}. The SDK refuses it: \"Don't set training instance groups while no "
            'distribution strategies enabled!"'
        ),
    )


def _switches_valid(dist: Mapping[str, Any]) -> bool:
    """Every ``enabled`` is true, false or absent (otherwise its own error explains the problem)."""
    options = [dist.get(k) for k in STRATEGIES]
    smd = dist.get("smdistributed")
    if isinstance(smd, Mapping):
        options += [smd.get("dataparallel"), smd.get("modelparallel")]
    return all(not isinstance(o, Mapping) or isinstance(o.get("enabled", False), bool) for o in options)


def _target_type(raw: Mapping[str, Any], groups: list[dict[str, Any]], target: str | None) -> str | None:
    """The instance type that runs the strategy: the target group's, or the homogeneous cluster's."""
    if raw.get("instance_groups") is None:
        kind = raw.get("instance_type")
    else:
        found = [g.get("instance_type") for g in groups if g.get("instance_group_name") == target]
        kind = found[0] if target is not None and found else None
    return kind if isinstance(kind, str) else None


def _trainium(dist: Mapping[str, Any], kind: str) -> Iterator[Problem]:
    if not instance_types.is_trainium(kind):
        return
    keys = list(dist)
    if len(keys) == 1 and keys[0] != "torch_distributed":
        yield Problem(
            ("distribution", str(keys[0])),
            f"Trainium instances ({kind}) support only torch_distributed, not {keys[0]}",
        )
    elif len(keys) > 1:
        note = (
            "; the SDK counts instance_groups as one of them, so a Trainium group can run torch_distributed "
            "only as the job's single group, without naming it"
            if "instance_groups" in keys
            else ""
        )
        yield Problem(
            ("distribution",),
            f"Trainium instances ({kind}) support only torch_distributed, alone (got {', '.join(keys)}){note}",
        )


def _torch_distributed(
    raw: Mapping[str, Any], sdk: Mapping[str, Any], framework: Any, kind: str, where: str
) -> Iterator[Problem]:
    if not torch_distributed_launches(sdk, framework):
        return
    entry = raw.get("entry_point")
    if isinstance(entry, str) and not entry.endswith(".py"):
        yield Problem(("entry_point",), f"torch_distributed runs Python scripts only: '{entry}' must end in .py")
    if raw.get("image_uri") is not None:
        return  # the SDK checks versions and instance types only for its own images
    py, version = raw.get("py_version"), raw.get("framework_version")
    if isinstance(py, str) and "py3" not in py:
        yield Problem(("py_version",), f"torch_distributed needs Python 3 (e.g. py310); got '{py}'")
    if instance_types.is_gpu(kind):
        allowed, what = TORCH_DISTRIBUTED_GPU_VERSIONS, "GPU"
    elif instance_types.is_trainium(kind):
        allowed, what = TORCH_DISTRIBUTED_TRAINIUM_VERSIONS, "Trainium"
    else:
        yield Problem(
            ("distribution", "torch_distributed"),
            f"runs only on GPU (ml.g*, ml.p*) and Trainium (ml.trn*) instances, but {where} uses {kind}",
        )
        return
    if isinstance(version, str) and version not in allowed:
        yield Problem(
            ("framework_version",),
            (
                f"torch_distributed on {what} instances ({kind}) needs one of {', '.join(allowed)} "
                f"(written exactly so: the SDK compares the strings); got '{version}'"
            ),
        )


def _smddp(
    raw: Mapping[str, Any], dist: Mapping[str, Any], sdk: Mapping[str, Any], framework: Any, *, kind: str, where: str
) -> Iterator[Problem]:
    if not smddp_enabled(sdk) or framework not in SMDDP_FRAMEWORK_VERSIONS:
        return
    alias = "pytorchddp" in dist and "smdistributed" not in dist
    name = "pytorchddp" if alias else "smdistributed dataparallel"
    loc: Loc = ("distribution", "pytorchddp") if alias else ("distribution", "smdistributed", "dataparallel")
    if raw.get("image_uri") is None:
        version, py = raw.get("framework_version"), raw.get("py_version")
        allowed = SMDDP_FRAMEWORK_VERSIONS[framework]
        if isinstance(version, str) and version not in allowed:
            yield Problem(
                ("framework_version",),
                f"{name} needs {framework} {', '.join(allowed)} (as the SDK lists them); got '{version}'",
            )
        if isinstance(py, str) and "py3" not in py:
            yield Problem(("py_version",), f"{name} needs Python 3 (e.g. py39); got '{py}'")
    if kind not in instance_types.SMDDP_INSTANCE_TYPES and P5 not in kind:  # p5: _smdistributed_images
        yield Problem(
            loc,
            (
                f"{name} needs a multi-GPU instance type, but {where} uses {kind}; allowed: "
                f"{', '.join(sorted(instance_types.SMDDP_INSTANCE_TYPES))}, ml.{P5} (with torch_distributed)"
            ),
        )


def _smdistributed_images(
    raw: Mapping[str, Any],
    dist: Mapping[str, Any],
    sdk: Mapping[str, Any],
    framework: Any,
    groups: list[dict[str, Any]],
) -> Iterator[Problem]:
    """p5 instances and CUDA 12 images refuse smdistributed unless torch_distributed is on (SDK, at fit time)."""
    if "smdistributed" not in sdk or framework not in ("pytorch", "tensorflow"):
        return
    if enabled(sdk.get("torch_distributed")):
        return
    key = "pytorchddp" if "pytorchddp" in dist and "smdistributed" not in dist else "smdistributed"
    hetero = raw.get("instance_groups") is not None
    kinds = [g.get("instance_type") for g in groups] if hetero else [raw.get("instance_type")]
    p5 = [k for k in kinds if isinstance(k, str) and P5 in k]
    if p5:
        yield Problem(
            ("distribution", key),
            (
                f"smdistributed (model or data parallel) cannot run in a cluster with {p5[0]} instances "
                "(the SDK checks every group) unless torch_distributed is enabled too. The SDK refuses it: "
                '"SMModelParallel and SMDataParallel currently do not support p5 instances."'
            ),
        )
    image = raw.get("image_uri")
    for tag in SMDISTRIBUTED_UNSUPPORTED_IMAGES:
        if isinstance(image, str) and tag in image:
            yield Problem(
                ("image_uri",),
                (
                    f"smdistributed does not work with this image ({tag}: CUDA newer than 11, the SDK "
                    "refuses it); use another image, or enable torch_distributed"
                ),
            )


def _model_parallel(sdk: Mapping[str, Any]) -> Iterator[Problem]:
    """``smdistributed.modelparallel.parameters``, checked as the SDK's ``validate_mp_config`` does."""
    smd = sdk.get("smdistributed")
    options = smd.get("modelparallel") if isinstance(smd, Mapping) else None
    if not enabled(options):
        return
    assert isinstance(options, Mapping)
    loc: Loc = ("distribution", "smdistributed", "modelparallel", "parameters")
    params = options.get("parameters", {})
    if not isinstance(params, Mapping):
        yield Problem(
            loc,
            (
                "must be a mapping of model-parallel parameters, e.g. {partitions: 2}; a path to a JSON "
                "file is not supported (the SDK would read it on the machine that submits)"
            ),
        )
        return
    from airflow_hetero.definition.rules import model_parallel  # loaded only for a job that enables it

    for problem in model_parallel.problems(params):
        yield problem.within(loc)


def uses_smp_image(dist: Mapping[str, Any]) -> bool:
    """The SDK runs torch_distributed + smdistributed modelparallel in its model-parallel (SMP) image."""
    smd = dist.get("smdistributed")
    if "torch_distributed" not in dist or not isinstance(smd, Mapping):
        return False
    options = smd.get("modelparallel")
    return isinstance(options, Mapping) and options.get("enabled", True) is not False


def _smp_image(raw: Mapping[str, Any], sdk: Mapping[str, Any], framework: Any) -> Iterator[Problem]:
    if framework != "pytorch" or raw.get("image_uri") is not None or not uses_smp_image(sdk):
        return
    yield Problem(
        ("image_uri",),
        (
            "required for torch_distributed with smdistributed modelparallel: the SDK then runs the "
            "SageMaker model parallelism image (658645717510.dkr.ecr.<region>.amazonaws.com/"
            "smdistributed-modelparallel:<version>-gpu-<py>-<cuda>), which airflow-hetero does not look up"
        ),
    )


def _version(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, str):
        return None
    parts = value.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None
