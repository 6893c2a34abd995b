"""A definition -> the CreateTrainingJob request the SageMaker Python SDK v2 sends.

``definition_request`` the request (``build_training_request``), ``hyperparameters`` its HyperParameters as
the SDK computes them, ``source`` the training code: where a local ``source_dir`` goes in S3 and how it is
packaged. Reads the model's fields (:mod:`airflow_hetero.definition.model`) and the distribution rules' view of
the SDK (:mod:`airflow_hetero.definition.rules.distribution`).
"""
