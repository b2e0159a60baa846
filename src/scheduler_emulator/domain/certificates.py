"""What a ClientCertificate authentication's pfx (PKCS#12) says about itself."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.serialization import pkcs12

from scheduler_emulator.domain.errors import FieldError


@dataclass(frozen=True)
class CertificateInfo:
    thumbprint: str  # SHA-1 of the DER certificate, upper-case hex, as Windows shows it
    subject_name: str  # e.g. "CN=Scheduler Mgmt"
    expiration: datetime


def read_pfx(pfx_base64: str, password: str | None, path: str) -> CertificateInfo:
    """Open the base64 pfx with its password; FieldError at ``path`` when it will not open."""
    try:
        data = base64.b64decode(pfx_base64, validate=True)
    except (binascii.Error, ValueError):
        raise FieldError(f"{path}.pfx", "is not base64-encoded PKCS#12 (pfx) data") from None
    try:
        _key, certificate, _chain = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError:
        raise FieldError(
            f"{path}.pfx", "could not be opened: the data is not PKCS#12 or the password is wrong"
        ) from None
    if certificate is None or _key is None:
        raise FieldError(f"{path}.pfx", "must contain a certificate and its private key")
    return CertificateInfo(
        thumbprint=certificate.fingerprint(hashes.SHA1()).hex().upper(),  # noqa: S303 - Windows thumbprint
        subject_name=certificate.subject.rfc4514_string(),
        expiration=certificate.not_valid_after_utc.astimezone(UTC),
    )
