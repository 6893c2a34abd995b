"""Tiny training entry point used only as the local source_dir of SDK fixture case (i)."""

import json
import os


def main() -> None:
    """Print the hyperparameters the container hands to the script."""
    print(json.dumps({"hosts": os.environ.get("SM_HOSTS"), "hps": os.environ.get("SM_HPS")}))


if __name__ == "__main__":
    main()
