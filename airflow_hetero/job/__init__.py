"""What a training job is, whichever part asks: its instance groups, its state, its waits, its owner.

Shared by the operator, the sensor, the trigger, the log core and the offline endpoint, and
below all of them: :mod:`~airflow_hetero.job.resource_config` (SageMaker's ResourceConfig and
channel shapes, stdlib only), :mod:`~.outcome` (job state -> task result and its errors),
:mod:`~.waiting` (the job's own limits, the not-found grace, the deferral deadline) and
:mod:`~.identity` (which task instance a job belongs to). No AWS SDK, no hook.
"""
