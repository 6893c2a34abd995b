"""Drives the SageMaker Python SDK v2 against the offline endpoint; run with the SDK's own venv.

``python sdk_client.py WORKDIR``, with ``AWS_ENDPOINT_URL``, fake credentials and region in the
environment (the settings docs/local.md gives). Prints one JSON line of what the SDK saw, which
tests/local/test_sagemaker_sdk.py checks. It uses only the SDK's public API, as a user would.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import boto3
import sagemaker
from sagemaker.analytics import TrainingJobAnalytics
from sagemaker.instance_group import InstanceGroup
from sagemaker.pytorch import PyTorch

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "sdk-tests"
TRAIN = """
import json, os, time
env = json.loads(os.environ["SM_TRAINING_ENV"])
print(f"[sdk] host={env['current_host']} group={env['current_instance_group']}", flush=True)
for step in range(3):
    print(f"epoch={step} loss={1.0 / (step + 1):.4f}", flush=True)
if os.environ.get("SM_HP_SLEEP"):
    time.sleep(float(os.environ["SM_HP_SLEEP"]))
with open(os.path.join(os.environ["SM_MODEL_DIR"], env["current_host"] + ".txt"), "w") as f:
    f.write(env["current_instance_group"])
"""


def estimator(session: sagemaker.Session, source: Path, *, hetero: bool = True, **hyperparameters: object) -> PyTorch:
    """A PyTorch estimator on two instance groups (``hetero``), else on 2 x ml.c5.xlarge."""
    cluster: dict[str, object] = (
        {"instance_groups": [InstanceGroup("data", "ml.c5.xlarge", 2), InstanceGroup("dnn", "ml.p3.2xlarge", 1)]}
        if hetero
        else {"instance_count": 2, "instance_type": "ml.c5.xlarge"}
    )
    return PyTorch(
        entry_point="train.py",
        source_dir=str(source),
        role=ROLE,
        framework_version="2.0.1",
        py_version="py310",
        **cluster,
        output_path=f"s3://{BUCKET}/models",
        metric_definitions=[{"Name": "train:loss", "Regex": r"loss=([0-9.]+)"}],
        hyperparameters=hyperparameters,
        max_run=600,
        sagemaker_session=session,
        tags=[{"Key": "client", "Value": "sdk"}],
    )


def main(workdir: Path) -> dict[str, object]:
    source = workdir / "src"
    source.mkdir(parents=True, exist_ok=True)
    (source / "train.py").write_text(TRAIN)
    session = sagemaker.Session(boto_session=boto3.Session(), default_bucket=BUCKET)
    seen: dict[str, object] = {"sdk_version": sagemaker.__version__}

    # 1. fit with instance groups and logs, then model_data and analytics
    fitted = estimator(session, source)
    fitted.fit(logs="All", job_name=f"sdk-fit-{int(time.time())}")
    described = fitted.latest_training_job.describe()
    seen["fit"] = {
        "status": described["TrainingJobStatus"],
        "groups": [g["InstanceGroupName"] for g in described["ResourceConfig"]["InstanceGroups"]],
        "model_data": fitted.model_data,
        "billable": described["BillableTimeInSeconds"],
        "training": described["TrainingTimeInSeconds"],
    }
    frame = TrainingJobAnalytics(fitted.latest_training_job.name, sagemaker_session=session).dataframe()
    seen["analytics"] = {
        "metrics": sorted(set(frame["metric_name"])),
        "rows": len(frame),
        "min": float(frame["value"].min()),
    }

    # 2. fit(wait=False), attach (which waits) while the job is stopped, model_data of the attached one.
    # The SDK's attach rebuilds an estimator from ResourceConfig.InstanceType/InstanceCount, which a
    # heterogeneous job does not have (on SageMaker either): attach works on homogeneous jobs only.
    running = estimator(session, source, hetero=False, sleep=120)
    name = f"sdk-stop-{int(time.time())}"
    running.fit(wait=False, job_name=name)
    attached: dict[str, PyTorch] = {}
    attaching = threading.Thread(
        target=lambda: attached.setdefault("e", PyTorch.attach(name, sagemaker_session=session))
    )
    attaching.start()
    deadline = time.monotonic() + 60
    while session.describe_training_job(name)["SecondaryStatus"] != "Training":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    running.latest_training_job.stop()
    attaching.join(120)
    again = attached["e"]
    seen["attach"] = {
        "status": again.latest_training_job.describe()["TrainingJobStatus"],
        "instance_count": again.instance_count,
        "tags": again.tags,
        "model_data": again.model_data,
        "entry_point": again.entry_point,
    }
    return seen


if __name__ == "__main__":
    print("SDK-RESULT " + json.dumps(main(Path(sys.argv[1]))), flush=True)
