"""Run every benchmark: ``python -m benchmarks`` (``make bench``).

Each prints ratios against a baseline measured in the same run; see the module docstrings.
"""

from __future__ import annotations

import sys

from benchmarks import (
    hostile_definitions,
    import_cost,
    log_summary,
    parse_fork,
    print_log,
    queue_triggerer,
    runs_page,
    triggerer,
)


def main() -> int:
    status = import_cost.main([])
    print()
    status = status or parse_fork.main([])
    print()
    status = status or print_log.main([])
    print()
    status = status or triggerer.main([])
    print()
    status = status or queue_triggerer.main([])
    print()
    status = status or log_summary.main([])
    print()
    status = status or runs_page.main([])
    print()
    return status or hostile_definitions.main([])


if __name__ == "__main__":
    sys.exit(main())
