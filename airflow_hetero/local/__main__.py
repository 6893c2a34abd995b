"""``python -m airflow_hetero.local serve``: the offline endpoint without the package CLI."""

from __future__ import annotations

import sys

from airflow_hetero.local.cli import main

if __name__ == "__main__":
    sys.exit(main())
