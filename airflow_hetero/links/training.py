"""Operator extra links: the training job's SageMaker console page and its CloudWatch log streams.

The operator stores ``{"job_name", "region"}`` under XCom key
:data:`~airflow_hetero.xcom_keys.LINKS_XCOM_KEY` as soon as it knows its job, and pushes both ready-made
URLs under each link's ``xcom_key`` at the same time, so the buttons work while the job is still running
(Airflow 3 reads links from those XComs; Airflow 2.11 has no ``xcom_key`` and calls ``get_link``, which
rebuilds the URL from that key). The class paths
are registered in ``airflow_hetero.get_provider_info()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow_hetero._compat import BaseOperatorLink, XCom, link_xcom_key
from airflow_hetero.links import TRAINING_LINK_NAMES

if TYPE_CHECKING:
    from airflow_hetero._compat import BaseOperator, Context, TaskInstanceKey

LOG_GROUP = "/aws/sagemaker/TrainingJobs"


def console_domain(region: str) -> str:
    """The AWS console host for a region's partition."""
    if region.startswith("cn-"):
        return "console.amazonaws.cn"
    if region.startswith("us-gov-"):
        return "console.amazonaws-us-gov.com"
    return "console.aws.amazon.com"


def _fragment(text: str) -> str:
    """CloudWatch console fragment escaping: URL-encode, then write ``%`` as ``$``."""
    return quote(text, safe="").replace("%", "$")


def training_job_url(region: str, job_name: str) -> str:
    """The SageMaker console page of a training job."""
    return f"https://{region}.{console_domain(region)}/sagemaker/home?region={region}#/jobs/{quote(job_name, safe='')}"


def training_logs_url(region: str, job_name: str) -> str:
    """The CloudWatch Logs console, filtered to the job's streams (``<job>/algo-N-...``)."""
    group = _fragment(quote(LOG_GROUP, safe=""))
    query = _fragment("?logStreamNameFilter=" + quote(job_name + "/", safe=""))
    return (
        f"https://{region}.{console_domain(region)}/cloudwatch/home?region={region}"
        f"#logsV2:log-groups/log-group/{group}{query}"
    )


class _TrainingJobLink(BaseOperatorLink):
    """A link built from the job name and region the operator stored in XCom."""

    name = ""

    def url(self, region: str, job_name: str) -> str:
        """The link for one job."""
        raise NotImplementedError

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        """Rebuild the URL from the stored job info; empty while no job is known."""
        from airflow_hetero.xcom_keys import LINKS_XCOM_KEY

        info = XCom.get_value(ti_key=ti_key, key=LINKS_XCOM_KEY)
        if not isinstance(info, dict) or not info.get("job_name") or not info.get("region"):
            return ""
        return self.url(str(info["region"]), str(info["job_name"]))


class SageMakerTrainingJobLink(_TrainingJobLink):
    """The training job in the SageMaker console."""

    name = TRAINING_LINK_NAMES["SageMakerTrainingJobLink"]

    def url(self, region: str, job_name: str) -> str:
        """See :func:`training_job_url`."""
        return training_job_url(region, job_name)


class TrainingJobLogsLink(_TrainingJobLink):
    """The job's log streams (every host) in the CloudWatch Logs console."""

    name = TRAINING_LINK_NAMES["TrainingJobLogsLink"]

    def url(self, region: str, job_name: str) -> str:
        """See :func:`training_logs_url`."""
        return training_logs_url(region, job_name)


LINKS: tuple[_TrainingJobLink, ...] = (SageMakerTrainingJobLink(), TrainingJobLogsLink())


def persist_job_links(context: Context, *, job_name: str, region: str) -> None:
    """Store the job info and both URLs in XCom right away, so the links work mid-run."""
    ti: Any = context["ti"]
    from airflow_hetero.xcom_keys import LINKS_XCOM_KEY

    ti.xcom_push(key=LINKS_XCOM_KEY, value={"job_name": job_name, "region": region})
    for link in LINKS:
        key = link_xcom_key(link)  # Airflow 2 has no xcom_key: its webserver calls get_link
        if key:
            ti.xcom_push(key=key, value=link.url(region, job_name))


def __getattr__(name: str) -> Any:
    """``XCOM_KEY``: :data:`airflow_hetero.xcom_keys.LINKS_XCOM_KEY` (not imported at DAG parse)."""
    if name == "XCOM_KEY":
        from airflow_hetero.xcom_keys import LINKS_XCOM_KEY

        return LINKS_XCOM_KEY
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
