"""The API the offline endpoint answers: SageMaker's training-job actions over HTTP, moto for the rest.

``server`` (``LocalEndpoint``, the HTTP server), ``app`` (the WSGI app and its request guard),
``service`` (the training-job actions), ``validators`` and ``constraints`` (what a
CreateTrainingJob request may hold), ``tagging`` (the tag actions), ``errors`` (SageMaker-shaped
refusals). Nothing here runs a host: that is :mod:`airflow_hetero.local.training`.
"""
