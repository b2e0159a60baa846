"""Management certificates: how the classic surface authenticates (docs/classic-api.md#management-certificates).

With an auth flag on, every classic request must come over HTTPS with a client certificate whose SHA-1 thumbprint is
one of its subscription's management certificates (named by --management-certificate, or added over the Service
Management operations below); otherwise 403 ``ForbiddenError`` in RDFE's words, whatever the route. A certificate
opens its own subscription only. With no auth flag nothing is checked. The certificate reaches the app in the ASGI TLS
extension (connections.tls_extension), which the server fills when it asked for client certificates
(tls.request_client_certificates).

The operations (List/Get/Add/Delete Management Certificates, ``/{s}/certificates[/{thumbprint}]``) are
authenticated the same way: **Decision** a certificate of the subscription manages its certificates, as in Service
Management; the first comes from the flag.
"""

from __future__ import annotations

import base64
import binascii
import ssl
from datetime import datetime

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fastapi import Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from scheduler_emulator.api.classic import wire
from scheduler_emulator.api.classic.wire import ClassicError, Xml, element
from scheduler_emulator.api.context import in_read_session, in_session, now, read_body
from scheduler_emulator.config_groups import SecuritySettings
from scheduler_emulator.store import repository
from scheduler_emulator.store.models import ManagementCertificateRow
from scheduler_emulator.tls import load_certificate, thumbprint

MAX_PER_SUBSCRIPTION = 25  # Service Management's limit (Add Management Certificate, remarks)
FORBIDDEN = (
    "The server failed to authenticate the request. Verify that the certificate is valid and is associated with this "
    "subscription."
)
CONFIGURED = datetime(1970, 1, 1).isoformat() + "Z"  # the Created of a certificate named by the flag (see docs)


def forbidden() -> ClassicError:
    return ClassicError(403, "ForbiddenError", FORBIDDEN)


class ManagementCertificates:
    """The subscriptions' management certificates and the check of a request's client certificate (one per app)."""

    def __init__(self, security: SecuritySettings) -> None:
        self.enforced = security.mode != "none"
        # (subscription, lower case) → {thumbprint: DER}, from --management-certificate (read at start: a file that
        # is not a certificate stops the start)
        self.configured: dict[str, dict[str, bytes]] = {}
        for subscription, path in security.management_certificates:
            der = load_certificate(path).public_bytes(serialization.Encoding.DER)
            self.configured.setdefault(subscription.lower(), {})[thumbprint(der)] = der

    async def check(self, request: Request, subscription: str) -> None:
        """Raise the 403 unless checks are off or the request's client certificate is one of ``subscription``'s."""
        if not self.enforced:
            return
        presented = client_thumbprint(request)
        if presented is None:
            raise forbidden()
        if presented in self.configured.get(subscription.lower(), {}):
            return
        stored = await in_read_session(
            request, lambda session: repository.find_management_certificate(session, subscription, presented)
        )
        if stored is None:
            raise forbidden()


def client_thumbprint(request: Request) -> str | None:
    """The thumbprint of the certificate the client presented on this connection (None: none, or plain HTTP)."""
    tls = request.scope.get("extensions", {}).get("tls") or {}
    chain = tls.get("client_cert_chain") or []
    return thumbprint(ssl.PEM_cert_to_DER_cert(chain[0])) if chain else None


def public_key(der: bytes) -> str:
    """SubscriptionCertificatePublicKey as Service Management gave it: the key's own encoding (PKCS#1 for RSA, the
    point for EC, else SubjectPublicKeyInfo), base-64."""
    key = x509.load_der_x509_certificate(der).public_key()
    if isinstance(key, rsa.RSAPublicKey):
        raw = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.PKCS1)
    elif isinstance(key, ec.EllipticCurvePublicKey):
        raw = key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    else:
        raw = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(raw).decode()


def _render(der: bytes, created: str) -> str:
    return element(
        "SubscriptionCertificate",
        Xml(
            element("SubscriptionCertificatePublicKey", public_key(der)),
            element("SubscriptionCertificateThumbprint", thumbprint(der)),
            element("SubscriptionCertificateData", base64.b64encode(der).decode()),
            element("Created", created),
        ),
    )


def _created(row: ManagementCertificateRow) -> str:
    return row.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _authority(request: Request) -> ManagementCertificates:
    found: ManagementCertificates = request.app.state.management_certificates
    return found


async def list_all(request: Request, subscription: str) -> Response:
    """GET /{s}/certificates: the flag's certificates, then the stored ones, oldest first."""
    rows = await in_read_session(request, lambda session: repository.management_certificates(session, subscription))
    configured = _authority(request).configured.get(subscription.lower(), {})
    inner = "".join(_render(der, CONFIGURED) for der in configured.values())
    inner += "".join(_render(row.data, _created(row)) for row in rows if row.thumbprint not in configured)
    return wire.xml_response("SubscriptionCertificates", inner)


async def get(request: Request, subscription: str, wanted: str) -> Response:
    configured = _authority(request).configured.get(subscription.lower(), {})
    if wanted.upper() in configured:
        return wire.xml_response("SubscriptionCertificate", _inner(_render(configured[wanted.upper()], CONFIGURED)))
    row = await in_read_session(
        request, lambda session: repository.find_management_certificate(session, subscription, wanted)
    )
    if row is None:
        raise _missing(wanted)
    return wire.xml_response("SubscriptionCertificate", _inner(_render(row.data, _created(row))))


def _inner(rendered: str) -> str:
    """The children of a rendered SubscriptionCertificate (Get answers with it as the document's root)."""
    return rendered.removeprefix("<SubscriptionCertificate>").removesuffix("</SubscriptionCertificate>")


def _missing(wanted: str) -> ClassicError:
    shown = wanted[:64].encode("unicode_escape").decode("ascii")
    return wire.not_found(f"The management certificate '{shown}' could not be found.")


async def add(request: Request, subscription: str) -> Response:
    """POST /{s}/certificates with a SubscriptionCertificate → 200 (Service Management's status); 400 when the data
    is not a certificate or the thumbprint given is not its own, 409 when it is there already."""
    body = wire.parse_xml(await read_body(request), "SubscriptionCertificate")
    data = body.text("SubscriptionCertificateData", "SubscriptionCertificate.SubscriptionCertificateData", 64 * 1024)
    given = body.text(
        "SubscriptionCertificateThumbprint", "SubscriptionCertificate.SubscriptionCertificateThumbprint", 64
    )
    if not data:
        raise wire.bad_request("The value of 'SubscriptionCertificateData' is required: the certificate, base-64 .cer.")
    try:
        der = base64.b64decode("".join(data.split()), validate=True)
        x509.load_der_x509_certificate(der)
    except (binascii.Error, ValueError):
        raise wire.bad_request(
            "The value of 'SubscriptionCertificateData' is not a certificate: send the base-64 encoded .cer (DER)."
        ) from None
    computed = thumbprint(der)
    if given and given.upper() != computed:
        raise wire.bad_request(
            f"The value of 'SubscriptionCertificateThumbprint' is not the certificate's thumbprint ({computed})."
        )
    if computed in _authority(request).configured.get(subscription.lower(), {}):
        raise ClassicError(409, "ConflictError", f"The management certificate '{computed}' already exists.")

    def work(session: Session) -> None:
        if repository.find_management_certificate(session, subscription, computed) is not None:
            raise ClassicError(409, "ConflictError", f"The management certificate '{computed}' already exists.")
        if len(repository.management_certificates(session, subscription)) >= MAX_PER_SUBSCRIPTION:
            raise wire.bad_request(f"A subscription can have at most {MAX_PER_SUBSCRIPTION} management certificates.")
        row = ManagementCertificateRow(
            subscription_key=subscription, thumbprint=computed, data=der, created_at=now(request)
        )
        repository.add_management_certificate(session, row)

    await in_session(request, work)
    return Response(status_code=200)


async def delete(request: Request, subscription: str, wanted: str) -> Response:
    """DELETE /{s}/certificates/{thumbprint} → 200; 404 when unknown; 409 for one named by the flag (remove the
    flag instead)."""
    if wanted.upper() in _authority(request).configured.get(subscription.lower(), {}):
        raise ClassicError(
            409,
            "ConflictError",
            f"The management certificate '{wanted.upper()}' is configured with --management-certificate: remove it "
            "there.",
        )

    def work(session: Session) -> bool:
        row = repository.find_management_certificate(session, subscription, wanted)
        if row is None:
            return False
        repository.delete_management_certificate(session, row)
        return True

    if not await in_session(request, work):
        raise _missing(wanted)
    return Response(status_code=200)
