"""The dashboard with roles (docs/reference/authorization.md#the-dashboard), in Debian's Chromium: with ``--auth
issued``, a Reader's token shows the collections and jobs it may read and no Run now, Disable, Delete or edit forms; an
Owner's shows them; the write the page does not offer, forged from the page with the Reader's token, is refused (403)
and changes nothing; a token of another subscription sees none of these collections."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from support.browser import launched_chromium
from support.server import EmulatorPool, ServerProcess

TENANT = "d1d1d1d1-0000-4000-8000-0000000000d1"
SUBSCRIPTION = "d0000000-1111-4111-8111-0000000000d1"
ELSEWHERE = "d0000000-2222-4222-8222-0000000000d2"
OWNER, READER, STRANGER, SECRET = "ui-owner", "ui-reader", "ui-stranger", "ui-secret~1"
READER_ROLE = "acdd72a7-3385-48ef-bd42-f606fba81ae7"
API = {"api-version": "2016-03-01"}
TIMEOUT_MS = 15_000
GROUP, COLLECTION, JOB = "rg-ui", "jc-roles", "nightly"
COLLECTION_PATH = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}/providers/Microsoft.Scheduler/jobCollections/{COLLECTION}"
)


def object_id(client_id: str) -> str:
    """The oid the token service gives a client id (api/identity/principals.py)."""
    return str(uuid.uuid5(uuid.UUID("6f1c2a5e-8d1b-4b7e-9a57-3c1f0e2d4b61"), client_id.lower()))


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    principals = f"{OWNER}:{SECRET}:{TENANT}:{SUBSCRIPTION}, {READER}:{SECRET}:{TENANT}:{ELSEWHERE}"
    principals += f", {STRANGER}:{SECRET}:{TENANT}:{ELSEWHERE[:-1]}3"
    with EmulatorPool() as pool:
        server = pool.start(
            tmp_path_factory.mktemp("ui-roles"),
            "--auth",
            "issued",
            "--no-dispatcher",
            log_level="warning",
            env={"SCHEDULER_PRINCIPALS": principals},
        )
        tokens = {}
        with server.client() as client:
            for app in (OWNER, READER, STRANGER):
                answer = client.post(
                    f"/{TENANT}/oauth2/v2.0/token",
                    data={
                        "grant_type": "client_credentials",
                        "client_id": app,
                        "client_secret": SECRET,
                        "scope": "https://management.azure.com/.default",
                    },
                )
                assert answer.status_code == 200, answer.text
                tokens[app] = answer.json()["access_token"]
            owner = {"Authorization": f"Bearer {tokens[OWNER]}"}
            made = client.put(
                COLLECTION_PATH,
                params=API,
                headers=owner,
                json={"location": "westus", "properties": {"sku": {"name": "Standard"}}},
            )
            assert made.status_code == 201, made.text
            job = {
                "properties": {
                    "startTime": (datetime.now(UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "action": {"type": "Http", "request": {"uri": "http://127.0.0.1:9/h", "method": "POST"}},
                    "recurrence": {"frequency": "Day", "interval": 1},
                }
            }
            assert client.put(f"{COLLECTION_PATH}/jobs/{JOB}", params=API, headers=owner, json=job).status_code == 201
            grant = client.put(
                f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Authorization/roleAssignments/{uuid.uuid4()}",
                params={"api-version": "2022-04-01"},
                headers=owner,
                json={
                    "properties": {
                        "roleDefinitionId": f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Authorization/"
                        f"roleDefinitions/{READER_ROLE}",
                        "principalId": object_id(READER),
                        "principalType": "ServicePrincipal",
                    }
                },
            )
            assert grant.status_code == 201, grant.text
        yield server, tokens


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched_chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    try:
        yield opened
    finally:
        context.close()


def sign_in(page: Any, server: ServerProcess, token: str, where: str) -> None:
    page.goto(f"{server.url}/_emulator/ui/#/{where}")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Use token").click()


def test_a_reader_sees_the_job_without_the_buttons_that_change_it(
    page: Any, emulator: tuple[ServerProcess, dict[str, str]]
) -> None:
    server, tokens = emulator
    sign_in(page, server, tokens[READER], f"j/{SUBSCRIPTION}/{GROUP}/{COLLECTION}/{JOB}")
    expect(page.get_by_role("heading", name=JOB)).to_be_visible()
    expect(page.get_by_text("Read only: this token may not change the job.")).to_be_visible()
    for name in ("Run now", "Disable", "Enable", "Delete", "Save JSON"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    # the forged call: what the Disable button would have sent, with the Reader's token, from the page
    status = page.evaluate(
        """async ([path, token]) => (await fetch(path, {method: 'PATCH', headers: {'Authorization': 'Bearer ' + token,
        'Content-Type': 'application/json'}, body: JSON.stringify({properties: {state: 'Disabled'}})})).status""",
        [f"{COLLECTION_PATH}/jobs/{JOB}?api-version=2016-03-01", tokens[READER]],
    )
    assert status == 403
    with server.client() as client:
        job = client.get(
            f"{COLLECTION_PATH}/jobs/{JOB}", params=API, headers={"Authorization": f"Bearer {tokens[OWNER]}"}
        )
    assert job.json()["properties"]["state"] == "enabled"  # the refused Disable changed nothing
    # the collection's page offers no new-job forms
    page.goto(f"{server.url}/_emulator/ui/#/c/{SUBSCRIPTION}/{GROUP}/{COLLECTION}")
    expect(page.get_by_text("Read only: this token may not add jobs here.")).to_be_visible()
    expect(page.get_by_role("button", name="Save job")).to_have_count(0)


def test_an_owner_sees_the_buttons(page: Any, emulator: tuple[ServerProcess, dict[str, str]]) -> None:
    server, tokens = emulator
    sign_in(page, server, tokens[OWNER], f"j/{SUBSCRIPTION}/{GROUP}/{COLLECTION}/{JOB}")
    for name in ("Run now", "Disable", "Delete", "Save JSON"):
        expect(page.get_by_role("button", name=name)).to_be_visible()
    expect(page.get_by_text("Read only")).to_have_count(0)


def test_the_collections_list_shows_what_the_token_may_read(
    page: Any, emulator: tuple[ServerProcess, dict[str, str]]
) -> None:
    server, tokens = emulator
    sign_in(page, server, tokens[READER], "collections")
    expect(page.get_by_role("link", name=COLLECTION)).to_be_visible()
    page.evaluate("() => sessionStorage.clear()")
    sign_in(page, server, tokens[STRANGER], "collections")
    expect(page.get_by_text("No job collections yet.")).to_be_visible()
    with httpx.Client(base_url=server.url, timeout=30) as client:
        listed = client.get("/_emulator/dashboard/collections", headers={"Authorization": f"Bearer {tokens[STRANGER]}"})
    assert listed.status_code == 200 and listed.json()["value"] == []
