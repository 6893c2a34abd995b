"""Training script of the system test's jobs: each host logs a falling loss for --seconds seconds, and
(given --release_file) on until that file exists, so a test can keep jobs running until it has seen
what it waits for."""

import json
import os
import sys
import time

args = dict(zip(sys.argv[1::2], sys.argv[2::2], strict=False))
raw = args.get("--seconds", "10")
seconds = float(json.loads(raw) if raw.startswith('"') else raw)
release = args.get("--release_file", "")
release = json.loads(release) if release.startswith('"') else release
group = os.environ.get("SM_CURRENT_INSTANCE_GROUP", "?")
print(f"group={group} host={os.environ.get('SM_CURRENT_HOST')} seconds={seconds}", flush=True)
start, epoch = time.monotonic(), 0


def held() -> bool:
    """Still waiting for the release file (at most ten minutes)."""
    return bool(release) and not os.path.exists(release) and time.monotonic() - start < 600


while time.monotonic() - start < seconds or held():
    epoch += 1
    print(f"epoch={epoch} loss={1.0 / (1 + epoch):.4f}", flush=True)
    time.sleep(1)
if group == "train_group":
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w") as out:
        json.dump({"epochs": epoch}, out)
print("done", flush=True)
