"""Inside a host: the job's host names (``algo-1``, ...) resolve to the hosts' loopback addresses.

SageMaker's hosts find each other by name through the container network's DNS. Locally there is no
such DNS, and changing ``/etc/hosts`` needs root. What a normal user can change is the Python that
runs in each host: the endpoint copies this file as ``sitecustomize.py`` into a directory it puts
first on the host's ``PYTHONPATH``, so Python imports it at start-up in every host process
(and in every Python child process they start). It wraps the resolver functions of the
``socket`` module, which everything in Python resolves through (``socket.create_connection``,
``http.client``, ``urllib3``/``requests``, ``asyncio``, ``multiprocessing``), so that:

* ``getaddrinfo``, ``gethostbyname``, ``gethostbyname_ex`` map each name of
  ``AIRFLOW_HETERO_HOST_ADDRESSES`` (``{"algo-1": "127.0.3.1", ...}``) to its address;
* ``gethostbyaddr`` maps those addresses back to their names;
* ``gethostname`` answers the host's own name (``SM_CURRENT_HOST``), as inside a SageMaker container.

Programs that resolve outside Python's ``socket`` module (C++ code such as torch's TCPStore, or
``mpirun``) do not see these names: the launcher variables (``MASTER_ADDR``) carry addresses for
them. Stdlib only, and it imports nothing of the package: it runs before anything else in a host.
Another ``sitecustomize`` further along ``sys.path`` still runs after this one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
from typing import Any

#: sagemaker_facts.HOST_ADDRESSES_ENV: this file runs inside host processes and imports nothing of the
#: package, so it keeps its own copy (tests/package/test_sagemaker_facts.py pins the two equal).
ADDRESSES_ENV = "AIRFLOW_HETERO_HOST_ADDRESSES"
CURRENT_HOST_ENV = "SM_CURRENT_HOST"


def _key(host: Any) -> str | None:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    return host.lower().rstrip(".") if isinstance(host, str) else None


def install(environ: dict[str, str] | None = None) -> bool:
    """Wrap the ``socket`` resolver functions for the hosts named in ``environ``; False when none are."""
    environ = dict(os.environ) if environ is None else environ
    try:
        table = {str(k).lower(): str(v) for k, v in json.loads(environ.get(ADDRESSES_ENV) or "{}").items()}
    except ValueError:
        return False
    if not table or getattr(socket, "_airflow_hetero_hosts", None) == table:
        return False
    names = {address: name for name, address in table.items()}
    current = environ.get(CURRENT_HOST_ENV)
    getaddrinfo, gethostbyname, gethostbyname_ex = socket.getaddrinfo, socket.gethostbyname, socket.gethostbyname_ex
    gethostbyaddr, gethostname = socket.gethostbyaddr, socket.gethostname

    def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        return getaddrinfo(table.get(_key(host) or "", host), *args, **kwargs)

    def _gethostbyname(host: str) -> str:
        return table.get(_key(host) or "") or gethostbyname(host)

    def _gethostbyname_ex(host: str) -> tuple[str, list[str], list[str]]:
        address = table.get(_key(host) or "")
        return (str(_key(host)), [], [address]) if address else gethostbyname_ex(host)

    def _gethostbyaddr(address: str) -> tuple[str, list[str], list[str]]:
        name = names.get(address) or names.get(table.get(_key(address) or "", ""))
        return (name, [], [table[name]]) if name else gethostbyaddr(address)

    socket.getaddrinfo = _getaddrinfo
    socket.gethostbyname = _gethostbyname
    socket.gethostbyname_ex = _gethostbyname_ex
    socket.gethostbyaddr = _gethostbyaddr
    if current:
        socket.gethostname = lambda: current
    else:
        socket.gethostname = gethostname
    socket._airflow_hetero_hosts = table  # type: ignore[attr-defined]
    return True


def _chain_next_sitecustomize() -> None:
    """Run the ``sitecustomize`` this one shadows (the next one on ``sys.path``), if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = None
    for entry in rest:
        candidate = os.path.join(entry or os.curdir, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_next_sitecustomize", candidate)
            break
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if __name__ == "sitecustomize":  # imported at start-up from a host's PYTHONPATH
    install()
    _chain_next_sitecustomize()
