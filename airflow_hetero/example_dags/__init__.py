"""The example DAGs shipped with the package, as Airflow providers keep theirs.

``hetero_retraining_dag.py`` (weekly retraining on a heterogeneous cluster, with its job definition
and training code in ``hetero_retraining/``) and ``hetero_model_deploy_dag.py`` (scheduled on the
model asset the first one updates). ``airflow-hetero demo`` runs both against the offline endpoint;
point an Airflow ``dags_folder`` at this directory (:func:`folder`) to run them yourself.
"""

from __future__ import annotations

from pathlib import Path


def folder() -> Path:
    """The directory holding the example DAG files (inside the installed package)."""
    return Path(__file__).resolve().parent
