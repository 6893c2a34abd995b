"""The ``airflow-hetero`` command: validate and render definitions offline, summarise a job, run the
local endpoint.

``validate`` and ``render`` never touch the network. They take a definition or a CreateTrainingJob
request (request mode): a file whose top-level keys are PascalCase (``RoleArn``) is a request, a
definition's are snake_case; ``--request`` says so explicitly. Exit status: 0 when fine, 2 when the
definition (or the file holding it) has problems, printed one per line without a traceback.
``--fallback GROUP=TYPE[:COUNT],...`` (repeatable, one group each) gives the operator's
``fallback_instance_types``; both commands then show the clusters tried when capacity is short, in order.
``--max-cost X`` (with ``--price``, ``--currency``, ``--no-pricing-api``) prices the cluster and says what the
operator's budget would do: the runtime cap it sets, or why it refuses (exit 2); ``cost`` prints each group's
price per hour and the worst case (docs/cost.md). Only these ask the Price List Query API, for the types no
``--price`` gives. ``summarize`` prints a job's per-group table and verdict (what ``HeteroLogSummaryOperator`` logs)
with plain boto3 clients: 1 when AWS answers an error, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_hetero.definition.errors import JobDefinitionError

if TYPE_CHECKING:
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.job.budget import BudgetPlan
    from airflow_hetero.pricing.price_list import Price
    from airflow_hetero.pricing.settings import PriceSettings

EXIT_INVALID = 2
EXIT_AWS_ERROR = 1
#: Subcommand groups living in their own modules: (module, function adding the parser).
_PLUGINS = (
    ("airflow_hetero.local.cli", "register"),
    ("airflow_hetero.demo", "register"),
    ("airflow_hetero.plugins.runs_cli", "register"),
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return EXIT_INVALID
    try:
        code: int = args.handler(args)
    except JobDefinitionError as err:
        print_problems(getattr(args, "file", None), err)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `airflow-hetero render job.yaml | head`
        sys.stderr.close()
        return 0
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-hetero", description="SageMaker heterogeneous-cluster training for Airflow."
    )
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    validate = sub.add_parser("validate", help="check a job definition or request (YAML or JSON) offline")
    validate.add_argument("file", type=Path, help="definition or CreateTrainingJob request file")
    validate.add_argument("--json", action="store_true", help="print problems as JSON")
    _add_request_flag(validate)
    _add_fallback_option(validate)
    _add_budget_options(validate)
    validate.set_defaults(handler=_validate)

    render = sub.add_parser("render", help="print the CreateTrainingJob request a definition (or request) becomes")
    render.add_argument("file", type=Path, help="definition or CreateTrainingJob request file")
    _add_request_flag(render)
    _add_fallback_option(render)
    _add_budget_options(render)
    render.add_argument(
        "--rightsizing-history",
        type=Path,
        metavar="FILE",
        help="a right-sizing decision as XCom holds it (JSON: the summary task's or the training task's "
        "'rightsizing' key): print the decision for the next run, and in apply mode render its counts "
        "(docs/rightsizing.md)",
    )
    render.add_argument(
        "--rightsizing",
        metavar="JSON",
        help="with --rightsizing-history: the policy to decide with (default: the one the file was made with)",
    )
    render.add_argument("--job-name", help="training job name (default: <base_job_name>-<hash of the file>)")
    render.add_argument(
        "--region", help="AWS region (default: $AWS_DEFAULT_REGION, else us-east-1); only shapes the request"
    )
    render.set_defaults(handler=_render)

    cost = sub.add_parser(
        "cost", help="print each group's price per hour and the job's worst case (and a budget's runtime cap)"
    )
    cost.add_argument("file", type=Path, help="definition or CreateTrainingJob request file")
    _add_request_flag(cost)
    _add_budget_options(cost)
    cost.set_defaults(handler=_cost, fallback=[])

    types = sub.add_parser("instance-types", help="list the training instance types botocore knows")
    types.set_defaults(handler=_instance_types)

    _add_summarize(sub)

    for module_name, function in _PLUGINS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name != module_name:
                raise
            continue
        getattr(module, function)(sub)
    return parser


def print_problems(file: Path | None, err: JobDefinitionError) -> None:
    """One line per problem on stderr, prefixed with the file when there is one."""
    prefix = f"{file}: " if file is not None else ""
    for problem in err.problems:
        where = "" if file is not None and problem.loc == str(file) else f"{problem.loc}: "
        print(f"{prefix}{where}{problem.msg}", file=sys.stderr)


def _add_request_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--request",
        action="store_true",
        help="the file is a CreateTrainingJob request (default: told by its keys, PascalCase for a request)",
    )


def _add_fallback_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fallback",
        action="append",
        default=[],
        metavar="GROUP=TYPE[:COUNT],...",
        help="fallback instance types of a group, in order, as the operator's fallback_instance_types "
        "(repeatable, one group each; in a definition it replaces the group's list), e.g. "
        "train_group=ml.p5.48xlarge,ml.g5.48xlarge:2",
    )


def _add_price_options(parser: argparse.ArgumentParser) -> None:
    from airflow_hetero.pricing.price_list import PRICE_LIST_CURRENCY

    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="TYPE=PRICE",
        help="price per instance-hour of an instance type, e.g. ml.p4d.24xlarge=37.69 (repeatable); wins over "
        "the Price List Query API",
    )
    parser.add_argument(
        "--currency", default=PRICE_LIST_CURRENCY, help="currency of --price and of the cost (default %(default)s)"
    )
    parser.add_argument(
        "--no-pricing-api", action="store_true", help="do not ask the Price List Query API (pricing:GetProducts)"
    )


def _add_budget_options(parser: argparse.ArgumentParser) -> None:
    from airflow_hetero.job.budget import DEFAULT_MIN_RUNTIME_SECONDS

    parser.add_argument(
        "--max-cost",
        type=float,
        metavar="X",
        help="the operator's max_cost: say the runtime cap its budget sets, or why it refuses (docs/cost.md)",
    )
    parser.add_argument(
        "--min-runtime",
        type=int,
        default=DEFAULT_MIN_RUNTIME_SECONDS,
        metavar="SECONDS",
        help="the operator's budget_min_runtime_seconds (default %(default)s)",
    )
    _add_price_options(parser)
    parser.add_argument(
        "--price-region", help="region whose prices the Price List gives (default: $AWS_DEFAULT_REGION, else us-east-1)"
    )
    parser.add_argument("--endpoint-url", help="the Price List's endpoint (e.g. the offline endpoint's stand-in)")


def parse_fallbacks(options: Sequence[str]) -> dict[str, list[Any]] | None:
    """``["train=ml.p5.48xlarge,ml.g5.48xlarge:2"]`` -> ``{"train": ["ml.p5.48xlarge", {"instance_type":
    "ml.g5.48xlarge", "instance_count": 2}]}`` (None when none given); the loader checks the entries."""
    from airflow_hetero.definition.errors import Problem

    out: dict[str, list[Any]] = {}
    for option in options:
        group, sep, listed = option.partition("=")
        if not sep or not group.strip():
            raise JobDefinitionError([Problem("--fallback", f"{option!r}: expected GROUP=TYPE[:COUNT],...")])
        entries: list[Any] = []
        for item in filter(None, (part.strip() for part in listed.split(","))):
            kind, colon, count = item.partition(":")
            if colon and not count.isdigit():
                raise JobDefinitionError([Problem("--fallback", f"{item!r}: the count after ':' is a whole number")])
            entries.append({"instance_type": kind, "instance_count": int(count)} if colon else kind)
        out.setdefault(group.strip(), []).extend(entries)
    return out or None


def _load(args: argparse.Namespace) -> Submittable:
    """The file's definition or request, checked (a request: by its keys, or with ``--request``)."""
    from airflow_hetero.definition.input_file import read_definition_file
    from airflow_hetero.definition.raw_request.training_request import is_request_document
    from airflow_hetero.definition.submittable import load_submittable

    data = read_definition_file(args.file)
    fallbacks = parse_fallbacks(args.fallback)
    return load_submittable(data, request=args.request or is_request_document(data), fallbacks=fallbacks)


def capacity_plan_lines(job: Submittable, request: dict[str, Any]) -> list[str]:
    """``1. train=1 x ml.p4d.24xlarge, data=2 x ml.c5.xlarge``, one per cluster the task tries when capacity
    is short, in order (none when no group has fallbacks)."""
    from airflow_hetero.job.capacity_plan import CapacityPlan, describe_cluster

    plan = CapacityPlan.for_request(request, job.fallbacks)
    if not plan.has_fallbacks:
        return []
    return [f"{number}. {describe_cluster(cluster)}" for number, cluster in enumerate(plan.clusters(), 1)]


def _validate(args: argparse.Namespace) -> int:
    from airflow_hetero.definition.submittable import DefinitionJob
    from airflow_hetero.job.resource_config import instance_groups, is_hetero

    try:
        job = _load(args)
    except JobDefinitionError as err:
        if args.json:
            print(json.dumps({"valid": False, "problems": err.errors()}, indent=2))
            return EXIT_INVALID
        raise
    kind = "definition" if isinstance(job, DefinitionJob) else "request"
    request = job.build(job_name="validate", region="us-east-1", role_arn=job.steps.role_name)  # its cluster
    hetero = is_hetero(request)
    sizes = [(g.name, f"{g.instance_count} x {g.instance_type}") for g in instance_groups(request)]
    cluster = ", ".join(f"{name} ({size})" if hetero else size for name, size in sizes)
    plan = capacity_plan_lines(job, request)
    budget, refusal = budget_of(args, request)
    if args.json:
        answer: dict[str, Any] = {"valid": refusal is None, "kind": kind, "problems": []}
        if plan:
            answer["capacity_clusters"] = [line.partition(". ")[2] for line in plan]
        if refusal is not None:
            answer["problems"] = [{"loc": "--max-cost", "msg": refusal}]
        elif budget is not None:
            answer["budget"] = {
                "per_hour": budget.per_hour,
                "runtime_cap": budget.runtime_cap,
                "worst_case": budget.worst_case,
            }
        print(json.dumps(answer, indent=2))
    else:
        what = "CreateTrainingJob request, " if kind == "request" else ""
        print(f"{args.file}: valid ({what}{'heterogeneous' if hetero else 'homogeneous'} cluster: {cluster})")
        for line in job.steps.describe():  # a request's provider steps, a role name of either kind
            print(f"  before the create: {line}")
        if plan:
            print("  clusters tried when capacity is short, in order (docs/capacity.md):")
            print("\n".join(f"    {line}" for line in plan))
        if budget is not None:
            print(f"  {budget.describe(args.currency)}")
    if refusal is not None:
        if not args.json:
            print(f"{args.file}: --max-cost: {refusal}", file=sys.stderr)
        return EXIT_INVALID
    return 0


def _render(args: argparse.Namespace) -> int:
    from airflow_hetero.definition import naming

    job = _load(args)
    region = args.region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    job_name = args.job_name or naming.derived_job_name(job.base_job_name, naming.stable_hash(args.file.read_bytes()))
    request = job.build(job_name=job_name, region=region, role_arn=job.steps.role_name)  # the name stands in
    for line in job.steps.describe():  # the provider's steps run when the task does: said, not done
        print(f"before the create: {line}", file=sys.stderr)
    if args.rightsizing_history is not None:
        request = rightsized_request(args, job, request)
    plan = capacity_plan_lines(job, request)
    if plan:
        print("clusters tried when capacity is short, in order (docs/capacity.md):", file=sys.stderr)
        print("\n".join(f"  {line}" for line in plan), file=sys.stderr)
    budget, refusal = budget_of(args, request)
    if refusal is not None:
        print(f"{args.file}: --max-cost: {refusal}", file=sys.stderr)
        return EXIT_INVALID
    if budget is not None:
        from airflow_hetero.job.budget import capped_request

        print(budget.describe(args.currency), file=sys.stderr)
        request = capped_request(request, budget)  # what the operator sends
    print(json.dumps(request, indent=2, sort_keys=True))
    return 0


def rightsized_request(args: argparse.Namespace, job: Submittable, request: dict[str, Any]) -> dict[str, Any]:
    """``request`` with the counts the next run would use (``--rightsizing-history``, apply mode), the decision
    printed on stderr; a bad file or policy: JobDefinitionError naming the option."""
    from airflow_hetero.definition.errors import Problem
    from airflow_hetero.definition.rightsizing import GroupFacts, RightSizing, RightSizingError, check_policy
    from airflow_hetero.job.resource_config import instance_groups
    from airflow_hetero.job.rightsizing import decide_again

    try:
        state = json.loads(args.rightsizing_history.read_text())
        if not isinstance(state, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as err:
        problem = Problem("--rightsizing-history", f"cannot read {args.rightsizing_history}: {err}")
        raise JobDefinitionError([problem]) from None
    try:
        given = json.loads(args.rightsizing) if args.rightsizing else state.get("policy")
        policy = RightSizing.of(given if isinstance(given, dict) else {})
        fallbacks = job.fallbacks
        groups = {
            g.name: GroupFacts(g.instance_type or "", g.instance_count, tuple(t for t, _ in fallbacks.get(g.name, [])))
            for g in instance_groups(request)
        }
        check_policy(policy, groups)
    except (ValueError, RightSizingError) as err:
        raise JobDefinitionError([Problem("--rightsizing", str(err))]) from None
    written = {n: g.instance_count for n, g in groups.items()}
    kinds = {n: g.instance_type for n, g in groups.items()}
    decision = decide_again(state, policy, written, max_cost=args.max_cost, written_types=kinds)
    print("\n".join(decision.lines()), file=sys.stderr)
    uses = (
        f"{g}={n}" + (f" x {decision.types[g]}" if decision.types.get(g, kinds[g]) != kinds[g] else "")
        for g, n in decision.counts.items()
    )
    print(f"the next run uses: {', '.join(uses)}", file=sys.stderr)
    for group in request.get("ResourceConfig", {}).get("InstanceGroups", []):
        group["InstanceCount"] = decision.counts.get(group["InstanceGroupName"], group["InstanceCount"])
        group["InstanceType"] = decision.types.get(group["InstanceGroupName"], group["InstanceType"])
    return request


def cli_prices(args: argparse.Namespace, types: Sequence[str]) -> tuple[dict[str, Price], PriceSettings]:
    """The prices of ``types`` per ``--price``, ``--currency`` and ``--no-pricing-api``: the overrides, then the
    Price List Query API (boto3's credentials, ``--endpoint-url``), asked only for the types no override gives.
    A bad ``--price`` or ``--currency``: JobDefinitionError naming the option."""
    from airflow_hetero.definition.errors import Problem
    from airflow_hetero.pricing.lookup import training_prices
    from airflow_hetero.pricing.settings import PriceSettings

    try:
        settings = PriceSettings.of(parse_prices(args.price), args.currency, not args.no_pricing_api)
    except ValueError as err:
        raise JobDefinitionError([Problem("--price", str(err))]) from None
    region = args.price_region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    client = None
    if settings.use_api and any(t not in settings.overrides for t in types):
        import boto3

        from airflow_hetero.pricing.price_list import pricing_api_region

        client = boto3.session.Session().client(
            "pricing", region_name=pricing_api_region(region), endpoint_url=args.endpoint_url
        )
    return training_prices(types, region, settings, client=client), settings


def budget_of(args: argparse.Namespace, request: dict[str, Any]) -> tuple[BudgetPlan | None, str | None]:
    """What the operator's budget (``--max-cost``) does to ``request``: its plan, or why it refuses."""
    from airflow_hetero.job.budget import BudgetError, instance_types_of, plan_request_budget
    from airflow_hetero.pricing.settings import price_sources

    if args.max_cost is None:
        return None, None
    prices, settings = cli_prices(args, instance_types_of([request]))
    try:
        plan = plan_request_budget(
            request,
            [],
            {name: (price.per_hour, price.reason) for name, price in prices.items()},
            max_cost=args.max_cost,
            sources=price_sources(settings.overrides, settings.use_api, "--no-pricing-api"),
            min_runtime=args.min_runtime,
            currency=settings.currency,
        )
    except BudgetError as err:
        return None, f"budget refuses: {err}"
    return plan, None


def _cost(args: argparse.Namespace) -> int:
    """Each group's price per hour, the cluster's, the worst case at its MaxRuntime (and with ``--max-cost``,
    at the budget's cap)."""
    from airflow_hetero.amounts import format_amount
    from airflow_hetero.job.budget import hourly_rate, requested_runtime
    from airflow_hetero.job.resource_config import instance_groups
    from airflow_hetero.sagemaker_facts import STOP_SIGNAL_WINDOW_SECONDS

    job = _load(args)
    request = job.build(job_name="cost", region="us-east-1", role_arn=job.steps.role_name)
    groups = instance_groups(request)
    prices, settings = cli_prices(args, [g.instance_type or "" for g in groups])
    currency = settings.currency
    print(f"{args.file}: on-demand prices in {currency} per hour (on-demand even for spot)")
    width = max(len(g.name) for g in groups)
    for group in groups:
        price = prices[group.instance_type or ""]
        if price.per_hour is None:
            print(f"  {group.name:<{width}}  {group.instance_count} x {group.instance_type}: no price: {price.reason}")
            continue
        each = f"{format_amount(price.per_hour)} each ({price.source or 'price list'})"
        total = format_amount(group.instance_count * price.per_hour)
        print(f"  {group.name:<{width}}  {group.instance_count} x {group.instance_type}: {total}/hour, {each}")
    if any(prices[g.instance_type or ""].per_hour is None for g in groups):
        print("  worst case unknown: a budget never guesses a price (give --price TYPE=PRICE)", file=sys.stderr)
        return EXIT_INVALID
    rate = hourly_rate(groups, {name: price.per_hour for name, price in prices.items()})
    runtime = requested_runtime(request)
    worst = rate * (runtime + STOP_SIGNAL_WINDOW_SECONDS) / 3600
    print(f"  cluster: {format_amount(rate)} {currency}/hour")
    window = f"{STOP_SIGNAL_WINDOW_SECONDS} s stop window"
    print(f"  worst case: {format_amount(worst)} {currency} (MaxRuntimeInSeconds {runtime} + {window})")
    plan, refusal = budget_of(args, request)
    if refusal is not None:
        print(f"  {refusal}", file=sys.stderr)
        return EXIT_INVALID
    if plan is not None:
        print(f"  {plan.describe(currency)}")
    return 0


def _instance_types(args: argparse.Namespace) -> int:
    from airflow_hetero.definition.facts.instance_types import training_instance_types

    for name in sorted(training_instance_types()):
        print(name)
    return 0


def _add_summarize(sub: Any) -> None:
    summarize = sub.add_parser(
        "summarize",
        help="print a training job's per-group summary, cost and verdict",
        description="Read a training job's description, log streams and instance metrics and print the "
        "per-group table and the verdict HeteroLogSummaryOperator logs. Uses boto3's own credentials.",
    )
    summarize.add_argument("job_name", metavar="JOB_NAME", help="the training job")
    summarize.add_argument("--region", help="AWS region (default: boto3's, e.g. $AWS_DEFAULT_REGION)")
    summarize.add_argument("--endpoint-url", help="one endpoint for every service (e.g. the offline endpoint)")
    _add_price_options(summarize)
    summarize.add_argument("--no-metrics", action="store_true", help="skip CloudWatch instance metrics")
    summarize.add_argument("--tail-lines", type=int, default=20, help="last log lines kept per group (default 20)")
    summarize.add_argument("--json", action="store_true", help="print the whole summary as JSON instead")
    summarize.set_defaults(handler=_summarize)


def parse_prices(pairs: Sequence[str]) -> dict[str, float]:
    """``["ml.p4d.24xlarge=37.69", ...]`` -> the ``prices`` mapping (checked by :class:`PriceSettings`);
    ValueError naming a pair that is not ``TYPE=PRICE``."""
    given: dict[str, float] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        try:
            number = float(value) if sep else None
        except ValueError:
            number = None
        if number is None:
            raise ValueError(f"--price {pair!r}: expected TYPE=PRICE, e.g. ml.p4d.24xlarge=37.69")
        given[name.strip()] = number  # a negative or infinite price: PriceSettings.of says why
    return given


def _summarize(args: argparse.Namespace) -> int:
    from airflow_hetero.pricing.settings import PriceSettings

    try:
        settings = PriceSettings.of(parse_prices(args.price), args.currency, not args.no_pricing_api)
    except ValueError as err:
        print(f"airflow-hetero summarize: {err}", file=sys.stderr)
        return EXIT_INVALID
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from airflow_hetero.logs.per_group import CostSpec
    from airflow_hetero.logs.report import format_report
    from airflow_hetero.logs.summarize import summarize_training_job
    from airflow_hetero.pricing.lookup import training_prices
    from airflow_hetero.pricing.price_list import pricing_api_region

    session = boto3.session.Session(region_name=args.region)
    region = session.region_name
    if not region:
        print("airflow-hetero summarize: no AWS region: give --region or set AWS_DEFAULT_REGION", file=sys.stderr)
        return EXIT_INVALID

    def client(service: str, region_name: str = region) -> Any:
        return session.client(service, region_name=region_name, endpoint_url=args.endpoint_url)

    pricing = client("pricing", pricing_api_region(region)) if settings.use_api else None
    try:
        summary = summarize_training_job(
            args.job_name,
            logs_client=client("logs"),
            cloudwatch_client=None if args.no_metrics else client("cloudwatch"),
            sagemaker_client=client("sagemaker"),
            include_metrics=not args.no_metrics,
            tail_lines=args.tail_lines,
            cost=CostSpec(lambda types: training_prices(types, region, settings, client=pricing), settings.currency),
        )
    except (ClientError, BotoCoreError) as err:
        print(f"airflow-hetero summarize: {args.job_name}: {err}", file=sys.stderr)
        return EXIT_AWS_ERROR
    except ValueError as err:  # e.g. --tail-lines out of range, checked before any log is read
        print(f"airflow-hetero summarize: {err}", file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return 0
    print(format_report(summary))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
