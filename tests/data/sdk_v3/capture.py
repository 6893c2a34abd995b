"""Print the CreateTrainingJob request SageMaker Python SDK v3 builds for a two-group Torchrun job.

How ``two_groups_torchrun.request.json`` beside this file was made (sagemaker-train 1.27.0,
sagemaker-core 2.27.0): run with that SDK installed, ``SAGEMAKER_VALIDATE_ROLE=false``, fake
credentials, ``AWS_DEFAULT_REGION=us-east-1`` and ``AWS_ENDPOINT_URL`` at a moto server (the SDK
uploads its ``code`` and ``sm_drivers`` channels to S3 first). The request is printed, not sent.
"""

import contextlib
import json
from typing import Any

import botocore.client

_real = botocore.client.BaseClient._make_api_call


class Captured(Exception):
    """Raised instead of sending CreateTrainingJob."""


def _capture(self: Any, operation: str, params: dict[str, Any]) -> Any:
    if operation == "GetCallerIdentity":  # the SDK asks STS by its regional URL, not the endpoint's
        return {"Account": "123456789012", "Arn": "arn:aws:iam::123456789012:user/x", "UserId": "x"}
    if operation == "CreateTrainingJob":
        print(json.dumps(params, indent=2, sort_keys=True, default=str))
        raise Captured
    return _real(self, operation, params)


def main() -> None:
    from sagemaker.train import ModelTrainer
    from sagemaker.train.configs import Compute, InputData, InstanceGroup, S3DataSource, SourceCode
    from sagemaker.train.distributed import Torchrun

    botocore.client.BaseClient._make_api_call = _capture
    groups = [
        InstanceGroup(instance_group_name="data_group", instance_type="ml.c5.xlarge", instance_count=2),
        InstanceGroup(instance_group_name="dnn_group", instance_type="ml.p3.2xlarge", instance_count=1),
    ]
    trainer = ModelTrainer(
        training_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311",
        role="arn:aws:iam::123456789012:role/SageMakerRole",
        base_job_name="v3-hetero",
        compute=Compute(instance_groups=groups),
        source_code=SourceCode(source_dir="src", entry_script="train.py"),  # src/train.py must exist
        distributed=Torchrun(),
        hyperparameters={"epochs": 2, "mode": "fast"},
    )
    source = S3DataSource(
        s3_data_type="S3Prefix",
        s3_uri="s3://bucket/train",
        s3_data_distribution_type="FullyReplicated",
        instance_group_names=["data_group"],
    )
    with contextlib.suppress(Captured):
        trainer.train(input_data_config=[InputData(channel_name="train", data_source=source)], wait=False)


if __name__ == "__main__":
    main()
