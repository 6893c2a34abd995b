"""The arguments every task of this package declares the same way, once: AWS and prices.

The four AWS arguments (:class:`AwsSettings`, the triggers' too). ``aws_conn_id``, ``region_name``,
``verify`` and ``botocore_config`` mean what they mean on the Amazon provider's operators (its
``AwsBaseHookMixin`` and ``aws_template_fields``):

* ``aws_conn_id``: the Airflow AWS connection (``endpoint_url`` in its extra is honoured);
  None: boto3's own credential chain.
* ``region_name``: overrides the connection's region.
* ``verify``: TLS certificate verification of AWS calls: False, or the path of a CA bundle (a
  private CA); None: botocore's default.
* ``botocore_config``: ``botocore.config.Config`` options as a dict (proxies, retries, timeouts).

The training operator, the sensor, the summary operator and the triggers all inherit
:class:`AwsSettings`: it keeps the four as attributes (the names Airflow templates and the trigger
serializes) and builds :class:`~airflow_hetero.hooks.training.HeteroTrainingHook` from them. A new
AWS argument goes here (docs/architecture.md).

The prices a run's cost uses (:class:`TaskPrices`, the three tasks'): ``prices=``, overrides per
instance-hour or one :class:`~airflow_hetero.pricing.settings.PriceSettings`, checked at DAG parse when
given; the default (the Price List, in USD) is built when first read.

Importing this module loads neither the hook, boto3 nor the pricing part: a DAG file pays for these
few lines only (tests/package/test_parse_path.py).
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_hetero.hooks.batch import HeteroBatchHook
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.pricing.settings import PriceSettings

#: The connection used when none is named (``AwsBaseHook.default_conn_name``, without importing it).
DEFAULT_AWS_CONN_ID = "aws_default"
#: The AWS keyword arguments, in the order tasks declare them (and the trigger serializes them).
AWS_ARGUMENTS = ("aws_conn_id", "region_name", "verify", "botocore_config")
#: The ones rendered with Jinja (as the Amazon provider's: a config dict is not).
AWS_TEMPLATE_FIELDS = ("aws_conn_id", "region_name", "verify")
#: :meth:`AwsSettings.aws_settings_key`: connection, region, ``verify`` and the config as JSON.
AwsSettingsKey: TypeAlias = "tuple[str | None, str | None, str, str]"


@functools.cache
def aws_template_fields(*extra: str) -> tuple[str, ...]:
    """``extra`` template fields followed by the AWS ones, each once (the task's own fields first, so
    Rendered Templates lists them in the order it did)."""
    if not all(isinstance(name, str) for name in extra):
        raise TypeError(f"template fields are names (str), got {', '.join(map(repr, extra))}")
    return tuple(dict.fromkeys((*extra, *AWS_TEMPLATE_FIELDS)))


class AwsSettings:
    """Holds the AWS arguments (see the module doc) and builds the hook from them.

    A class using it keeps the four keyword arguments in its own ``__init__`` signature (Airflow
    fills ``default_args`` from that signature) and passes them to :meth:`set_aws_settings`.
    """

    aws_conn_id: str | None = DEFAULT_AWS_CONN_ID
    region_name: str | None = None
    verify: bool | str | None = None
    botocore_config: dict[str, Any] | None = None

    def set_aws_settings(
        self,
        aws_conn_id: str | None,
        region_name: str | None,
        verify: bool | str | None,
        botocore_config: dict[str, Any] | None,
    ) -> None:
        """Keep the four AWS arguments (attributes of these names: templated, serialized)."""
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.verify = verify
        self.botocore_config = botocore_config

    def aws_settings(self) -> dict[str, Any]:
        """The AWS arguments as keyword arguments (for a trigger, or its serialized kwargs)."""
        return {name: getattr(self, name) for name in AWS_ARGUMENTS}

    def aws_settings_key(self) -> AwsSettingsKey:
        """Equal for two holders whose hooks reach the same service the same way (hashable; a
        config's keys in any order)."""
        config = json.dumps(self.botocore_config, sort_keys=True, default=str)
        return (self.aws_conn_id, self.region_name, json.dumps(self.verify), config)

    def make_hook(self) -> HeteroTrainingHook:
        """A new hook for these settings (the hook module, the provider and boto3 load here)."""
        from airflow_hetero.hooks.training import HeteroTrainingHook

        return HeteroTrainingHook(
            aws_conn_id=self.aws_conn_id,
            region_name=self.region_name,
            verify=self.verify,
            config=self.botocore_config,
        )

    def make_batch_hook(self) -> HeteroBatchHook:
        """A Batch hook (queue mode's service jobs) for these settings."""
        from airflow_hetero.hooks.batch import HeteroBatchHook

        return HeteroBatchHook(
            aws_conn_id=self.aws_conn_id,
            region_name=self.region_name,
            verify=self.verify,
            config=self.botocore_config,
        )


#: The price arguments tasks took beside ``prices`` before ``prices=PriceSettings.of(...)`` (one release more,
#: with a warning saying what to write instead).
OLD_PRICE_ARGUMENTS = ("currency", "use_pricing_api")
_PRICES_INSTEAD = (
    "prices=PriceSettings.of(prices, currency, use_pricing_api) "
    "(from airflow_hetero.pricing.settings import PriceSettings)"
)


class TaskPrices:
    """Holds a task's ``prices=`` as one :class:`~airflow_hetero.pricing.settings.PriceSettings`.

    A class using it keeps ``prices`` in its ``__init__`` signature and passes it, with the rest of its
    keyword arguments (the deprecated ``currency`` and ``use_pricing_api`` are taken from them), to
    :meth:`set_prices`.
    """

    #: The prices given (None: the default, built by :attr:`price_settings` when first read).
    given_prices: PriceSettings | None = None

    def set_prices(self, prices: Mapping[str, float] | PriceSettings | None, kwargs: dict[str, Any]) -> None:
        """Check and keep ``prices`` (a bad price or currency fails the DAG's parse)."""
        from airflow_hetero._compat import deprecated_arguments  # here: importing the module loads no Airflow

        old = deprecated_arguments(kwargs, OLD_PRICE_ARGUMENTS, _PRICES_INSTEAD)
        if prices is None and not old:
            return
        from airflow_hetero.pricing.settings import PriceSettings

        if isinstance(prices, PriceSettings):
            if old:
                raise ValueError(f"give prices=PriceSettings.of(...) or {', '.join(old)}, not both")
            self.given_prices = prices
            return
        self.given_prices = PriceSettings.of(prices, **old)

    @property
    def price_settings(self) -> PriceSettings:
        """What prices this task's runs: ``prices=`` as given, else the Price List in USD."""
        if self.given_prices is not None:
            return self.given_prices
        from airflow_hetero.pricing.settings import PriceSettings

        return PriceSettings()
