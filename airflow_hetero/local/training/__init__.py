"""The job the offline endpoint runs: from Downloading to a terminal state, as SageMaker would.

``runner`` (the lifecycle), ``prepare`` and ``layout`` (source, channels and each host's
``/opt/ml`` tree), ``store`` (job records), ``transfer`` (S3), ``logship`` (host output to
CloudWatch Logs), ``utilisation`` (CPU and memory metrics), ``training_metrics`` (the request's
MetricDefinitions), ``clients`` (boto3 clients against the endpoint itself). It answers no
request (:mod:`airflow_hetero.local.api` does) and starts hosts through
:mod:`airflow_hetero.local.host`.
"""
