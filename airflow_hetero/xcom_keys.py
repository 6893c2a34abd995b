"""The XCom keys the package's tasks exchange: the contract between the training task, the summary task, the
extra links and views, and the next run. Stdlib only (every part may read it); a key renamed here breaks the
runs in flight, so a key is only ever added."""

#: Training task: the training job's name, pushed as soon as it is created or re-attached and again for each
#: capacity attempt or Batch attempt, whatever the task's ending (a failed task pushes no ``return_value``).
JOB_NAME_XCOM_KEY = "training_job_name"
#: Training task with fallbacks: its failed capacity attempts (the result's ``capacity_attempts``), pushed with
#: each job's name and before the task fails when no cluster is left.
CAPACITY_ATTEMPTS_XCOM_KEY = "capacity_attempts"
#: Training task in queue mode: the service job (``{"job_id", "job_name", "job_queue"}``) once submitted or found.
SERVICE_JOB_XCOM_KEY = "service_job"
#: Training task: the right-sizing decision this run was made with; summary task: the decision the next run
#: would be made with (also in its ``return_value``).
RIGHTSIZING_XCOM_KEY = "rightsizing"
#: Summary task: its record of the run (the evidence the next run's right-sizing reads).
RECORD_XCOM_KEY = "rightsizing_record"
#: Summary task: the bottleneck verdict (also inside ``return_value``).
VERDICT_XCOM_KEY = "verdict"
#: Summary task: what the job cost (also inside ``return_value``).
COST_XCOM_KEY = "cost"
#: Training task and sensor: the job's console links (the extra links read it).
LINKS_XCOM_KEY = "hetero_training_job"
#: Training task and summary task: Airflow's own key of what a task returns (the training task's result dict, the
#: summary task's whole summary); the Runs view reads it with the keys above.
RESULT_XCOM_KEY = "return_value"
#: Training task with a budget (``max_cost``): SageMaker stopped its job at the runtime cap the budget set
#: (``{"job_name", "message"}``), pushed before the task fails; the Runs view marks the run with it.
BUDGET_STOP_XCOM_KEY = "budget_stop"
