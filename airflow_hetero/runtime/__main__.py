"""``python -m airflow_hetero.runtime ...`` (or ``python -m runtime ...`` from a copy of the folder)."""

import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main())
