"""Throw-away TLS material for brokers started on this host: a CA and a server certificate it signs.

Made with the `cryptography` package (no `keytool`/`openssl` runs, no files outside the broker's own folder) and
written as PEM, which Kafka (`ssl.keystore.type=PEM`, KIP-651), nats-server and both clients read directly. The
server certificate names `localhost` and 127.0.0.1, so clients verify the host name as they would in production.

The docker-compose deployment makes its brokers' long-lived material with the same code (`sixnines brokers certs`,
run at every start by its `broker-certs` service into a named volume): `ensure_tls` keeps what a previous start
made while it still fits.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ..errors import BrokerError
from ..secrecy import write_secret

_VALID_FOR = dt.timedelta(days=2)
_RENEW_BEFORE = dt.timedelta(days=7)


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path  # what clients trust
    server_cert: Path  # the server's certificate alone
    server_key: Path  # its private key alone (PKCS#8, unencrypted, mode 0600)
    server_pem: Path  # key + certificate in one file: Kafka's PEM keystore


def make_tls(
    folder: Path,
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
    valid_for: dt.timedelta = _VALID_FOR,
    key_mode: int = 0o600,
) -> TlsFiles:
    """A fresh CA and a server certificate for `hosts` (DNS names or IP addresses), written into `folder`.

    `valid_for` is short by default (brokers the harness starts live minutes); `key_mode` loosens the private
    key files only where brokers running as another user must read them (the compose volume)."""
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
        .not_valid_after(now + valid_for)
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
        .not_valid_after(now + valid_for)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    cert_pem = cert.public_bytes(pem)
    files = tls_files(folder)
    files.ca_cert.write_bytes(ca_cert.public_bytes(pem))
    files.server_cert.write_bytes(cert_pem)
    for path, data in ((files.server_key, key_pem), (files.server_pem, key_pem + cert_pem)):
        write_secret(path, data, key_mode)
    return files


def tls_files(folder: Path) -> TlsFiles:
    """Where `make_tls` writes (and `ensure_tls` looks for) the material in `folder`."""
    return TlsFiles(folder / "ca.pem", folder / "server-cert.pem", folder / "server-key.pem", folder / "server.pem")


def tls_problem(folder: Path, hosts: tuple[str, ...], now: dt.datetime | None = None) -> str | None:
    """Why the material in `folder` cannot serve `hosts` for another week (None: it can): a file missing, a
    host not among the certificate's names, expiry within `_RENEW_BEFORE`, or a certificate its CA did not sign."""
    files = tls_files(folder)
    missing = [p.name for p in (files.ca_cert, files.server_cert, files.server_key, files.server_pem) if not p.exists()]
    if missing:
        return f"missing {', '.join(missing)}"
    cert = x509.load_pem_x509_certificate(files.server_cert.read_bytes())
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return f"{files.server_cert.name} is not signed by {files.ca_cert.name}"
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    have = {str(n) for n in names.get_values_for_type(x509.DNSName)}
    have |= {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    absent = [h for h in hosts if _canonical(h) not in have]
    if absent:
        return f"{files.server_cert.name} does not name {', '.join(absent)} (it names {', '.join(sorted(have))})"
    now = now or dt.datetime.now(dt.UTC)
    if cert.not_valid_after_utc - now < _RENEW_BEFORE:
        return f"{files.server_cert.name} expires {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
    return None


def _canonical(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def ensure_tls(folder: Path, hosts: tuple[str, ...], valid_for: dt.timedelta, key_mode: int = 0o600) -> bool:
    """Make the material in `folder` unless a previous start made some; True if made now. Material that exists
    but no longer fits (`tls_problem`) is an error, not silently replaced: brokers still running would keep
    serving the old certificate while clients trusted the new CA."""
    files = tls_files(folder)
    if not any(p.exists() for p in (files.ca_cert, files.server_cert, files.server_key, files.server_pem)):
        make_tls(folder, hosts, valid_for, key_mode)
        return True
    problem = tls_problem(folder, hosts)
    if problem:
        raise TlsError(f"TLS material in {folder} cannot be used: {problem}")
    return False


class TlsError(BrokerError):
    """Existing TLS material that does not fit; the message names what is wrong."""
