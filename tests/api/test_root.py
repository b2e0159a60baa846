"""``/``: a browser is led to the dashboard; other clients get ARM's JSON 404 for a path with no route."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from support.databases import TEST_SECRET_KEY

from scheduler_emulator.app import create_app
from scheduler_emulator.config import Settings

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


@pytest.fixture
def http(app: TestClient) -> TestClient:
    """This module's requests go to the API in-process (conftest's ``app``): nothing process-level is under test."""
    return app


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[TestClient]:
    """An in-memory app that requires a bearer token (--auth-token)."""
    settings = Settings(
        data_dir=tmp_path, in_memory=True, dispatcher=False, secret_key=TEST_SECRET_KEY, auth_token="t0ken"
    )
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        yield client


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_browser_at_the_root_is_sent_to_the_dashboard(http: TestClient, method: str) -> None:
    response = http.request(method, "/", headers={"accept": BROWSER_ACCEPT}, follow_redirects=False)
    assert response.status_code == 307
    assert response.headers["location"] == "/_emulator/ui/"
    page = http.get("/", headers={"accept": BROWSER_ACCEPT})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize("accept", [None, "*/*", "application/json"])
def test_any_other_client_at_the_root_gets_arms_not_found(http: TestClient, accept: str | None) -> None:
    headers = {} if accept is None else {"accept": accept}
    response = http.get("/", headers=headers, follow_redirects=False)
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "NotFound", "message": "No route matches '/'."}}


def test_the_root_leads_to_the_dashboard_without_a_token_when_one_is_required(guarded: TestClient) -> None:
    response = guarded.get("/", headers={"accept": BROWSER_ACCEPT}, follow_redirects=False)
    assert response.status_code == 307 and response.headers["location"] == "/_emulator/ui/"
    assert guarded.get("/_emulator/ui/").status_code == 200  # the page asks for the token itself
    assert guarded.get("/_emulator/dashboard/collections").status_code == 401  # the data still needs it
