"""A trust store of one certificate for the suite: Langflow's model clients load it in 0.5 ms instead of 36.

Langflow builds two HTTP clients (httpx) for each model it builds, twice a run for the stock Agent,
and each client loads every CA certificate the machine trusts (about 36 ms of CPU). Every server the
suite talks to is plain HTTP on loopback, so no certificate is ever checked: like the fast password
hasher a web framework's tests use, this only takes out work the tests never use. ``SSL_CERT_FILE``
is read by httpx and by Python's ``ssl`` in this process and in every Langflow it starts.
"""

import os
import tempfile
from pathlib import Path

import certifi

BEGIN, END = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"


def use_one_certificate() -> None:
    """Point ``SSL_CERT_FILE`` at the first root of certifi's bundle, in place of the machine's (a proxy's CA
    included: no test makes a TLS connection), except where the tests reach PyPI (``make test-install``'s pip and
    uv check its certificate)."""
    if os.environ.get("SESSION_MEMORY_INSTALL_TESTS"):
        return
    bundle = Path(certifi.where()).read_text()
    first = bundle[bundle.index(BEGIN) : bundle.index(END) + len(END)] + "\n"
    path = Path(tempfile.gettempdir()) / f"langflow-session-memory-tests-{os.getuid()}.pem"
    if not path.exists() or path.read_text() != first:
        written = path.with_suffix(f".{os.getpid()}")
        written.write_text(first)
        written.replace(path)  # atomic: the other pytest worker may be reading it
    os.environ["SSL_CERT_FILE"] = str(path)
