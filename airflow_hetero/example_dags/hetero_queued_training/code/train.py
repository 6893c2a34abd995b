"""The queued example's training script: each group says who it is; the training group saves a model."""

from __future__ import annotations

import os
from pathlib import Path

from airflow_hetero import runtime


def prepare() -> None:
    env = runtime.environment()
    print(f"{env.current_host}: preparing data for {env.group_hosts('train_group')}", flush=True)


def train() -> None:
    env = runtime.environment()
    Path(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"), "model.txt").write_text("trained")
    print(f"{env.current_host}: model saved", flush=True)


if __name__ == "__main__":
    runtime.run_by_group({"data_group": prepare, "train_group": train})
