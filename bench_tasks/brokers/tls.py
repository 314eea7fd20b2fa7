"""Throw-away TLS material for brokers started on this host: a CA and a server certificate it signs.

Made with the `cryptography` package (no `keytool`/`openssl` runs, no files outside the broker's own folder) and
written as PEM, which Kafka (`ssl.keystore.type=PEM`, KIP-651), nats-server and both clients read directly. The
server certificate names `localhost` and 127.0.0.1, so clients verify the host name as they would in production.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_VALID_FOR = dt.timedelta(days=2)


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path  # what clients trust
    server_cert: Path  # the server's certificate alone
    server_key: Path  # its private key alone (PKCS#8, unencrypted, mode 0600)
    server_pem: Path  # key + certificate in one file: Kafka's PEM keystore


def make_tls(folder: Path, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> TlsFiles:
    """A fresh CA and a server certificate for `hosts` (DNS names or IP addresses), written into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sixnines test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALID_FOR)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    cert_pem = cert.public_bytes(pem)
    files = TlsFiles(folder / "ca.pem", folder / "server-cert.pem", folder / "server-key.pem", folder / "server.pem")
    files.ca_cert.write_bytes(ca_cert.public_bytes(pem))
    files.server_cert.write_bytes(cert_pem)
    for path, data in ((files.server_key, key_pem), (files.server_pem, key_pem + cert_pem)):
        path.touch(mode=0o600)
        path.write_bytes(data)
    return files
