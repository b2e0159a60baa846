"""``templateLink`` and ``parametersLink`` (docs/reference/front-door.md#deployments): fetched before the preflight,
through the outbound policy that governs jobs' HTTP actions (a link cannot reach what a job may not), with a time and
size limit; the fetched content replaces the link in the deployment body."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import aiohttp
from fastapi import Request

from scheduler_emulator.api import errors
from scheduler_emulator.api.context import parse_json_object
from scheduler_emulator.dispatcher.actions.outbound import PolicyResolver, literal_refusal
from scheduler_emulator.templates.jsonc import UnclosedComment, to_strict_json

MAX_LINKED_BYTES = 4 * 1024 * 1024  # ARM's limit on a template
FETCH_SECONDS = 10.0


async def with_linked_content(request: Request, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its ``templateLink``/``parametersLink`` replaced by what they point at."""
    properties = body.get("properties")
    if not isinstance(properties, dict):
        return body
    for link_key, content_key in (("templateLink", "template"), ("parametersLink", "parameters")):
        if link_key not in properties:
            continue
        target = f"properties.{link_key}"
        if content_key in properties and properties[content_key] is not None:
            raise errors.ArmError(
                400, "InvalidTemplate", f"Give either properties.{content_key} or {target}, not both.", target
            )
        link = properties[link_key]
        uri = link.get("uri") if isinstance(link, dict) else None
        if not isinstance(uri, str) or not uri.lower().startswith(("http://", "https://")):
            raise errors.invalid_field(f"{target}.uri", "must be an http or https URI")
        content = await _fetch_json(request, uri, target)
        if content_key == "parameters" and isinstance(content.get("parameters"), dict):
            content = content["parameters"]  # a parameters file: {$schema, contentVersion, parameters}
        properties = {**{k: v for k, v in properties.items() if k != link_key}, content_key: content}
    return {**body, "properties": properties}


async def _fetch_json(request: Request, uri: str, target: str) -> dict[str, Any]:
    policy = request.app.state.settings.outbound.policy

    def failed(reason: str) -> errors.ArmError:
        shown = uri[:200].encode("unicode_escape").decode("ascii")
        return errors.ArmError(
            400, "InvalidContentLink", f"Unable to download deployment content from '{shown}': {reason}.", target
        )

    refusal = literal_refusal(policy, urlsplit(uri).hostname)
    if refusal:
        raise failed(refusal)
    connector = aiohttp.TCPConnector(resolver=PolicyResolver(policy))
    timeout = aiohttp.ClientTimeout(total=FETCH_SECONDS)
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False) as session,
            session.get(uri, allow_redirects=False) as response,
        ):
            if response.status != 200:
                raise failed(f"it answered {response.status}")
            raw = await response.content.read(MAX_LINKED_BYTES + 1)
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise failed(str(exc) or type(exc).__name__) from None
    if len(raw) > MAX_LINKED_BYTES:
        raise failed(f"it is larger than {MAX_LINKED_BYTES} bytes")
    try:
        return parse_json_object(to_strict_json(raw.decode("utf-8-sig")).encode("utf-8"))
    except (UnicodeDecodeError, UnclosedComment) as exc:
        raise failed(str(exc)) from None
    except errors.ArmError as exc:
        raise failed(exc.message) from None
