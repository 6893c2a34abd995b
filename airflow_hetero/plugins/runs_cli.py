"""``airflow-hetero runs DAG_ID TASK_ID``: the Runs view without a browser (docs/cli.md).

The last runs of a training task (or of its summary task), read from the XComs both pushed: from the metadata
database the Airflow CLI uses (Airflow's own session and XCom model, one query for every run's XComs,
:mod:`~airflow_hetero.plugins.runs_query`), or from a JSON export of them (``--from-json``). It prints the table of
:mod:`~airflow_hetero.plugins.runs_table`, or with ``--json`` the data the view draws: one data model for both.
Bad arguments (a limit out of bounds, an unreadable export) exit 2 with argparse's message. Loading this module
(every ``airflow-hetero`` run does, to add the subcommand) imports nothing beyond the standard library and the
runs' light model.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from airflow_hetero.plugins.runs_model import DEFAULT_LIMIT, MAX_LIMIT, checked_limit, checked_page


def _checked(check: Any) -> Any:
    """An argparse ``type`` of an int that ``check`` bounds (its ValueError: argparse's usage error, exit 2)."""

    def parse(text: str) -> int:
        try:
            return int(check(int(text)))
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return parse


def _export(text: str) -> list[Any]:
    """``--from-json FILE``: its XCom entries (a JSON list, or the REST API's ``{"xcom_entries": [...]}``)."""
    try:
        data = json.loads(Path(text).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {err}") from None
    entries = data.get("xcom_entries") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise argparse.ArgumentTypeError(f"{text}: expected a JSON list of XCom entries (or {{'xcom_entries': [...]}})")
    return entries


def register(sub: Any) -> None:
    """Add the ``runs`` subcommand to ``airflow-hetero``'s subparsers."""
    runs = sub.add_parser(
        "runs",
        help="print a training task's last runs: cost per group, length, cluster, right-sizing, markers, verdict",
        description="The Runs view without a browser: the last runs of a training task (or of its summary task), "
        "from the XComs both pushed, read from the metadata database the Airflow CLI uses (or from an export).",
    )
    runs.add_argument("dag_id", metavar="DAG_ID")
    runs.add_argument("task_id", metavar="TASK_ID", help="the training task, or the summary task summarising it")
    runs.add_argument(
        "--limit",
        type=_checked(checked_limit),
        default=DEFAULT_LIMIT,
        help=f"runs per page, 1 to {MAX_LIMIT} (default %(default)s)",
    )
    runs.add_argument(
        "--page", type=_checked(checked_page), default=1, help="1: the newest runs (default), 2: the ones before..."
    )
    runs.add_argument("--map-index", type=int, default=-1, help="of a mapped task (default -1: not mapped)")
    runs.add_argument(
        "--from-json",
        type=_export,
        metavar="FILE",
        help="read the XComs from this export (a JSON list of XCom entries with run_id, task_id, key and value; "
        "docs/cli.md) instead of the metadata database",
    )
    runs.add_argument("--json", action="store_true", help="print the data the view draws, as JSON")
    runs.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write the page the view draws to FILE (one self-contained HTML file, no script: open it in a "
        "browser or attach it to a report)",
    )
    runs.set_defaults(handler=_runs)


def _runs(args: argparse.Namespace) -> int:
    from airflow_hetero.plugins.runs_history import run_history
    from airflow_hetero.plugins.runs_model import runs_of_entries
    from airflow_hetero.plugins.runs_table import format_runs

    page, limit = args.page, args.limit
    if args.from_json is not None:
        found = runs_of_entries(args.from_json, args.dag_id, map_index=args.map_index)
        runs, older = found[(page - 1) * limit : page * limit], len(found) > page * limit
    else:
        from airflow.utils.session import create_session

        from airflow_hetero.plugins.runs_query import read_runs

        with create_session() as session:
            runs, older = read_runs(
                session, args.dag_id, args.task_id, page=page, limit=limit, map_index=args.map_index
            )
    history = run_history(args.dag_id, args.task_id, runs, page=page, limit=limit, has_older=older)
    print(json.dumps(history.as_dict(), indent=2) if args.json else format_runs(history))
    if args.html is not None:
        from airflow_hetero.plugins.runs_page import render_runs_page, task_where

        where = task_where(args.dag_id, args.task_id, args.map_index)
        args.html.write_text(render_runs_page(history, where=where, params=None), encoding="utf-8")
    return 0
