"""End to end through the official client: the emulator runs as a separate HTTPS process (self-signed
certificate) on each store backend and is driven with ``azure-mgmt-scheduler==7.0.0``.

Every field a client sets must come back unchanged through the SDK's models, minus write-only secrets.
History rows are written straight into the server's database with the project's own store, since
nothing fires jobs yet."""

from __future__ import annotations

import copy
import gc
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.mgmt.scheduler import SchedulerManagementClient
from azure.mgmt.scheduler.models import (
    BasicAuthentication,
    ClientCertAuthentication,
    HttpRequest,
    JobAction,
    JobCollectionDefinition,
    JobCollectionProperties,
    JobCollectionQuota,
    JobDefinition,
    JobErrorAction,
    JobMaxRecurrence,
    JobProperties,
    JobRecurrence,
    JobRecurrenceSchedule,
    JobRecurrenceScheduleMonthlyOccurrence,
    OAuthAuthentication,
    RetryPolicy,
    ServiceBusAuthentication,
    ServiceBusBrokeredMessageProperties,
    ServiceBusQueueMessage,
    ServiceBusTopicMessage,
    Sku,
    StorageQueueMessage,
)
from cryptography import x509
from pydantic.alias_generators import to_snake
from sqlalchemy import func, select
from support.certificates import pfx as pfx_base64
from support.certificates import self_signed
from support.certificates import thumbprint as sha1_thumbprint
from support.databases import TEST_SECRET_KEY, Backend
from support.names import Names
from support.sdk import scheduler_sdk
from support.server import ServerProcess
from support.waiting import unique

from scheduler_emulator.domain.history import history_id
from scheduler_emulator.schemas.job_shape import SECRETS
from scheduler_emulator.store import repository
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobHistoryRow, JobRow
from scheduler_emulator.store.secrets import SecretBox

COLLECTION_TYPE = "Microsoft.Scheduler/jobCollections"
JOB_TYPE = "Microsoft.Scheduler/jobCollections/jobs"
HISTORY_TYPE = "Microsoft.Scheduler/jobCollections/jobs/history"

# Jobs start in the future (whole seconds), so a dispatcher never fires them while a test runs.
NOW = datetime.now(UTC).replace(microsecond=0)
START = NOW + timedelta(days=30)
END = NOW + timedelta(days=300)


# --- the client ---------------------------------------------------------------------------------


class FakeCredential:
    """Any bearer token will do: the emulator accepts every token by default."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("fake", 4_102_444_800)  # 2100-01-01


@pytest.fixture
def client(server: ServerProcess, names: Names) -> Iterator[SchedulerManagementClient]:
    with scheduler_sdk(server, FakeCredential(), names.subscription) as sdk:
        yield sdk
    # Responses kept alive by reference cycles (an exception caught by pytest.raises holds its response)
    # keep their sockets open after the client closed its pool; release them now, not at some later GC.
    gc.collect()


def with_status(pipeline_response: Any, deserialized: Any, headers: Any) -> tuple[int, Any]:
    """``cls=`` hook: the HTTP status the SDK otherwise hides, with the model."""
    return pipeline_response.http_response.status_code, deserialized


def collection_definition(**properties: Any) -> JobCollectionDefinition:
    return JobCollectionDefinition(
        location="westus",
        properties=JobCollectionProperties(sku=Sku(name="Standard"), **properties),
    )


@pytest.fixture
def collection(client: SchedulerManagementClient, names: Names) -> str:
    """A Standard job collection named ``names.collection``."""
    client.job_collections.create_or_update(names.resource_group, names.collection, collection_definition())
    return names.collection


def http_action(uri: str = "https://example.invalid/hook") -> JobAction:
    return JobAction(type="Https", request=HttpRequest(uri=uri, method="POST", body="ping"))


def simple_job(state: str | None = None, action: JobAction | None = None) -> JobDefinition:
    return JobDefinition(
        properties=JobProperties(
            start_time=START,
            action=action or http_action(),
            recurrence=JobRecurrence(frequency="Day", interval=1),
            state=state,
        )
    )


def put_job(client: SchedulerManagementClient, names: Names, name: str, job: JobDefinition) -> tuple[int, Any]:
    return client.jobs.create_or_update(names.resource_group, names.collection, name, job, cls=with_status)


# How the service wrote each enumeration in its answers, whatever the client sent
# (docs/reference/arm-api.md#enumerations, recorded); the SDK keeps the string it read. HTTP authentication types and
# action types are answered as sent.
SERVICE_SPELLING = {
    **{v: v.lower() for v in ("Enabled", "Disabled", "Completed", "Faulted", "Fixed", "None")},
    **{v: v.lower() for v in ("Minute", "Hour", "Day", "Week", "Month")},
    **{v: v.lower() for v in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")},
    "NetMessaging": "netMessaging",
    "AMQP": "amqp",
    "SharedAccessKey": "sharedAccessKey",
}
_ENUM_KEYS = ("state", "frequency", "retry_type", "week_days", "day", "transport_type")


def answered(node: Any) -> Any:
    """A model's ``as_dict()`` as the emulator answers it: enumerations in the service's spelling (a Service Bus
    authentication's type too), a recurrence's omitted interval as 1."""
    if isinstance(node, list):
        return [answered(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {}
    for key, value in node.items():
        if key in _ENUM_KEYS or (key == "type" and value == "SharedAccessKey"):
            value = [SERVICE_SPELLING[v] for v in value] if isinstance(value, list) else SERVICE_SPELLING[value]
        result[key] = answered(value)
    if "frequency" in result and "interval" not in result:
        result["interval"] = 1
    return result


def without_secrets(action: JobAction | JobErrorAction) -> dict[str, Any]:
    """What the server must send back for ``action``: all of it minus the write-only secrets the job shape
    declares (``schemas.job_shape.SECRETS``, in the SDK's snake_case)."""
    expected = copy.deepcopy(action.as_dict())
    for act in (expected, expected.get("error_action")):
        if not act:
            continue
        for slot in SECRETS:
            holder = act.get(to_snake(slot.payload)) or {}
            for key in slot.holder:
                holder = holder.get(to_snake(key)) or {}
            holder.pop(to_snake(slot.name), None)
    return expected


# --- a client certificate (pfx) ------------------------------------------------------------------


@dataclass(frozen=True)
class Pfx:
    base64: str
    password: str
    certificate: x509.Certificate

    @property
    def thumbprint(self) -> str:
        return sha1_thumbprint(self.certificate)


@pytest.fixture(scope="module")
def pfx() -> Pfx:
    """A self-signed certificate for ``CN=Scheduler Mgmt`` with its key, as password-protected pfx."""
    key, certificate = self_signed(
        "Scheduler Mgmt", not_before=NOW - timedelta(days=1), not_after=NOW + timedelta(days=400), rsa_key=True
    )
    password = "pfx-Pa55word!"
    return Pfx(pfx_base64(key, certificate, password, b"scheduler"), password, certificate)


# --- history rows, written with the project's own store ------------------------------------------


@dataclass(frozen=True)
class Entry:
    start: datetime
    status: str
    action_name: str = "MainAction"
    message: str = ""
    retry_count: int = 0
    repeat_count: int = 1


def insert_history(backend: Backend, names: Names, job_name: str, entries: list[Entry]) -> list[str]:
    """Store ``entries`` (oldest first) as the job's history; returns their history ids."""
    database = Database(backend.database_url)
    ids = []
    try:
        with database.session() as session:
            collection = repository.find_collection(session, names.subscription, names.resource_group, names.collection)
            assert collection is not None
            job = repository.find_job(session, collection, job_name)
            assert job is not None
            for entry in entries:
                row = JobHistoryRow(
                    history_id=history_id(entry.start),
                    start_time=entry.start,
                    end_time=entry.start + timedelta(seconds=2),
                    expected_execution_time=entry.start - timedelta(seconds=1),
                    action_name=entry.action_name,
                    status=entry.status,
                    message=entry.message,
                    retry_count=entry.retry_count,
                    repeat_count=entry.repeat_count,
                )
                repository.record_history(session, job.id, row)
                session.flush()
                ids.append(row.history_id)
    finally:
        database.dispose()
    return ids


def stored_job(backend: Backend, names: Names, job_name: str) -> JobRow | None:
    """The job's row as the server stored it (secrets included, opened with the server's key)."""
    database = Database(backend.database_url, SecretBox(TEST_SECRET_KEY.encode()))
    try:
        with database.session() as session:
            collection = repository.find_collection(session, names.subscription, names.resource_group, names.collection)
            return None if collection is None else repository.find_job(session, collection, job_name)
    finally:
        database.dispose()


def history_rows_of(backend: Backend, job_id: int) -> int:
    database = Database(backend.database_url)
    try:
        with database.session() as session:
            return (
                session.scalar(select(func.count()).select_from(JobHistoryRow).where(JobHistoryRow.job_id == job_id))
                or 0
            )
    finally:
        database.dispose()


# --- job collections ------------------------------------------------------------------------------


def test_collection_create_answers_201_then_replace_answers_200_with_every_field_echoed(
    client: SchedulerManagementClient, names: Names
) -> None:
    quota = JobCollectionQuota(
        max_job_count=10, max_job_occurrence=100, max_recurrence=JobMaxRecurrence(frequency="Hour", interval=1)
    )
    definition = JobCollectionDefinition(
        location="westus",
        tags={"team": "ops", "env": "test"},
        properties=JobCollectionProperties(sku=Sku(name="P10Premium"), state="Enabled", quota=quota),
    )

    status, created = client.job_collections.create_or_update(
        names.resource_group, names.collection, definition, cls=with_status
    )

    assert status == 201
    assert created.id == names.collection_path
    assert created.type == COLLECTION_TYPE
    assert created.name == names.collection
    assert created.location == "West US"
    assert created.tags == {"team": "ops", "env": "test"}
    assert created.properties.sku.name == "P10Premium"
    assert created.properties.state == "Enabled"
    assert created.properties.quota.as_dict() == {
        **quota.as_dict(),
        "max_recurrence": {"frequency": "hour", "interval": 1},  # lower-case, as the service wrote it
    }

    definition.tags = {"team": "platform"}
    definition.properties = JobCollectionProperties(sku=Sku(name="Standard"), state="Disabled")
    status, replaced = client.job_collections.create_or_update(
        names.resource_group, names.collection, definition, cls=with_status
    )

    assert status == 201  # a replace too, as the service answered (recorded)
    assert replaced.tags == {"team": "platform"}
    assert replaced.properties.sku.name == "Standard"
    assert replaced.properties.state == "Disabled"
    assert replaced.properties.quota is None


def test_collection_get_returns_what_was_created_under_any_name_casing(
    client: SchedulerManagementClient, names: Names
) -> None:
    created = client.job_collections.create_or_update(names.resource_group, names.collection, collection_definition())

    got = client.job_collections.get(names.resource_group.upper(), names.collection.upper())

    assert got.as_dict() == created.as_dict()
    assert got.id == names.collection_path
    assert got.name == names.collection
    assert got.properties.state == "Enabled"
    assert got.properties.sku.name == "Standard"


def test_collection_get_of_a_missing_collection_raises_resource_not_found(
    client: SchedulerManagementClient, names: Names
) -> None:
    with pytest.raises(ResourceNotFoundError) as caught:
        client.job_collections.get(names.resource_group, names.collection)

    assert caught.value.status_code == 404
    assert caught.value.error.code == "ResourceNotFound"


def test_collections_are_listed_by_subscription_and_by_resource_group(
    client: SchedulerManagementClient, names: Names
) -> None:
    other_group = unique("rg-")
    in_first = {unique("jc-") for _ in range(2)}
    in_other = {unique("jc-")}
    for name in in_first:
        client.job_collections.create_or_update(names.resource_group, name, collection_definition())
    for name in in_other:
        client.job_collections.create_or_update(other_group, name, collection_definition())

    by_subscription = list(client.job_collections.list_by_subscription())
    by_group = list(client.job_collections.list_by_resource_group(names.resource_group))
    by_other_group = list(client.job_collections.list_by_resource_group(other_group))

    assert sorted(c.name for c in by_subscription) == sorted(in_first | in_other)
    assert sorted(c.name for c in by_group) == sorted(in_first)
    assert [c.name for c in by_other_group] == list(in_other)
    for item in by_subscription:
        group = names.resource_group if item.name in in_first else other_group
        assert item.id == (
            f"/subscriptions/{names.subscription}/resourceGroups/{group}"
            f"/providers/Microsoft.Scheduler/jobCollections/{item.name}"
        )
        assert item.type == COLLECTION_TYPE
        assert item.location == "West US"
        assert item.properties.sku.name == "Standard"


def test_collection_patch_replaces_tags_and_merges_properties(client: SchedulerManagementClient, names: Names) -> None:
    client.job_collections.create_or_update(
        names.resource_group,
        names.collection,
        JobCollectionDefinition(
            location="southeastasia",
            tags={"a": "1", "b": "2"},
            properties=JobCollectionProperties(
                sku=Sku(name="Standard"),
                quota=JobCollectionQuota(
                    max_job_count=20,
                    max_job_occurrence=50,
                    max_recurrence=JobMaxRecurrence(frequency="Minute", interval=5),
                ),
            ),
        ),
    )

    patched = client.job_collections.patch(
        names.resource_group,
        names.collection,
        JobCollectionDefinition(
            tags={"c": "3"},
            properties=JobCollectionProperties(quota=JobCollectionQuota(max_job_count=10)),
        ),
    )

    assert patched.tags == {"c": "3"}
    assert patched.location == "Southeast Asia"
    assert patched.properties.sku.name == "Standard"
    assert patched.properties.state == "Enabled"
    assert patched.properties.quota.max_job_count == 10
    assert patched.properties.quota.max_job_occurrence == 50
    assert patched.properties.quota.max_recurrence.as_dict() == {"frequency": "minute", "interval": 5}
    assert client.job_collections.get(names.resource_group, names.collection).as_dict() == patched.as_dict()


def test_collection_disable_and_enable_set_the_collection_and_its_jobs(
    client: SchedulerManagementClient, names: Names, collection: str
) -> None:
    put_job(client, names, "on", simple_job())
    put_job(client, names, "off", simple_job(state="Disabled"))

    client.job_collections.begin_disable(names.resource_group, collection).result()

    assert client.job_collections.get(names.resource_group, collection).properties.state == "Disabled"
    for job in client.jobs.list(names.resource_group, collection):
        assert job.properties.state == "disabled"
        assert job.properties.status.next_execution_time is None

    client.job_collections.begin_enable(names.resource_group, collection).result()

    assert client.job_collections.get(names.resource_group, collection).properties.state == "Enabled"
    jobs = {job.name: job for job in client.jobs.list(names.resource_group, collection)}
    assert sorted(jobs) == [f"{collection}/off", f"{collection}/on"]
    for job in jobs.values():
        assert job.properties.state == "enabled"
        assert job.properties.status.next_execution_time == START


def test_collection_delete_removes_it_with_its_jobs_and_their_history(
    client: SchedulerManagementClient, names: Names, collection: str, backend: Backend
) -> None:
    put_job(client, names, "doomed", simple_job())
    insert_history(backend, names, "doomed", [Entry(NOW, "Completed")])
    job_row = stored_job(backend, names, "doomed")
    assert job_row is not None and history_rows_of(backend, job_row.id) == 1

    assert client.job_collections.begin_delete(names.resource_group, collection).result() is None

    with pytest.raises(ResourceNotFoundError):
        client.job_collections.get(names.resource_group, collection)
    with pytest.raises(ResourceNotFoundError):
        client.jobs.get(names.resource_group, collection, "doomed")
    assert list(client.job_collections.list_by_resource_group(names.resource_group)) == []
    assert history_rows_of(backend, job_row.id) == 0
    with pytest.raises(ResourceNotFoundError):
        client.job_collections.begin_delete(names.resource_group, collection).result()


# --- jobs: create, replace, get ------------------------------------------------------------------


def test_job_create_answers_201_and_replace_answers_200(
    client: SchedulerManagementClient, names: Names, collection: str
) -> None:
    status, created = put_job(client, names, "nightly", simple_job())

    assert status == 201
    assert created.id == names.job_path("nightly")
    assert created.type == JOB_TYPE
    assert created.name == f"{collection}/nightly"
    assert created.properties.start_time == START
    assert created.properties.state == "enabled"
    assert created.properties.status.execution_count == 0
    assert created.properties.status.failure_count == 0
    assert created.properties.status.faulted_count == 0
    assert created.properties.status.last_execution_time is None
    assert created.properties.status.next_execution_time == START

    replacement = simple_job(action=http_action("https://example.invalid/other"))
    replacement.properties.recurrence = JobRecurrence(frequency="Hour", interval=6)
    status, replaced = put_job(client, names, "nightly", replacement)

    assert status == 200
    assert replaced.properties.action.request.uri == "https://example.invalid/other"
    assert replaced.properties.recurrence.as_dict() == {"frequency": "hour", "interval": 6}
    assert replaced.properties.status.next_execution_time == START
    assert client.jobs.get(names.resource_group, collection, "NIGHTLY").as_dict() == replaced.as_dict()


def test_job_in_a_missing_collection_is_refused_with_not_found(client: SchedulerManagementClient, names: Names) -> None:
    with pytest.raises(ResourceNotFoundError) as caught:
        put_job(client, names, "orphan", simple_job())

    assert caught.value.error.code == "ResourceNotFound"
    with pytest.raises(ResourceNotFoundError):
        client.job_collections.get(names.resource_group, names.collection)


def test_invalid_job_is_refused_with_bad_request_naming_the_field(
    client: SchedulerManagementClient, names: Names, collection: str
) -> None:
    job = simple_job(action=JobAction(type="Https", request=HttpRequest(uri="http://example.invalid/", method="GET")))

    with pytest.raises(HttpResponseError) as caught:
        put_job(client, names, "insecure", job)

    assert caught.value.status_code == 400
    assert caught.value.error.code == "BadRequest"
    assert "properties.action.request.uri" in caught.value.error.message


# --- jobs: every field round-trips through the SDK's models ---------------------------------------


def assert_round_trip(client: SchedulerManagementClient, names: Names, name: str, job: JobDefinition) -> JobDefinition:
    """PUT ``job``; the PUT answer and a later GET both carry everything it set, minus secrets."""
    status, created = put_job(client, names, name, job)
    assert status == 201
    got = client.jobs.get(names.resource_group, names.collection, name)
    for answer in (created, got):
        assert answer.properties.action.as_dict() == answered(without_secrets(job.properties.action))
        assert answer.properties.start_time == job.properties.start_time
        if job.properties.recurrence is None:
            assert answer.properties.recurrence is None
        else:
            assert answer.properties.recurrence.as_dict() == answered(job.properties.recurrence.as_dict())
        assert answer.properties.state == SERVICE_SPELLING[job.properties.state or "Enabled"]
    return got


def test_http_action_with_basic_auth_retry_policy_and_oauth_error_action_round_trips(
    client: SchedulerManagementClient, names: Names, collection: str, server: ServerProcess
) -> None:
    action = JobAction(
        type="Http",
        request=HttpRequest(
            uri="http://example.invalid/api/hook?x=1",
            method="PUT",
            body='{"hello": "world"}',
            headers={"Content-Type": "application/json", "X-Custom": "yes"},
            authentication=BasicAuthentication(username="scheduler", password="basic-S3cret"),
        ),
        retry_policy=RetryPolicy(retry_type="Fixed", retry_interval=timedelta(seconds=30), retry_count=5),
        error_action=JobErrorAction(
            type="Https",
            request=HttpRequest(
                uri="https://example.invalid/errors",
                method="POST",
                body="failed",
                headers={"X-Error": "1"},
                authentication=OAuthAuthentication(
                    secret="oauth-S3cret",
                    tenant="contoso.onmicrosoft.com",
                    audience="https://management.core.windows.net/",
                    client_id="11111111-2222-3333-4444-555555555555",
                ),
            ),
            retry_policy=RetryPolicy(retry_type="Fixed", retry_interval=timedelta(minutes=2), retry_count=2),
        ),
    )
    job = JobDefinition(
        properties=JobProperties(start_time=START, action=action, recurrence=JobRecurrence(frequency="Hour"))
    )

    got = assert_round_trip(client, names, "http", job)

    main = got.properties.action
    assert main.type == "Http"
    assert isinstance(main.request.authentication, BasicAuthentication)
    assert main.request.authentication.username == "scheduler"
    assert main.request.authentication.password is None
    assert main.retry_policy.retry_interval == timedelta(seconds=30)
    assert main.retry_policy.retry_count == 5
    assert main.request.headers == {"Content-Type": "application/json", "X-Custom": "yes"}
    error = main.error_action
    assert error.type == "Https"
    assert isinstance(error.request.authentication, OAuthAuthentication)
    assert error.request.authentication.tenant == "contoso.onmicrosoft.com"
    assert error.request.authentication.audience == "https://management.core.windows.net/"
    assert error.request.authentication.client_id == "11111111-2222-3333-4444-555555555555"
    assert error.request.authentication.secret is None
    assert error.retry_policy.retry_interval == timedelta(minutes=2)
    assert "basic-S3cret" not in server.log and "oauth-S3cret" not in server.log


def test_https_action_with_client_certificate_reports_the_certificate_and_hides_the_pfx(
    client: SchedulerManagementClient, names: Names, collection: str, pfx: Pfx, server: ServerProcess
) -> None:
    action = JobAction(
        type="Https",
        request=HttpRequest(
            uri="https://example.invalid/secure",
            method="GET",
            authentication=ClientCertAuthentication(pfx=pfx.base64, password=pfx.password),
        ),
        retry_policy=RetryPolicy(retry_type="None"),
    )
    job = JobDefinition(properties=JobProperties(start_time=START, action=action))

    status, created = put_job(client, names, "mtls", job)
    got = client.jobs.get(names.resource_group, collection, "mtls")

    assert status == 201
    for answer in (created, got):
        auth = answer.properties.action.request.authentication
        assert isinstance(auth, ClientCertAuthentication)
        assert auth.pfx is None
        assert auth.password is None
        assert auth.certificate_thumbprint == pfx.thumbprint
        assert auth.certificate_subject_name == "CN=Scheduler Mgmt"
        assert auth.certificate_expiration_date == pfx.certificate.not_valid_after_utc
        assert answer.properties.action.retry_policy.retry_type == "none"
        assert answer.properties.action.request.uri == "https://example.invalid/secure"
        assert answer.properties.action.request.method == "GET"
        assert answer.properties.recurrence is None
    assert pfx.base64[:64] not in server.log and pfx.password not in server.log


def test_client_certificate_that_will_not_open_is_refused(
    client: SchedulerManagementClient, names: Names, collection: str, pfx: Pfx
) -> None:
    action = JobAction(
        type="Https",
        request=HttpRequest(
            uri="https://example.invalid/secure",
            method="GET",
            authentication=ClientCertAuthentication(pfx=pfx.base64, password="wrong password"),
        ),
    )

    with pytest.raises(HttpResponseError) as caught:
        put_job(client, names, "badpfx", JobDefinition(properties=JobProperties(action=action)))

    assert caught.value.status_code == 400
    assert "properties.action.request.authentication.pfx" in caught.value.error.message


def test_storage_queue_action_with_service_bus_queue_error_action_round_trips(
    client: SchedulerManagementClient, names: Names, collection: str
) -> None:
    action = JobAction(
        type="StorageQueue",
        queue_message=StorageQueueMessage(
            storage_account="schedulerstore",
            queue_name="jobs",
            sas_token="?sv=2015-04-05&sr=q&sig=abc%3D&se=2030-01-01T00%3A00%3A00Z&sp=a",
            message="<b>hello</b> & bye",
        ),
        retry_policy=RetryPolicy(retry_type="Fixed", retry_interval=timedelta(hours=1), retry_count=0),
        error_action=JobErrorAction(
            type="ServiceBusQueue",
            service_bus_queue_message=ServiceBusQueueMessage(
                authentication=ServiceBusAuthentication(
                    sas_key="sb-queue-S3cret", sas_key_name="RootManageSharedAccessKey", type="SharedAccessKey"
                ),
                brokered_message_properties=ServiceBusBrokeredMessageProperties(
                    content_type="text/plain", message_id="err-1", time_to_live=timedelta(days=1)
                ),
                custom_message_properties={"origin": "scheduler"},
                message="storage queue failed",
                namespace="contoso-sb",
                transport_type="NetMessaging",
                queue_name="errors",
            ),
        ),
    )
    job = JobDefinition(
        properties=JobProperties(
            start_time=START,
            action=action,
            recurrence=JobRecurrence(frequency="Minute", interval=30, count=10, end_time=END),
            state="Disabled",
        )
    )

    got = assert_round_trip(client, names, "queue", job)

    queue = got.properties.action.queue_message
    assert queue.sas_token is None  # write-only (docs/reference/arm-api.md#write-only-secrets)
    assert queue.message == "<b>hello</b> & bye"
    assert got.properties.action.retry_policy.retry_interval == timedelta(hours=1)
    assert got.properties.action.retry_policy.retry_count == 0
    bus = got.properties.action.error_action.service_bus_queue_message
    assert bus.authentication.sas_key is None
    assert bus.authentication.sas_key_name == "RootManageSharedAccessKey"
    assert bus.brokered_message_properties.time_to_live == timedelta(days=1)
    assert got.properties.recurrence.end_time == END
    assert got.properties.status.next_execution_time is None


def test_service_bus_topic_action_round_trips_every_message_property(
    client: SchedulerManagementClient, names: Names, collection: str
) -> None:
    enqueue_at = START + timedelta(minutes=5)
    action = JobAction(
        type="ServiceBusTopic",
        service_bus_topic_message=ServiceBusTopicMessage(
            authentication=ServiceBusAuthentication(
                sas_key="sb-topic-S3cret", sas_key_name="Sender", type="SharedAccessKey"
            ),
            brokered_message_properties=ServiceBusBrokeredMessageProperties(
                content_type="application/json",
                correlation_id="corr-1",
                force_persistence=True,
                label="subject-1",
                message_id="msg-1",
                partition_key="pk",
                reply_to="replies",
                reply_to_session_id="reply-session",
                scheduled_enqueue_time_utc=enqueue_at,
                session_id="session-1",
                time_to_live=timedelta(hours=2, minutes=30),
                to="someone",
                via_partition_key="via-pk",
            ),
            custom_message_properties={"tenant": "contoso", "priority": "high"},
            message='{"event": "tick"}',
            namespace="contoso-sb",
            transport_type="AMQP",
            topic_path="events/ticks",
        ),
        retry_policy=RetryPolicy(retry_type="Fixed", retry_interval=timedelta(seconds=15), retry_count=20),
    )
    job = JobDefinition(
        properties=JobProperties(start_time=START, action=action, recurrence=JobRecurrence(frequency="Day"))
    )

    got = assert_round_trip(client, names, "topic", job)

    message = got.properties.action.service_bus_topic_message
    assert message.authentication.sas_key is None
    assert message.authentication.type == "sharedAccessKey"
    assert message.brokered_message_properties.scheduled_enqueue_time_utc == enqueue_at
    assert message.brokered_message_properties.time_to_live == timedelta(hours=2, minutes=30)
    assert message.brokered_message_properties.force_persistence is True
    assert message.custom_message_properties == {"tenant": "contoso", "priority": "high"}
    assert message.topic_path == "events/ticks"
    assert got.properties.action.retry_policy.retry_interval == timedelta(seconds=15)


def test_weekly_recurrence_with_week_days_hours_and_minutes_round_trips(
    client: SchedulerManagementClient, names: Names, collection: str
) -> None:
    recurrence = JobRecurrence(
        frequency="Week",
        interval=2,
        count=20,
        end_time=END,
        schedule=JobRecurrenceSchedule(week_days=["Monday", "Friday"], hours=[9, 17], minutes=[0, 30]),
    )
    job = JobDefinition(properties=JobProperties(start_time=START, action=http_action(), recurrence=recurrence))

    got = assert_round_trip(client, names, "weekly", job)

    schedule = got.properties.recurrence.schedule
    assert schedule.week_days == ["monday", "friday"]
    assert schedule.hours == [9, 17]
    assert schedule.minutes == [0, 30]
    assert got.properties.recurrence.interval == 2
    assert got.properties.recurrence.count == 20
    assert got.properties.status.next_execution_time is not None


def test_monthly_recurrence_with_month_days_and_monthly_occurrences_round_trips(
    client: SchedulerManagementClient, names: Names, collection: str
) -> None:
    recurrence = JobRecurrence(
        frequency="Month",
        interval=1,
        end_time=END,
        schedule=JobRecurrenceSchedule(
            hours=[6],
            minutes=[15, 45],
            month_days=[1, 15, -1],
            monthly_occurrences=[
                JobRecurrenceScheduleMonthlyOccurrence(day="Monday", occurrence=1),
                JobRecurrenceScheduleMonthlyOccurrence(day="Friday", occurrence=-1),
            ],
        ),
    )
    job = JobDefinition(properties=JobProperties(start_time=START, action=http_action(), recurrence=recurrence))

    got = assert_round_trip(client, names, "monthly", job)

    schedule = got.properties.recurrence.schedule
    assert schedule.month_days == [1, 15, -1]
    assert [(o.day, o.occurrence) for o in schedule.monthly_occurrences] == [("monday", 1), ("friday", -1)]
    assert schedule.hours == [6]
    assert schedule.minutes == [15, 45]


# --- jobs: list, patch, run, delete ---------------------------------------------------------------


def test_job_list_pages_through_the_sdk_pager_returning_every_job_once(
    client: SchedulerManagementClient, names: Names, collection: str
) -> None:
    created = [f"job{i}" for i in range(7)]
    for name in created:
        put_job(client, names, name, simple_job())

    pages = [list(page) for page in client.jobs.list(names.resource_group, collection, top=3).by_page()]
    everything = [job.name for job in client.jobs.list(names.resource_group, collection, top=3)]

    assert [len(page) for page in pages] == [3, 3, 1]
    assert sorted(everything) == sorted(f"{collection}/{name}" for name in created)
    assert len(everything) == len(set(everything)) == 7
    assert [job.name for page in pages for job in page] == everything
    skipped = [job.name for job in client.jobs.list(names.resource_group, collection, top=3, skip=5)]
    assert skipped == everything[5:]


def test_job_list_filters_by_state(client: SchedulerManagementClient, names: Names, collection: str) -> None:
    for i in range(3):
        put_job(client, names, f"enabled{i}", simple_job())
    for i in range(4):
        put_job(client, names, f"disabled{i}", simple_job(state="Disabled"))

    disabled = list(client.jobs.list(names.resource_group, collection, filter="state eq 'Disabled'", top=3))
    enabled = list(client.jobs.list(names.resource_group, collection, filter="state eq 'Enabled'"))

    assert sorted(job.name for job in disabled) == [f"{collection}/disabled{i}" for i in range(4)]
    assert all(job.properties.state == "disabled" for job in disabled)
    assert sorted(job.name for job in enabled) == [f"{collection}/enabled{i}" for i in range(3)]
    assert all(job.properties.state == "enabled" for job in enabled)


def test_job_patch_merges_properties_and_keeps_write_only_secrets(
    client: SchedulerManagementClient, names: Names, collection: str, backend: Backend
) -> None:
    action = JobAction(
        type="Https",
        request=HttpRequest(
            uri="https://example.invalid/hook",
            method="POST",
            authentication=BasicAuthentication(username="user", password="keep-me"),
        ),
        retry_policy=RetryPolicy(retry_type="Fixed", retry_interval=timedelta(seconds=45), retry_count=3),
    )
    put_job(
        client,
        names,
        "patched",
        JobDefinition(
            properties=JobProperties(
                start_time=START, action=action, recurrence=JobRecurrence(frequency="Day", interval=1, count=5)
            )
        ),
    )

    disabled = client.jobs.patch(
        names.resource_group,
        collection,
        "patched",
        JobDefinition(properties=JobProperties(state="Disabled", recurrence=JobRecurrence(interval=3))),
    )

    assert disabled.properties.state == "disabled"
    assert disabled.properties.status.next_execution_time is None
    assert disabled.properties.recurrence.as_dict() == {"frequency": "day", "interval": 3, "count": 5}
    assert disabled.properties.action.as_dict() == answered(without_secrets(action))
    assert disabled.properties.start_time == START
    row = stored_job(backend, names, "patched")
    assert row is not None
    assert row.definition["action"]["request"]["authentication"]["password"] == "keep-me"

    enabled = client.jobs.patch(
        names.resource_group, collection, "patched", JobDefinition(properties=JobProperties(state="Enabled"))
    )

    assert enabled.properties.state == "enabled"
    assert enabled.properties.status.next_execution_time == START
    assert client.jobs.get(names.resource_group, collection, "patched").as_dict() == enabled.as_dict()


def test_job_run_answers_200_and_leaves_the_job_in_place(
    client: SchedulerManagementClient, names: Names, collection: str
) -> None:
    _, created = put_job(client, names, "runnable", simple_job())

    status = client.jobs.run(
        names.resource_group, collection, "runnable", cls=lambda response, _, __: response.http_response.status_code
    )

    assert status == 200
    after = client.jobs.get(names.resource_group, collection, "runnable")
    assert after.properties.action.as_dict() == created.properties.action.as_dict()
    assert after.properties.recurrence.as_dict() == created.properties.recurrence.as_dict()
    assert after.properties.state == "enabled"
    with pytest.raises(ResourceNotFoundError):
        client.jobs.run(names.resource_group, collection, "missing")


def test_job_delete_removes_the_job_and_its_history(
    client: SchedulerManagementClient, names: Names, collection: str, backend: Backend
) -> None:
    put_job(client, names, "keep", simple_job())
    put_job(client, names, "gone", simple_job())
    insert_history(backend, names, "gone", [Entry(NOW, "Failed")])
    row = stored_job(backend, names, "gone")
    assert row is not None

    status = client.jobs.delete(
        names.resource_group, collection, "gone", cls=lambda response, _, __: response.http_response.status_code
    )

    assert status == 200
    with pytest.raises(ResourceNotFoundError) as caught:
        client.jobs.get(names.resource_group, collection, "gone")
    assert caught.value.error.code == "ResourceNotFound"
    assert [job.name for job in client.jobs.list(names.resource_group, collection)] == [f"{collection}/keep"]
    assert history_rows_of(backend, row.id) == 0
    with pytest.raises(ResourceNotFoundError):
        client.jobs.delete(names.resource_group, collection, "gone")


# --- history --------------------------------------------------------------------------------------


HISTORY = [  # oldest first
    Entry(NOW - timedelta(minutes=50), "Completed", message="Http Action - Response from host 'a': 'OK'"),
    Entry(NOW - timedelta(minutes=40), "Failed", message="Http Action - 500 Internal Server Error", repeat_count=2),
    Entry(NOW - timedelta(minutes=39), "Failed", message="retry 1 failed", retry_count=1, repeat_count=2),
    Entry(NOW - timedelta(minutes=38), "Failed", "ErrorAction", message="error action failed", repeat_count=2),
    Entry(NOW - timedelta(minutes=30), "Postponed", message="Skipped 2 occurrences", repeat_count=3),
    Entry(NOW - timedelta(minutes=20), "Completed", message="Http Action - Response: 'OK'", repeat_count=4),
]


def test_job_history_lists_every_entry_newest_first_with_its_fields(
    client: SchedulerManagementClient, names: Names, collection: str, backend: Backend
) -> None:
    put_job(client, names, "historic", simple_job())
    ids = insert_history(backend, names, "historic", HISTORY)

    listed = list(client.jobs.list_job_history(names.resource_group, collection, "historic"))

    assert [item.name for item in listed] == [f"{collection}/historic/{i}" for i in reversed(ids)]
    assert sorted(ids, reverse=False) == list(reversed(ids))  # ids sort newest first as text
    for item, entry, hid in zip(listed, reversed(HISTORY), reversed(ids), strict=True):
        assert item.id == f"{names.job_path('historic')}/history/{hid}"
        assert item.type == HISTORY_TYPE
        properties = item.properties
        assert properties.start_time == entry.start
        assert properties.end_time == entry.start + timedelta(seconds=2)
        assert properties.expected_execution_time == entry.start - timedelta(seconds=1)
        assert properties.action_name == entry.action_name
        assert properties.status == entry.status
        assert properties.message == entry.message
        assert properties.retry_count == entry.retry_count
        assert properties.repeat_count == entry.repeat_count


def test_job_history_pages_and_filters_by_status(
    client: SchedulerManagementClient, names: Names, collection: str, backend: Backend
) -> None:
    put_job(client, names, "historic", simple_job())
    put_job(client, names, "other", simple_job())
    ids = insert_history(backend, names, "historic", HISTORY)
    insert_history(backend, names, "other", [Entry(NOW, "Failed", message="not this job")])
    newest_first = list(zip(reversed(ids), reversed(HISTORY), strict=True))

    pager = client.jobs.list_job_history(names.resource_group, collection, "historic", top=4)
    pages = [[item.name.rsplit("/", 1)[1] for item in page] for page in pager.by_page()]
    failed = list(
        client.jobs.list_job_history(names.resource_group, collection, "historic", top=2, filter="status eq 'Failed'")
    )
    postponed = list(
        client.jobs.list_job_history(names.resource_group, collection, "historic", filter="status eq 'Postponed'")
    )
    skipped = list(client.jobs.list_job_history(names.resource_group, collection, "historic", top=2, skip=4))

    assert pages == [list(reversed(ids))[:4], list(reversed(ids))[4:]]
    assert [item.name.rsplit("/", 1)[1] for item in failed] == [i for i, e in newest_first if e.status == "Failed"]
    assert [item.properties.message for item in failed] == [
        "error action failed",
        "retry 1 failed",
        "Http Action - 500 Internal Server Error",
    ]
    assert all(item.properties.status == "Failed" for item in failed)
    assert [item.properties.status for item in postponed] == ["Postponed"]
    assert [item.name.rsplit("/", 1)[1] for item in skipped] == list(reversed(ids))[4:]


def test_job_history_of_a_new_job_is_empty(client: SchedulerManagementClient, names: Names, collection: str) -> None:
    put_job(client, names, "fresh", simple_job())

    assert list(client.jobs.list_job_history(names.resource_group, collection, "fresh")) == []
    with pytest.raises(ResourceNotFoundError):
        list(client.jobs.list_job_history(names.resource_group, collection, "missing"))
