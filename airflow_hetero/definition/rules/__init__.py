"""Every rule of definition mode, with the messages users see: where a new check of a definition goes.

``checks`` one field on its own (the service's limits and patterns; called from the fields' validators in
:mod:`airflow_hetero.definition.model`), ``cross_field`` the rules that span fields, ``distribution`` and
``model_parallel`` the SDK's distribution strategies, ``option_rules`` managed spot, warm pools, training plans
and instance preferences (both forms and the offline endpoint), ``fallbacks`` the fallback instance types (both
forms). Each yields or raises the one :class:`~airflow_hetero.definition.errors.Problem`; none reads the model
or the request builder (tests/package and the import-linter contracts keep it so).
"""
