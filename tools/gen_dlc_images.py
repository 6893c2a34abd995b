"""Regenerate the Deep Learning Container catalogue from the SageMaker Python SDK v2.

Run with an interpreter that has the SDK (it is not a dependency of this package):

    python3 -m venv /tmp/sdkvenv && /tmp/sdkvenv/bin/pip install 'sagemaker==2.257.7'
    /tmp/sdkvenv/bin/python tools/gen_dlc_images.py

Writes ``airflow_hetero/definition/data/dlc_training_images.json`` (the training-image part of the
SDK's ``image_uri_config`` for PyTorch and TensorFlow, plus ECR hostnames per region) and
``tests/data/dlc_image_samples.json`` (URIs the SDK's ``image_uris.retrieve`` returns, which
the tests compare ``airflow_hetero.definition.facts.images`` against).
"""

from __future__ import annotations

import json
from pathlib import Path

import sagemaker
from sagemaker import image_uris, utils

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = ("pytorch", "tensorflow")
SAMPLE_REGIONS = ("us-west-2", "eu-west-1", "cn-north-1", "us-gov-west-1", "af-south-1", "il-central-1")
INSTANCE_TYPES = {"cpu": "ml.c5.xlarge", "gpu": "ml.p3.2xlarge"}


def read_catalogue() -> tuple[dict, set[str]]:
    """The SDK's training-image configuration for each framework, and the regions it names."""
    catalogue: dict = {"sdk_version": sagemaker.__version__, "frameworks": {}, "hostnames": {}}
    regions: set[str] = set()
    for framework in FRAMEWORKS:
        config = image_uris.config_for_framework(framework)["training"]
        versions = {}
        for version, entry in config["versions"].items():
            if "registries" not in entry or "neuron" in entry.get("repository", ""):
                continue  # per-Python-version layouts (TF 1.13) and Neuron images: give image_uri
            keep = {k: entry[k] for k in ("py_versions", "repository", "container_version", "tag_prefix") if k in entry}
            keep["processors"] = entry.get("processors") or config.get("processors")
            keep["registries"] = entry["registries"]
            regions.update(entry["registries"])
            versions[version] = keep
        catalogue["frameworks"][framework] = {
            "version_aliases": config.get("version_aliases", {}),
            "versions": versions,
        }
    resolver = utils._botocore_resolver()
    for region in sorted(regions):
        data = resolver.construct_endpoint("ecr", region)
        if region == "il-central-1" and not data:
            data = {"hostname": f"ecr.{region}.amazonaws.com"}
        if data:
            catalogue["hostnames"][region] = data["hostname"]
    return catalogue, regions


def sample(framework: str, version: str, py: str | None, processor: str, region: str) -> dict:
    """One URI as the SDK's ``image_uris.retrieve`` gives it (or the error it raises)."""
    try:
        uri = image_uris.retrieve(
            framework,
            region,
            version=version,
            py_version=py,
            instance_type=INSTANCE_TYPES[processor],
            image_scope="training",
        )
    except ValueError as err:
        uri = f"ERROR: {err}"
    return {
        "framework": framework,
        "version": version,
        "py_version": py,
        "instance_type": INSTANCE_TYPES[processor],
        "region": region,
        "uri": uri,
    }


def read_samples(catalogue: dict) -> list[dict]:
    """Every version, alias, Python version and processor of the catalogue, in the sample regions."""
    samples = []
    for framework in FRAMEWORKS:
        fw = catalogue["frameworks"][framework]
        for version in list(fw["versions"]) + list(fw["version_aliases"]):
            entry = fw["versions"].get(fw["version_aliases"].get(version, version))
            if entry is None:
                continue
            for py in entry.get("py_versions") or [None]:
                for processor in (p for p in entry["processors"] if p in INSTANCE_TYPES):
                    samples.extend(
                        sample(framework, version, py, processor, region)
                        for region in SAMPLE_REGIONS
                        if region in entry["registries"]
                    )
    return samples


def main() -> None:
    catalogue, regions = read_catalogue()
    out = ROOT / "airflow_hetero" / "definition" / "data" / "dlc_training_images.json"
    out.write_text(json.dumps(catalogue, indent=1, sort_keys=True) + "\n")
    samples = read_samples(catalogue)
    (ROOT / "tests" / "data" / "dlc_image_samples.json").write_text(json.dumps(samples, indent=1) + "\n")
    print(f"{len(samples)} samples, {len(regions)} regions, SDK {sagemaker.__version__}")


if __name__ == "__main__":
    main()
