"""What a training job is, whichever part asks: its instance groups, its state and its identity.

Shared by the operator, the sensor, the trigger, the log core and the offline endpoint, and
below all of them: :mod:`~airflow_hetero.job.resource_config` (SageMaker's ResourceConfig and
channel shapes, stdlib only), :mod:`~.outcome` (job state -> task result, wait limits) and
:mod:`~.identity` (which task instance a job belongs to). No AWS SDK, no hook.
"""
