"""Generate golden CreateTrainingJob requests from the real SageMaker Python SDK v2.

Why: ``airflow_hetero.definition.builder.definition_request.build_training_request`` must send exactly what the SDK
sends for the same estimator. This script builds the SDK estimator for every
``tests/sdk_cases/*.yaml`` case, calls ``fit(wait=False)`` against a mocked SageMaker
client (no network: S3/STS are served by moto's ``mock_aws``) and writes the captured
``create_training_job`` kwargs to ``<case>.request.json``.

It is NOT run by ``make test`` and the SDK must NOT be installed in the project .venv.
Rerun it from the repository root with a separate virtualenv::

    python3 -m venv /tmp/sdkvenv
    /tmp/sdkvenv/bin/pip install 'sagemaker==2.257.7' moto pyyaml
    SAGEMAKER_SUPPRESS_V2_WARNING=1 /tmp/sdkvenv/bin/python tests/sdk_cases/generate.py [CASE ...]

Generated with sagemaker 2.257.7, moto 5.2.5, boto3/botocore 1.44.8 (Python 3.11).

Case file format: a mapping with ``job_name`` (passed to ``fit``), optional ``region``
(default us-west-2), optional ``expect_error: true`` (the SDK is expected to raise; the
exception type and message go to ``<case>.error.json`` instead of a request) and ``job``
(the airflow-hetero HeteroTrainingJob definition, whose keys mirror SDK estimator
arguments). Relative local ``source_dir``/``entry_point`` paths
are resolved against this directory and recorded relative to it.

For cases whose code is uploaded (local source_dir/entry_point), ``<case>.upload.json``
records the S3 objects the SDK wrote and the member names of the uploaded tarball.

Cases the SDK refuses (``expect_error``), and the few it accepts that airflow-hetero refuses
on purpose, carry ``problems``: the exact ``[field path, message]`` list airflow-hetero
reports (ignored here, checked by tests/definition/test_sdk_equivalence.py).

Every run also writes ``sdk_constants.json``: the SDK's own lists that airflow-hetero's
distribution rules and request builder copy (a test keeps the copies equal).
"""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
from pathlib import Path
from typing import Any
from unittest import mock

os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
for _var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
    os.environ[_var] = "testing"
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)

import boto3  # noqa: E402
import sagemaker  # noqa: E402
import yaml  # noqa: E402
from moto import mock_aws  # noqa: E402
from sagemaker.estimator import Estimator  # noqa: E402
from sagemaker.inputs import ShuffleConfig, TrainingInput  # noqa: E402
from sagemaker.instance_group import InstanceGroup  # noqa: E402
from sagemaker.pytorch import PyTorch  # noqa: E402
from sagemaker.tensorflow import TensorFlow  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_REGION = "us-west-2"
# Explicit SDK config: opts out of telemetry (no HTTP calls) and ignores any user config file.
SDK_CONFIG = {
    "SchemaVersion": "1.0",
    "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}},
}

# Estimator args copied through unchanged when present in the case definition.
PASSTHROUGH = (
    "role",
    "entry_point",
    "source_dir",
    "hyperparameters",
    "output_path",
    "base_job_name",
    "volume_size",
    "max_run",
    "use_spot_instances",
    "max_wait",
    "environment",
    "tags",
    "subnets",
    "security_group_ids",
    "checkpoint_s3_uri",
    "checkpoint_local_path",
    "metric_definitions",
    "enable_network_isolation",
    "encrypt_inter_container_traffic",
    "output_kms_key",
    "volume_kms_key",
    "container_log_level",
    "image_uri",
    "framework_version",
    "py_version",
    "instance_type",
    "instance_count",
    "keep_alive_period_in_seconds",
    "training_plan",
)


def _local(path: str | None) -> str | None:
    """Resolve a relative local path against this directory; leave S3 URIs alone."""
    if path is None or path.startswith("s3://"):
        return path
    return str((HERE / path).resolve()) if not os.path.isabs(path) else path


def _channel(spec: str | dict[str, Any]) -> str | TrainingInput:
    """Turn a case channel (URI string or TrainingInput args) into the SDK object."""
    if isinstance(spec, str):
        return spec
    args = dict(spec)
    shuffle = args.pop("shuffle_config", None)
    if shuffle is not None:
        args["shuffle_config"] = ShuffleConfig(shuffle["seed"] if isinstance(shuffle, dict) else shuffle)
    return TrainingInput(**args)


def build_estimator(job: dict[str, Any], session: sagemaker.Session) -> Any:
    """Build the SDK estimator equivalent to an airflow-hetero job definition."""
    job = dict(job)
    unknown = set(job) - set(PASSTHROUGH) - {"instance_groups", "inputs", "framework", "distribution"}
    if unknown:
        raise ValueError(f"unknown case keys: {sorted(unknown)}")
    kwargs: dict[str, Any] = {k: job[k] for k in PASSTHROUGH if k in job}
    kwargs["sagemaker_session"] = session
    if "source_dir" in kwargs:
        kwargs["source_dir"] = _local(kwargs["source_dir"])
    elif "entry_point" in kwargs:
        kwargs["entry_point"] = _local(kwargs["entry_point"])

    groups: dict[str, InstanceGroup] = {}
    if job.get("instance_groups"):
        for g in job["instance_groups"]:
            groups[g["instance_group_name"]] = InstanceGroup(
                g["instance_group_name"], g["instance_type"], g["instance_count"]
            )
        kwargs["instance_groups"] = list(groups.values())

    if job.get("distribution") is not None:
        dist = json.loads(json.dumps(job["distribution"]))
        if "instance_groups" in dist:
            # The SDK compares groups by identity: hand it the very same objects.
            dist["instance_groups"] = [groups[name] for name in dist["instance_groups"]]
        kwargs["distribution"] = dist

    framework = job.get("framework")
    if framework == "pytorch":
        return PyTorch(**kwargs)
    if framework == "tensorflow":
        return TensorFlow(**kwargs)
    if framework is not None:
        raise ValueError(f"unknown framework {framework!r}")
    for key in ("framework_version", "py_version", "distribution"):
        kwargs.pop(key, None)
    return Estimator(**kwargs)


def _relativize(obj: Any) -> Any:
    """Replace absolute paths under this directory by relative ones (stable fixtures)."""
    if isinstance(obj, dict):
        return {k: _relativize(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_relativize(v) for v in obj]
    if isinstance(obj, str) and str(HERE) in obj:
        return obj.replace(str(HERE) + os.sep, "").replace(str(HERE), ".")
    return obj


def run_case(path: Path) -> dict[str, Any]:
    """Capture the request the SDK sends for one case; also write the upload record."""
    case = yaml.safe_load(path.read_text())
    region = case.get("region", DEFAULT_REGION)
    with mock_aws():
        boto_session = boto3.Session(region_name=region)
        s3 = boto_session.client("s3")
        out_path = case["job"].get("output_path") or ""
        if out_path.startswith("s3://"):
            # The SDK uploads local code next to the output path: the bucket must exist.
            bucket = out_path[5:].split("/", 1)[0]
            location = {} if region == "us-east-1" else {"LocationConstraint": region}
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration=location)
        sm_client = mock.MagicMock(name="sagemaker_client")
        sm_client.create_training_job.return_value = {"TrainingJobArn": "arn:fake"}
        session = sagemaker.Session(
            boto_session=boto_session, sagemaker_client=sm_client, sagemaker_config=SDK_CONFIG
        )
        err_path = HERE / f"{path.stem}.error.json"
        try:
            estimator = build_estimator(case["job"], session)
            inputs = {n: _channel(spec) for n, spec in (case["job"].get("inputs") or {}).items()}
            estimator.fit(inputs or None, wait=False, logs=False, job_name=case["job_name"])
        except Exception as exc:
            if not case.get("expect_error"):
                raise
            error = {"type": type(exc).__name__, "message": str(exc)}
            err_path.write_text(json.dumps(error, sort_keys=True, indent=2) + "\n")
            return error
        if case.get("expect_error"):
            raise RuntimeError("case has expect_error but the SDK accepted it")
        calls = sm_client.create_training_job.call_args_list
        if len(calls) != 1:
            raise RuntimeError(f"expected one create_training_job call, got {len(calls)}")
        request = calls[0].kwargs
        other = [c[0] for c in sm_client.mock_calls if not c[0].startswith(("create_training_job", "__"))]
        upload = _uploads(s3)
    out = HERE / f"{path.stem}.request.json"
    out.write_text(json.dumps(_relativize(request), sort_keys=True, indent=2) + "\n")
    up = HERE / f"{path.stem}.upload.json"
    if upload:
        up.write_text(json.dumps(upload, sort_keys=True, indent=2) + "\n")
    elif up.exists():
        up.unlink()
    if other:
        print(f"  note: other sagemaker client calls: {other}", file=sys.stderr)
    return request


def _uploads(s3: Any) -> list[dict[str, Any]]:
    """List every object the SDK put into (moto) S3, with tarball member names."""
    found = []
    for bucket in s3.list_buckets()["Buckets"]:
        for obj in s3.list_objects_v2(Bucket=bucket["Name"]).get("Contents", []):
            entry: dict[str, Any] = {"uri": f"s3://{bucket['Name']}/{obj['Key']}"}
            body = s3.get_object(Bucket=bucket["Name"], Key=obj["Key"])
            if obj["Key"].endswith(".tar.gz"):
                with tarfile.open(fileobj=io.BytesIO(body["Body"].read()), mode="r:gz") as tar:
                    entry["members"] = sorted(m.name for m in tar.getmembers())
            for key in ("ServerSideEncryption", "SSEKMSKeyId"):
                if body.get(key):
                    entry[key] = body[key]
            found.append(entry)
    return found


def write_constants() -> dict[str, Any]:
    """The SDK lists that airflow_hetero copies, as this SDK version has them."""
    from sagemaker import fw_utils
    from sagemaker.estimator import Framework

    constants = {
        "SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS": fw_utils.SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS,
        "SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES": list(fw_utils.SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES),
        "TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS": (
            fw_utils.TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS
        ),
        "TRAINIUM_SUPPORTED_TORCH_DISTRIBUTED_FRAMEWORK_VERSIONS": (
            fw_utils.TRAINIUM_SUPPORTED_TORCH_DISTRIBUTED_FRAMEWORK_VERSIONS
        ),
        "UNSUPPORTED_DLC_IMAGE_FOR_SM_PARALLELISM": list(Framework.UNSUPPORTED_DLC_IMAGE_FOR_SM_PARALLELISM),
        "DEBUGGER_UNSUPPORTED_REGIONS": list(fw_utils.DEBUGGER_UNSUPPORTED_REGIONS),
        "PROFILER_UNSUPPORTED_REGIONS": list(fw_utils.PROFILER_UNSUPPORTED_REGIONS),
        "sagemaker": sagemaker.__version__,
    }
    (HERE / "sdk_constants.json").write_text(json.dumps(constants, sort_keys=True, indent=2) + "\n")
    return constants


def main(argv: list[str]) -> int:
    """Run the named cases (file stems) or all of them."""
    write_constants()
    paths = sorted(HERE.glob("*.yaml"))
    if argv:
        paths = [p for p in paths if p.stem in argv]
    failed = 0
    for path in paths:
        print(f"{path.stem}", file=sys.stderr)
        try:
            run_case(path)
        except Exception as exc:
            failed += 1
            if os.environ.get("SDK_CASES_TRACEBACK"):
                import traceback

                traceback.print_exc()
            print(f"  FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
    print(f"sagemaker {sagemaker.__version__}: {len(paths) - failed} ok, {failed} failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
