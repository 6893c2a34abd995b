"""Deep Learning Container image URIs for PyTorch and TensorFlow training, as the SDK picks them.

The catalogue (``data/dlc_training_images.json``) is generated from the SageMaker Python
SDK's own ``image_uri_config`` by ``tools/gen_dlc_images.py``; tests compare the URIs
built here with what the SDK's ``image_uris.retrieve`` returned.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from airflow_hetero.definition.facts import instance_types


class ImageLookupError(ValueError):
    """No Deep Learning Container matches the framework, version, Python or region."""


@functools.cache
def catalogue() -> dict[str, Any]:
    """The generated catalogue (loaded once, only when an image is needed)."""
    text = resources.files("airflow_hetero.definition").joinpath("data/dlc_training_images.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def resolve_version(framework: str, version: str) -> dict[str, Any]:
    """The catalogue entry for ``version`` (aliases such as ``1.12`` -> ``1.12.1`` resolved)."""
    config = catalogue()["frameworks"][framework]
    full = config["version_aliases"].get(version, version)
    entry = config["versions"].get(full)
    if entry is None:
        known = sorted(set(config["versions"]) | set(config["version_aliases"]), key=_version_key)
        raise ImageLookupError(
            f"no {framework} training image for framework_version '{version}' "
            f"(known: {', '.join(known)}); give image_uri for other versions"
        )
    return dict(entry)


def check_py_version(framework: str, version: str, py_version: str) -> None:
    """Raise :class:`ImageLookupError` when the image does not exist for ``py_version``."""
    entry = resolve_version(framework, version)
    allowed = entry.get("py_versions") or []
    if allowed and py_version not in allowed:
        raise ImageLookupError(
            f"{framework} {version} training images exist for {', '.join(allowed)}, not '{py_version}'"
        )


def training_image_uri(framework: str, version: str, py_version: str, region: str, instance_type: str) -> str:
    """``<account>.dkr.ecr.<region>.<domain>/<repo>:<version>-<cpu|gpu>-<py>`` as the SDK builds it."""
    entry = resolve_version(framework, version)
    check_py_version(framework, version, py_version)
    registry = entry["registries"].get(region)
    hostname = catalogue()["hostnames"].get(region)
    if registry is None or hostname is None:
        raise ImageLookupError(
            f"no {framework} {version} training image is published in region '{region}'; give image_uri"
        )
    processor = "gpu" if instance_types.is_gpu(instance_type) else "cpu"
    if processor not in entry["processors"]:
        raise ImageLookupError(f"{framework} {version} has no {processor} training image; give image_uri")
    parts = [entry.get("tag_prefix", version), processor, py_version]
    container = entry.get("container_version")
    if container:
        parts.append(container[processor])
    return f"{registry}.dkr.{hostname}/{entry['repository']}:{'-'.join(parts)}"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))
