"""The Airflow UI part: an "Instance groups" view of a log summary (charts per group and the verdict).

:mod:`~airflow_hetero.plugins.page` renders the page (pure); :mod:`~.app` serves it from the
Airflow 3 api-server; :mod:`~.flask_view` from the Airflow 2.11 webserver; :mod:`~.instance_groups`
is the plugin that registers them (entry point ``airflow.plugins``). Importing the plugin module
loads neither FastAPI nor Flask: the apps are built on first use.
"""
