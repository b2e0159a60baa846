"""The classic (2014) surface's calls and answers for the tests: one test's names and requests (``Classic``),
an XML collection body, a flat JSON job, and the XML and JSON error assertions."""

from __future__ import annotations

import base64
import uuid
import xml.etree.ElementTree as ET
from typing import Any

import httpx

from support.api_calls import future

NS = "{http://schemas.microsoft.com/windowsazure}"
VERSION = {"x-ms-version": "2013-03-01"}
CS_BODY = (
    '<?xml version="1.0" encoding="utf-8" standalone="yes"?><CloudService xmlns="http://schemas.microsoft.com/'
    'windowsazure"><Label>classic demo</Label><Description>demo service</Description><GeoRegion>West US'
    "</GeoRegion></CloudService>"
)


def collection_body(
    plan: str = "Standard", max_jobs: int = 50, label: str | None = "bar collection", frequency: str = "Minute"
) -> str:
    encoded = f"<Label>{base64.b64encode(label.encode()).decode()}</Label>" if label is not None else ""
    return (
        '<?xml version="1.0" encoding="utf-8" standalone="yes"?><Resource xmlns="http://schemas.microsoft.com/'
        f'windowsazure"><IntrinsicSettings><Plan>{plan}</Plan><Quota><MaxJobCount>{max_jobs}</MaxJobCount>'
        f"<MaxRecurrence><Frequency>{frequency}</Frequency><Interval>1</Interval></MaxRecurrence></Quota>"
        f"</IntrinsicSettings>{encoded}</Resource>"
    )


class Classic:
    """One test's classic names (a fresh subscription) and calls."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        self.subscription = str(uuid.uuid4())
        self.cloud_service = f"cs-{uuid.uuid4().hex[:8]}"
        self.collection = f"jc-{uuid.uuid4().hex[:8]}"

    @property
    def cs_path(self) -> str:
        return f"/{self.subscription}/CloudServices/{self.cloud_service}"

    def collection_path(self, tilde: bool = True, collection: str | None = None) -> str:
        middle = "/~" if tilde else ""
        return (
            f"/{self.subscription}/cloudservices/{self.cloud_service}/resources/scheduler{middle}/JobCollections/"
            + (collection or self.collection)
        )

    @property
    def jobs_path(self) -> str:
        return self.collection_path() + "/jobs"

    def arm_collection(self) -> str:
        return (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.cloud_service}/providers/Microsoft.Scheduler"
            f"/jobCollections/{self.collection}"
        )

    def call(self, method: str, path: str, body: str | bytes | None = None, **kw: Any) -> httpx.Response:
        headers = {**VERSION, **kw.pop("headers", {})}
        return self.http.request(method, path, content=body, headers=headers, **kw)

    def job_call(self, method: str, path: str, body: Any = None, **params: str) -> httpx.Response:
        content = body if isinstance(body, (bytes, str)) or body is None else httpx.Request("X", "/", json=body).content
        return self.call(
            method,
            path,
            content,
            params={"api-version": "2014-04-01", **params},
            headers={"content-type": "application/json; charset=utf-8"},
        )

    def arm(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return self.http.request(method, path, params={"api-version": "2016-03-01"}, json=body)

    def create_cloud_service(self) -> httpx.Response:
        response = self.call("PUT", self.cs_path, CS_BODY, headers={"content-type": "application/xml"})
        assert response.status_code == 202, response.text
        return response

    def create_collection(self, body: str | None = None, cloud_service: bool = True) -> None:
        if cloud_service:
            self.create_cloud_service()
        response = self.call(
            "PUT",
            self.collection_path(tilde=False),
            body or collection_body(),
            headers={"content-type": "application/xml"},
        )
        assert response.status_code == 202, response.text

    def put_job(self, name: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return self.job_call("PUT", f"{self.jobs_path}/{name}", body or job(future()))


def job(start: str, uri: str = "http://127.0.0.1:9/classic", **extra: Any) -> dict[str, Any]:
    return {
        "startTime": start,
        "action": {"type": "Http", "request": {"uri": uri, "method": "POST", "body": "hello"}},
        "recurrence": {"frequency": "Hour", "interval": 1},
        **extra,
    }


def xml(response: httpx.Response) -> ET.Element:
    assert response.headers["content-type"].startswith("application/xml"), response.headers
    return ET.fromstring(response.content)


def text(element: ET.Element, path: str) -> str | None:
    found = element.find("/".join(NS + part for part in path.split("/")))
    return None if found is None else (found.text or "")


def assert_xml_error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    root = xml(response)
    assert root.tag == NS + "Error"
    assert text(root, "Code") == code, response.text
    return text(root, "Message") or ""


def assert_json_error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code, response.text
    return str(error["message"])
