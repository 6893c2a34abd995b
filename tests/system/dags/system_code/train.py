"""Training script of the system test's jobs: each host logs a falling loss for --seconds seconds."""

import json
import os
import sys
import time

args = dict(zip(sys.argv[1::2], sys.argv[2::2], strict=False))
raw = args.get("--seconds", "10")
seconds = float(json.loads(raw) if raw.startswith('"') else raw)
group = os.environ.get("SM_CURRENT_INSTANCE_GROUP", "?")
print(f"group={group} host={os.environ.get('SM_CURRENT_HOST')} seconds={seconds}", flush=True)
start, epoch = time.monotonic(), 0
while time.monotonic() - start < seconds:
    epoch += 1
    print(f"epoch={epoch} loss={1.0 / (1 + epoch):.4f}", flush=True)
    time.sleep(1)
if group == "train_group":
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w") as out:
        json.dump({"epochs": epoch}, out)
print("done", flush=True)
