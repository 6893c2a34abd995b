"""What the package's hooks share: an ``AwsBaseHook`` for one AWS service, with retries while polling.

:class:`HeteroAwsHook` is the base of :class:`~airflow_hetero.hooks.training.HeteroTrainingHook`
(SageMaker) and :class:`~airflow_hetero.hooks.batch.HeteroBatchHook` (AWS Batch): the constructor (the
service as ``client_type``, a ``retry_policy``), the async client with botocore's data loaded in a thread
(:func:`preload_client_data`), a retried call, and the client with botocore's retries off that sends a
create exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from typing import Any, ClassVar

from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

from airflow_hetero._retry import RetryPolicy, call_with_retry

log = logging.getLogger(__name__)

#: botocore retries for the clients that create (CreateTrainingJob, SubmitServiceJob): one attempt,
#: the hook decides what follows.
NO_RETRIES = {"total_max_attempts": 1}

#: Services whose botocore data each data loader holds already (see :func:`preload_client_data`).
_preloaded: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_preload_lock = threading.Lock()


def preload_client_data(session: Any, service: str) -> None:
    """Have ``session``'s data loader read botocore's JSON data for ``service`` (blocking; call in a thread).

    The first aiobotocore client of a process reads the service model, endpoints and partitions
    (about 0.3 s of CPU) inside ``async with``, that is in the event loop, where it stalls every
    other trigger. The Amazon provider's sessions share one caching loader, so a throwaway client
    built here, in its own loop, leaves only cached lookups for the real one. Once per loader and
    service; the throwaway has dummy credentials and never calls anything.
    """
    loader = session.get_component("data_loader")
    with _preload_lock:
        if service in _preloaded.setdefault(loader, set()):
            return

        async def build() -> None:
            async with session.create_client(
                service, region_name="us-east-1", aws_access_key_id="preload", aws_secret_access_key="preload"
            ):
                pass

        try:
            asyncio.run(build())
        except Exception as exc:  # only a head start: the real client still loads what it needs
            log.info("Could not preload botocore's data for %s (%s): the first client will load it", service, exc)
        _preloaded[loader].add(service)


class HeteroAwsHook(AwsBaseHook):
    """An ``AwsBaseHook`` for the service ``aws_service`` whose polling calls retry transient errors.

    :param aws_conn_id: Airflow AWS connection (``endpoint_url`` in its extra is honoured).
    :param region_name: overrides the connection's region.
    :param retry_policy: backoff for transient errors while polling (tests use short delays).
    Other keyword arguments (``verify``, ``config``) go to ``AwsBaseHook``.
    """

    #: The botocore service name (the ``client_type``), set by each subclass.
    aws_service: ClassVar[str]
    #: Backoff used when no ``retry_policy`` is passed.
    default_retry_policy = RetryPolicy()

    def __init__(
        self,
        aws_conn_id: str | None = AwsBaseHook.default_conn_name,
        region_name: str | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs["client_type"] = self.aws_service
        super().__init__(aws_conn_id=aws_conn_id, region_name=region_name, **kwargs)
        self.retry_policy = retry_policy or self.default_retry_policy

    async def async_client(self) -> Any:
        """The aiobotocore client (an async context manager) without blocking the event loop.

        The provider's ``get_async_conn`` resolves credentials in a thread but leaves botocore's
        data loading to ``async with``; :func:`preload_client_data` does that part in a thread first.
        """
        from airflow.providers.amazon.aws.hooks.base_aws import BaseSessionFactory

        def preload() -> None:
            # an async session as the provider makes them (its first one imports aiobotocore and
            # aiohttp): the same shared data loader, no credentials
            session = BaseSessionFactory(conn=None).get_async_session()  # type: ignore[no-untyped-call]
            preload_client_data(session, self.aws_service)

        await asyncio.to_thread(preload)
        return await self.get_async_conn()  # type: ignore[no-untyped-call]

    def call(self, fn: Any, what: str, **kwargs: Any) -> Any:
        """Call a boto3 method, retrying transient errors per ``retry_policy``."""
        return call_with_retry(fn, policy=self.retry_policy, what=what, **kwargs)

    def no_retry_client(self) -> Any:
        """A new client of this service with botocore's own retries off: for the one create call."""
        from botocore.config import Config

        config = self._get_config() or Config()
        session = self.get_session(region_name=self.region_name)
        return session.client(
            service_name=self.aws_service,
            endpoint_url=self.conn_config.get_service_endpoint_url(service_name=self.aws_service),
            config=config.merge(Config(retries=NO_RETRIES)),
            verify=self.verify,
        )
