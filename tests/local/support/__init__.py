"""Helpers of the offline endpoint's tests: ``local_jobkit`` (sources, requests, waiting) and
``sdk_client.py`` (run by path in the SageMaker SDK's own venv, from ``sdk-requirements.txt``).

Imported as ``support.<module>``: ``tests/local`` is on ``sys.path`` through its ``conftest.py``.
"""
