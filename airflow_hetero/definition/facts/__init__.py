"""What botocore and the SageMaker SDK define, as both the rules and the request builder read it.

``instance_types`` the training instance types (botocore's enum; ``service_model``: where botocore's models lie),
``images`` the Deep Learning Container image URIs (the SDK's catalogue), ``roles`` a role ARN or name as the SDK
and the Amazon provider tell them apart, ``encoding`` hyperparameter values as the SDK sends them. Nothing here
reads a definition's model or rules.
"""
