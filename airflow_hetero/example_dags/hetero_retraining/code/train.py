"""Example heterogeneous training script: data hosts preprocess and stream, the trainer learns.

Every host runs this same file. ``runtime.run_by_group`` sends each host to its group's job:

* ``data_group`` (CPU instances): read this host's shard of the ``raw`` channel (CSV rows
  ``x1,x2,y``), standardise the features with the ``config`` channel's statistics, and serve
  mini-batches over TCP to the trainer, once per epoch, from the epoch the trainer asks for.
* ``train_group`` (the GPU instance on SageMaker): connect to every data host by host name,
  fit a linear model with mini-batch SGD, log ``epoch=N loss=L`` (captured by the job's
  metric_definitions) and save ``model.json`` to the model directory.

Both checkpoint into their host's own folder (``runtime.checkpoint_dir()``), which SageMaker copies to
the job's ``checkpoint_s3_uri`` and restores after a managed spot interruption: a data host keeps its
preprocessed shard, the trainer its weights after each epoch. A restarted job resumes after the last
epoch saved and ends with the model an uninterrupted run gives. ``epoch_pause`` (seconds, default 0)
slows each epoch down, so a test can interrupt the job mid-run.

Standard library only, so it runs in any image; SageMaker's toolkit or the offline endpoint
provides the environment. ``from airflow_hetero import runtime`` works inside the job because
the operator ships the runtime helper with the code.
"""

from __future__ import annotations

import csv
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from airflow_hetero import runtime

END_OF_EPOCH = {"end_of_epoch": True}


def hyperparameters() -> dict[str, Any]:
    """Hyperparameters with the example's defaults (the SDK JSON-encodes them; runtime decodes)."""
    defaults = {"epochs": 5, "learning_rate": 0.05, "batch_size": 64, "port": 7100, "epoch_pause": 0}
    return {**defaults, **runtime.environment().hyperparameters}


def channel(name: str) -> Path:
    return Path(os.environ.get(f"SM_CHANNEL_{name.upper()}", f"/opt/ml/input/data/{name}"))


def load_stats() -> dict[str, list[float]]:
    stats: dict[str, list[float]] = json.loads((channel("config") / "features.json").read_text())
    return stats


def read_rows() -> list[tuple[list[float], float]]:
    """This host's shard: every CSV file of the raw channel (ShardedByS3Key split the files)."""
    rows = []
    for path in sorted(channel("raw").rglob("*.csv")):
        with path.open(newline="") as handle:
            for record in csv.reader(handle):
                if record and not record[0].startswith("#"):
                    *features, target = (float(v) for v in record)
                    rows.append((features, target))
    return rows


def save(path: Path, state: Any) -> None:
    """Write a checkpoint file whole or not at all (an interruption may come at any time)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(state))
    os.replace(partial, path)


def preprocessed(host: str) -> list[tuple[list[float], float]]:
    """This host's standardised shard: from its checkpoint after a restart, else computed and saved there."""
    saved = runtime.checkpoint_dir() / "shard.json"
    if saved.is_file():
        rows = [(features, y) for features, y in json.loads(saved.read_text())]
        print(f"{host}: {len(rows)} preprocessed rows restored from the checkpoint", flush=True)
        return rows
    stats = load_stats()
    rows = [
        ([(x - m) / s for x, m, s in zip(features, stats["mean"], stats["std"], strict=True)], y)
        for features, y in read_rows()
    ]
    save(saved, rows)
    print(f"{host}: {len(rows)} rows preprocessed", flush=True)
    return rows


def serve() -> None:
    """Data group: preprocess the shard, then stream it to the trainer once per epoch it asks for."""
    env, hps = runtime.environment(), hyperparameters()
    rows = preprocessed(env.current_host)
    print(f"{env.current_host}: serving on port {hps['port']}", flush=True)
    with socket.create_server((runtime.listen_address(env), int(hps["port"]))) as server:
        conn, peer = server.accept()
        with conn, conn.makefile("r") as requests, conn.makefile("w") as out:
            first = int(json.loads(requests.readline())["start_epoch"])
            print(f"{env.current_host}: trainer connected from {peer[0]}, from epoch {first}", flush=True)
            for _ in range(first, int(hps["epochs"]) + 1):
                for start in range(0, len(rows), int(hps["batch_size"])):
                    batch = rows[start : start + int(hps["batch_size"])]
                    out.write(json.dumps({"x": [r[0] for r in batch], "y": [r[1] for r in batch]}) + "\n")
                out.write(json.dumps(END_OF_EPOCH) + "\n")
                out.flush()
    print(f"{env.current_host}: served epochs {first} to {hps['epochs']}", flush=True)


def train() -> None:
    """Training group: SGD on batches from every data host; log the loss; save the model."""
    env, hps = runtime.environment(), hyperparameters()
    data_hosts = env.group_hosts("data_group")
    checkpoint = runtime.checkpoint_dir() / "state.json"
    state = json.loads(checkpoint.read_text()) if checkpoint.is_file() else {"epoch": 0}
    weights: list[float] | None = state.get("weights")
    bias, rate = float(state.get("bias", 0.0)), float(hps["learning_rate"])
    loss = float(state.get("loss", "nan"))
    if state["epoch"]:
        print(f"{env.current_host}: resumed from the checkpoint of epoch {state['epoch']}", flush=True)
    streams = []
    for host in data_hosts:
        sock = runtime.connect(host, int(hps["port"]), timeout=120)
        sock.sendall((json.dumps({"start_epoch": state["epoch"] + 1}) + "\n").encode())
        streams.append(sock.makefile("r"))
        print(f"{env.current_host}: connected to {host}", flush=True)
    for epoch in range(state["epoch"] + 1, int(hps["epochs"]) + 1):
        total, count = 0.0, 0
        for stream in streams:
            for line in stream:
                batch = json.loads(line)
                if batch.get("end_of_epoch"):
                    break
                if weights is None:
                    weights = [0.0] * len(batch["x"][0])
                grad_w, grad_b = [0.0] * len(weights), 0.0
                for features, target in zip(batch["x"], batch["y"], strict=True):
                    error = sum(w * x for w, x in zip(weights, features, strict=True)) + bias - target
                    total, count = total + error * error, count + 1
                    grad_w = [g + error * x for g, x in zip(grad_w, features, strict=True)]
                    grad_b += error
                size = len(batch["y"])
                weights = [w - rate * g / size for w, g in zip(weights, grad_w, strict=True)]
                bias -= rate * grad_b / size
        loss = total / max(count, 1)
        save(checkpoint, {"epoch": epoch, "weights": weights, "bias": bias, "loss": loss})
        print(f"epoch={epoch} loss={loss:.6f} samples={count}", flush=True)
        time.sleep(float(hps["epoch_pause"]))
    model_dir = Path(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "model.json").write_text(json.dumps({"weights": weights, "bias": bias, "final_loss": loss}))
    print(f"{env.current_host}: model saved to {model_dir / 'model.json'}", flush=True)


if __name__ == "__main__":
    runtime.run_by_group({"data_group": serve, "train_group": train})
    sys.exit(0)
