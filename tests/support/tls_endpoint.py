"""A moto server behind HTTPS with a self-signed certificate, reachable only through an HTTP proxy.

A deployment with a private CA and a mandatory proxy: a client reaches :attr:`TlsEndpoint.url`
only with ``verify`` set to :attr:`TlsEndpoint.ca_bundle` (the certificate is in no public trust
store) and with ``botocore_config={"proxies": {"https": proxy}}`` (the endpoint's host name is
resolved by the proxy alone; the proxy sends every CONNECT to this server).
"""

from __future__ import annotations

import datetime
import ipaddress
import select
import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

#: A name no resolver knows (RFC 2606's .test): only the proxy takes it somewhere.
HOST = "sagemaker.hetero.test"
#: Seconds a proxied connection may stay silent: reading the CONNECT header, connecting upstream, and
#: between the bytes of the tunnel (a client that sends nothing cannot hold a proxy thread forever).
IDLE_TIMEOUT = 30.0


def write_self_signed(folder: Path) -> tuple[Path, Path]:
    """(certificate, key) for :data:`HOST`, self-signed: the certificate is its own CA bundle."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "airflow-hetero test CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(HOST), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "ca.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@dataclass
class TlsEndpoint:
    url: str
    ca_bundle: Path
    proxy: str
    #: Targets of the CONNECT requests the proxy served.
    tunnels: list[str] = field(default_factory=list)


class _Proxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, target: tuple[str, int], tunnels: list[str]) -> None:
        super().__init__(("127.0.0.1", 0), _Tunnel)
        self.target = target
        self.tunnels = tunnels


class _Tunnel(socketserver.StreamRequestHandler):
    """One CONNECT: answer 200, then copy bytes both ways until either side closes."""

    server: _Proxy
    rbufsize = 0  # unbuffered: no byte of the handshake is read ahead with the header
    timeout = IDLE_TIMEOUT  # set on the connection by setup(): every read of it below is bounded

    def handle(self) -> None:
        line = self.rfile.readline().decode("latin-1")  # deadline: the socket's timeout (IDLE_TIMEOUT)
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # deadline: the socket's timeout
            pass
        method, _, rest = line.partition(" ")
        if method != "CONNECT":
            self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        self.server.tunnels.append(rest.split(" ")[0])
        upstream = socket.create_connection(self.server.target, timeout=IDLE_TIMEOUT)
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.wfile.flush()
        client = self.connection
        with upstream:
            while True:
                ready, _, _ = select.select([client, upstream], [], [], IDLE_TIMEOUT)
                if not ready:
                    return
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    (upstream if sock is client else client).sendall(data)


@contextmanager
def tls_moto_endpoint(folder: Path) -> Iterator[TlsEndpoint]:
    """A moto server on HTTPS (the process-wide moto state) and a CONNECT proxy in front of it."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    cert, key = write_self_signed(folder)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler, ssl_context=context)
    tunnels: list[str] = []
    proxy = _Proxy(("127.0.0.1", server.server_port), tunnels)
    # a short poll: shutdown() waits for serve_forever to notice (0.5 s by default)
    threads = [threading.Thread(target=s.serve_forever, args=(0.05,), daemon=True) for s in (server, proxy)]
    for thread in threads:
        thread.start()
    try:
        yield TlsEndpoint(
            url=f"https://{HOST}:{server.server_port}",
            ca_bundle=cert,
            proxy=f"http://127.0.0.1:{proxy.server_address[1]}",
            tunnels=tunnels,
        )
    finally:
        for s in (server, proxy):
            s.shutdown()
            s.server_close()
        for thread in threads:
            thread.join(timeout=10)
