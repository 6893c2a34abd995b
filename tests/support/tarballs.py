"""Reading the code tarballs the package builds (``sourcedir.tar.gz``)."""

from __future__ import annotations

import io
import tarfile


def members(blob: bytes) -> dict[str, bytes]:
    """The files of a gzipped tarball, by archive name."""
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
