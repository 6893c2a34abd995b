"""Helpers shared by the tests, imported as ``support.<module>`` (``tests/`` is on ``sys.path``
through its ``conftest.py``).

``moto_jobs`` (moto with controllable training jobs, a moto server, AWS connections),
``fault_proxy`` (a loopback proxy that loses, resets or fails answers), ``log_jobs`` and
``verdict_jobs`` (jobs with logs and metrics put to moto), ``task_logs`` (a task's log records),
``png`` (read a screenshot), ``local_jobkit`` (sources, requests and waits for the offline
endpoint), ``serve_process`` (``local serve`` as a child process, the pids its hosts started),
``child_output`` (a child's output followed, and its exit awaited, with a deadline),
``service_model`` (refuse a request as SageMaker would, by botocore's model), ``trigger_runs``
(a module's ``trigger()`` and a trigger's ``first_event``), ``cpu_load`` (CPU burners on every
core), ``late_kills`` (SIGKILLs that arrive late, as on a loaded machine), ``installed`` (the
wheel, a scratch venv with it installed, the CLI where an extra is missing) and ``sdk_client.py``
(run by path in the SageMaker SDK's own venv, built by ``make`` from ``sdk-requirements.txt``).
"""
