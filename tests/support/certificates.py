"""Self-signed certificates for the tests' TLS peers, operator certificates and ClientCertificate pfx."""

from __future__ import annotations

import base64
import ipaddress
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def self_signed(
    common_name: str,
    *,
    not_before: datetime | None = None,
    not_after: datetime | None = None,
    dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = (),
    ca: bool = False,
    rsa_key: bool = False,
) -> tuple[PrivateKey, x509.Certificate]:
    """A key (P-256, or RSA 2048) and a certificate for ``CN=common_name`` signed by itself; valid from a
    minute ago for a day unless told, with the given subject alternative names and CA flag."""
    key: PrivateKey = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if rsa_key
        else ec.generate_private_key(ec.SECP256R1())
    )
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - timedelta(minutes=1))
        .not_valid_after(not_after or now + timedelta(days=1))
    )
    alt_names: list[x509.GeneralName] = [x509.DNSName(dns) for dns in dns_names]
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    return key, builder.sign(key, hashes.SHA256())


def pem(certificate: x509.Certificate) -> bytes:
    """The certificate as PEM."""
    return certificate.public_bytes(serialization.Encoding.PEM)


def key_pem(key: PrivateKey) -> bytes:
    """The private key as unencrypted PKCS#8 PEM."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def write_pem_files(directory: Path, stem: str, key: PrivateKey, certificate: x509.Certificate) -> tuple[Path, Path]:
    """``(<stem>-cert.pem, <stem>-key.pem)`` written in ``directory``."""
    cert_path, key_path = directory / f"{stem}-cert.pem", directory / f"{stem}-key.pem"
    cert_path.write_bytes(pem(certificate))
    key_path.write_bytes(key_pem(key))
    return cert_path, key_path


def pfx(key: PrivateKey, certificate: x509.Certificate, password: str, friendly_name: bytes = b"client") -> str:
    """Key and certificate as a password-protected PKCS#12 (pfx), base64-encoded as a job carries it."""
    data = pkcs12.serialize_key_and_certificates(
        friendly_name, key, certificate, None, serialization.BestAvailableEncryption(password.encode())
    )
    return base64.b64encode(data).decode()


def thumbprint(certificate: x509.Certificate) -> str:
    """The certificate's SHA-1 thumbprint as Windows (and the API) spells it."""
    return certificate.fingerprint(hashes.SHA1()).hex().upper()  # noqa: S324 - what a thumbprint is
