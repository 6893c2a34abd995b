"""The offline AWS Batch service-job queue: SageMaker Training jobs submitted through a queue with a capacity.

Laid out as moto lays out a service, one file per role: :mod:`.responses` routes the rest-json
requests (``POST /v1/<lowercased operation>``), :mod:`.validators` checks each against botocore's
``batch`` model, :mod:`.backend` answers them over the :mod:`.models` (service environments, job
queues, scheduling policies, service jobs and their attempts), :mod:`.scheduler` decides which
RUNNABLE jobs are admitted, and :mod:`.exceptions` words refusals as Batch does. Every attempt
is a training job the endpoint's own training service creates and runs (:class:`.backend.TrainingJobs`).
"""
