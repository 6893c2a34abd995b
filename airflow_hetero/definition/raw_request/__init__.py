"""A CreateTrainingJob request as given (request mode), and the checks of such a request.

``training_request`` is request mode's :class:`~.training_request.TrainingRequest` (what the
operator's ``request=`` and the CLI's ``--request`` load); ``service_shapes`` checks a request
against botocore's shapes, ``service_rules`` against the service's rules beyond them (the offline
endpoint reads both too); ``provider_config`` takes the Amazon provider's ``config`` steps
(``S3Operations``, a role name as ``RoleArn``). Nothing here reads a typed definition.
"""
