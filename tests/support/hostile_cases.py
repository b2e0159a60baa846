"""The hostile-input corpus (issue 13): requests an attacker or a careless client sends, as data.

Each case is a dict ``{"id", "method", "path", "query", "headers", "body", "status", "code"}``:

- ``path`` may hold ``{rg}`` (the resource group's provider path), ``{jc}`` (the victim collection's path),
  ``{job}`` (the victim job's path) and ``{sub}`` (the subscription); it is sent as is (percent-escapes
  included, dot segments not normalised);
- ``body`` is the exact request body text (``None``: no body) — raw, so that it can hold what no JSON
  encoder writes (``NaN``, lone surrogates, 40-level nesting);
- ``status`` is the expected status, or ``"4xx"`` for any client error; ``code`` the expected ARM error
  code, or ``None`` when any code will do.

Every case must be answered with a client error in the ARM error shape and change nothing stored. The
field cases put each hostile value into every field of every operation's body, one at a time.
"""

from __future__ import annotations

import copy
import json
from typing import Any

API = "2016-03-01"
LOOPBACK = "http://127.0.0.1:9/hostile"
FUTURE = "2030-01-01T00:00:00Z"

# ------------------------------------------------------------------------------------------ base bodies
HTTP_ACTION: dict[str, Any] = {
    "type": "Http",
    "request": {
        "uri": LOOPBACK,
        "method": "POST",
        "body": "hello",
        "headers": {"x-test": "1"},
        "authentication": {"type": "Basic", "username": "user", "password": "secret-pass"},
    },
    "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT30S", "retryCount": 2},
    "errorAction": {"type": "Http", "request": {"uri": LOOPBACK, "method": "GET"}},
}
OAUTH_ACTION: dict[str, Any] = {
    "type": "Http",
    "request": {
        "uri": LOOPBACK,
        "method": "GET",
        "authentication": {
            "type": "ActiveDirectoryOAuth",
            "tenant": "tenant",
            "audience": "https://management.core.windows.net/",
            "clientId": "client",
            "secret": "client-secret",
        },
    },
}
QUEUE_ACTION: dict[str, Any] = {
    "type": "StorageQueue",
    "queueMessage": {"storageAccount": "account", "queueName": "queue", "sasToken": "?sv=1", "message": "hi"},
}
SERVICE_BUS_QUEUE_ACTION: dict[str, Any] = {
    "type": "ServiceBusQueue",
    "serviceBusQueueMessage": {
        "authentication": {"sasKey": "key", "sasKeyName": "RootManageSharedAccessKey", "type": "SharedAccessKey"},
        "brokeredMessageProperties": {
            "contentType": "text/plain",
            "correlationId": "c",
            "label": "l",
            "messageId": "m",
            "scheduledEnqueueTimeUtc": FUTURE,
            "timeToLive": "PT1H",
            "to": "t",
        },
        "customMessageProperties": {"p": "v"},
        "message": "hi",
        "namespace": "hostile-ns",
        "transportType": "AMQP",
        "queueName": "q",
    },
}
SERVICE_BUS_TOPIC_ACTION: dict[str, Any] = {
    "type": "ServiceBusTopic",
    "serviceBusTopicMessage": {
        "authentication": {"sasKey": "key", "sasKeyName": "RootManageSharedAccessKey", "type": "SharedAccessKey"},
        "message": "hi",
        "namespace": "hostile-ns",
        "topicPath": "topic",
    },
}
RECURRENCE: dict[str, Any] = {
    "frequency": "Month",
    "interval": 1,
    "count": 10,
    "endTime": "2031-01-01T00:00:00Z",
    "schedule": {
        "hours": [5],
        "minutes": [15],
        "monthDays": [1],
        "monthlyOccurrences": [{"day": "Monday", "occurrence": 1}],
    },
}
WEEKLY: dict[str, Any] = {"frequency": "Week", "interval": 1, "schedule": {"weekDays": ["Monday"]}}


def job(action: dict[str, Any], recurrence: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"properties": {"startTime": FUTURE, "action": action, "state": "Enabled"}}
    body["properties"]["recurrence"] = recurrence or {"frequency": "Hour", "interval": 1}
    return body


COLLECTION: dict[str, Any] = {
    "location": "westus",
    "tags": {"team": "a"},
    "properties": {
        "sku": {"name": "Standard"},
        "state": "Enabled",
        "quota": {"maxJobCount": 10, "maxJobOccurrence": 100, "maxRecurrence": {"frequency": "Minute", "interval": 1}},
    },
}
PREVIEW: dict[str, Any] = {"startTime": FUTURE, "now": "2029-12-31T00:00:00Z", "count": 5, "recurrence": RECURRENCE}

# Markers replaced by raw JSON text after encoding (no encoder writes these).
RAW = {
    "<<surrogate>>": '"a\\ud800b"',
    "<<low-surrogate>>": '"\\udc00"',
    "<<nan>>": "NaN",
    "<<infinity>>": "-Infinity",
    "<<1e400>>": "1e400",
    "<<deep>>": "[" * 40 + "]" * 40,
    "<<huge-digits>>": "9" * 5000,
}

# Hostile values put into every field; each must be refused wherever it lands.
ANY_FIELD: dict[str, Any] = {
    "nul": "a\u0000b",
    "escape-char": "a\u001bb",
    "bell-char": "\u0007",
    "del-char": "a\u007fb",
    "surrogate": "<<surrogate>>",
    "low-surrogate": "<<low-surrogate>>",
    "nan": "<<nan>>",
    "infinity": "<<infinity>>",
    "1e400": "<<1e400>>",
    "deep": "<<deep>>",
    "2^64": 2**64,
    "-2^63-1": -(2**63) - 1,
    "huge-digits": "<<huge-digits>>",
    "array-of-objects": ["text", {"nested": {"x": 1}}],
}
# Extra values for fields that hold a date, a duration, an integer, a URI or a single line.
DATES = {
    "+14-at-year-1": "0001-01-01T00:00:00+14:00",
    "-14-at-year-9999": "9999-12-31T23:59:59-14:00",
    "year-10000": "10000-01-01T00:00:00Z",
    "year-0": "0000-01-01T00:00:00Z",
    "month-13": "2030-13-01T00:00:00Z",
    "not-a-date": "tomorrow",
    "number": 1700000000,
    "arabic-indic-digits": "\u0662\u0660\u0663\u0660-01-01T00:00:00Z",
    "arabic-indic-seconds": "2030-01-01T00:00:0\u0663Z",
    "fullwidth-digit": "2030-01-01T00:00:0\uff13Z",
    "boolean": True,
}
DURATIONS = {
    "years-overflow": "P99999999999Y",
    "seconds-overflow": "PT99999999999999999999S",
    "days-overflow-timespan": "99999999999.00:00:00",
    "digits-1e400": "P" + "1" * 400 + "D",
    "10000-years": "P10000Y",
    "negative": "-PT1S",
    "empty": "",
    "nonsense": "PTXS",
    "long-text": "P" + "1" * 200,
    "arabic-indic-digits": "PT\u0663\u0660S",
    "timespan-arabic-indic": "00:00:\u0663\u0660",
    "devanagari-days": "P\u0967D",
    "boolean": True,
}
INTEGERS = {
    "2^63": 2**63,
    "2^31": 2**31,
    "-1": -1,
    "fraction": 1.5,
    "text": "ten",
    "true": True,
    "false": False,
    "arabic-indic-text": "\u0663",
}
# A Service Bus SAS key name goes into the token the SDK signs; these would add connection-string settings
# or are not names at all (docs/reference/security.md#job-values-that-name-endpoints).
SAS_KEY_NAMES = {
    "semicolon-endpoint": "a;Endpoint=sb://127.0.0.1:1/;UseDevelopmentEmulator=true",
    "equals": "name=value",
    "newline": "a\nb",
    "c1-control": "a\u0085b",
    "257-chars": "k" * 257,
    "empty": "",
}
# Storage account names become a URL host: Azure's rule, 3 to 24 lower-case letters and digits.
STORAGE_ACCOUNTS = {
    "upper-case": "Account1",
    "two-chars": "ab",
    "25-chars": "a" * 25,
    "hyphen": "my-account",
    "host-with-path": "evil.example/x?",
    "user-info": "a@evil.example",
    "port": "account:1",
    "non-ascii-letter": "accoünt",
}
URIS = {
    "port-99999": "http://127.0.0.1:99999/x",
    "port-0": "http://127.0.0.1:0/x",
    "nul": "http://127.0.0.1:9/a\u0000b",
    "newline": "http://127.0.0.1:9/a\nb",
    "crlf-header-injection": "http://127.0.0.1:9/a\r\nX-Injected: 1",
    "tab": "http://127.0.0.1:9/a\tb",
    "space": "http://127.0.0.1:9/a b",
    "ftp": "ftp://127.0.0.1/x",
    "no-host": "http:///x",
    "bracket": "http://[::1/x",
    "relative": "/x",
    "javascript": "javascript:alert(1)",
    "too-long": "http://127.0.0.1:9/" + "a" * 2100,
}
LINES = {"newline": "a\nb", "carriage-return": "a\rb", "tab": "a\tb", "empty": ""}

# (operation, base body, [(field path, extra value kinds)])
_JOB_FIELDS: list[tuple[dict[str, Any], list[tuple[str, tuple[str, ...]]]]] = [
    (
        job(HTTP_ACTION, RECURRENCE),
        [
            ("properties", ()),
            ("properties.startTime", ("date",)),
            ("properties.state", ()),
            ("properties.action", ()),
            ("properties.action.type", ()),
            ("properties.action.request", ()),
            ("properties.action.request.uri", ("uri",)),
            ("properties.action.request.method", ()),
            ("properties.action.request.body", ()),
            ("properties.action.request.headers", ()),
            ("properties.action.request.headers.x-test", ("line",)),
            ("properties.action.request.authentication", ()),
            ("properties.action.request.authentication.type", ()),
            ("properties.action.request.authentication.username", ()),
            ("properties.action.request.authentication.password", ()),
            ("properties.action.retryPolicy", ()),
            ("properties.action.retryPolicy.retryType", ()),
            ("properties.action.retryPolicy.retryInterval", ("duration",)),
            ("properties.action.retryPolicy.retryCount", ("integer",)),
            ("properties.action.errorAction", ()),
            ("properties.action.errorAction.type", ()),
            ("properties.action.errorAction.request.uri", ("uri",)),
            ("properties.action.errorAction.request.method", ()),
            ("properties.action.errorAction.retryPolicy.retryCount", ("integer",)),
            ("properties.action.errorAction.retryPolicy.retryInterval", ("duration",)),
            ("properties.recurrence", ()),
            ("properties.recurrence.frequency", ()),
            ("properties.recurrence.interval", ("integer",)),
            ("properties.recurrence.count", ("integer",)),
            ("properties.recurrence.endTime", ("date",)),
            ("properties.recurrence.schedule", ()),
            ("properties.recurrence.schedule.hours", ("integer",)),
            ("properties.recurrence.schedule.minutes", ("integer",)),
            ("properties.recurrence.schedule.monthDays", ("integer",)),
            ("properties.recurrence.schedule.monthlyOccurrences", ()),
            ("properties.recurrence.schedule.monthlyOccurrences.0.day", ()),
            ("properties.recurrence.schedule.monthlyOccurrences.0.occurrence", ("integer",)),
        ],
    ),
    (
        job(HTTP_ACTION, WEEKLY),
        [("properties.recurrence.schedule.weekDays", ()), ("properties.recurrence.schedule.weekDays.0", ())],
    ),
    (
        job(OAUTH_ACTION),
        [
            ("properties.action.request.authentication.tenant", ()),
            ("properties.action.request.authentication.audience", ()),
            ("properties.action.request.authentication.clientId", ()),
            ("properties.action.request.authentication.secret", ()),
        ],
    ),
    (
        job(QUEUE_ACTION),
        [
            ("properties.action.queueMessage", ()),
            ("properties.action.queueMessage.storageAccount", ("line", "account")),
            ("properties.action.queueMessage.queueName", ("line",)),
            ("properties.action.queueMessage.sasToken", ()),
            ("properties.action.queueMessage.message", ()),
        ],
    ),
    (
        job(SERVICE_BUS_QUEUE_ACTION),
        [
            ("properties.action.serviceBusQueueMessage.authentication.sasKey", ()),
            ("properties.action.serviceBusQueueMessage.authentication.sasKeyName", ("key-name",)),
            ("properties.action.serviceBusQueueMessage.authentication.type", ()),
            ("properties.action.serviceBusQueueMessage.brokeredMessageProperties.contentType", ()),
            ("properties.action.serviceBusQueueMessage.brokeredMessageProperties.correlationId", ()),
            ("properties.action.serviceBusQueueMessage.brokeredMessageProperties.label", ()),
            ("properties.action.serviceBusQueueMessage.brokeredMessageProperties.messageId", ()),
            ("properties.action.serviceBusQueueMessage.brokeredMessageProperties.scheduledEnqueueTimeUtc", ("date",)),
            ("properties.action.serviceBusQueueMessage.brokeredMessageProperties.timeToLive", ("duration",)),
            ("properties.action.serviceBusQueueMessage.brokeredMessageProperties.to", ()),
            ("properties.action.serviceBusQueueMessage.customMessageProperties", ()),
            ("properties.action.serviceBusQueueMessage.customMessageProperties.p", ()),
            ("properties.action.serviceBusQueueMessage.message", ()),
            ("properties.action.serviceBusQueueMessage.namespace", ("line",)),
            ("properties.action.serviceBusQueueMessage.transportType", ()),
            ("properties.action.serviceBusQueueMessage.queueName", ("line",)),
        ],
    ),
    (
        job(SERVICE_BUS_TOPIC_ACTION),
        [
            ("properties.action.serviceBusTopicMessage.topicPath", ("line",)),
            ("properties.action.serviceBusTopicMessage.authentication.sasKeyName", ("key-name",)),
        ],
    ),
]
_COLLECTION_FIELDS: list[tuple[str, tuple[str, ...]]] = [
    ("location", ("line",)),
    ("tags", ()),
    ("tags.team", ("line",)),
    ("properties", ()),
    ("properties.sku", ()),
    ("properties.sku.name", ()),
    ("properties.state", ()),
    ("properties.quota", ()),
    ("properties.quota.maxJobCount", ("integer",)),
    ("properties.quota.maxJobOccurrence", ("integer",)),
    ("properties.quota.maxRecurrence.frequency", ()),
    ("properties.quota.maxRecurrence.interval", ("integer",)),
]
_PREVIEW_FIELDS: list[tuple[str, tuple[str, ...]]] = [
    ("startTime", ("date",)),
    ("now", ("date",)),
    ("count", ("integer",)),
    ("recurrence.frequency", ()),
    ("recurrence.interval", ("integer",)),
    ("recurrence.endTime", ("date",)),
    ("recurrence.count", ("integer",)),
    ("recurrence.schedule.minutes", ("integer",)),
    ("recurrence.schedule.hours", ("integer",)),
    ("recurrence.schedule.monthDays", ("integer",)),
    ("recurrence.schedule.monthlyOccurrences.0.occurrence", ("integer",)),
]
_EXTRA = {
    "date": DATES,
    "duration": DURATIONS,
    "integer": INTEGERS,
    "uri": URIS,
    "line": LINES,
    "key-name": SAS_KEY_NAMES,
    "account": STORAGE_ACCOUNTS,
}
# Values of an extra kind that are valid in some fields of that kind (an integer of -1 is a valid
# monthDays entry, 2^31 fits no field) are left out where they would be accepted.
_ACCEPTED = {
    ("properties.recurrence.schedule.monthDays", "-1"),
    ("properties.recurrence.schedule.monthlyOccurrences.0.occurrence", "-1"),
    ("recurrence.schedule.minutes", "-1"),
    ("recurrence.schedule.monthDays", "-1"),
    ("recurrence.schedule.monthlyOccurrences.0.occurrence", "-1"),
    ("tags.team", "empty"),  # an empty tag value is valid
}


def _set(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``body`` with ``value`` at the dotted ``path`` (numeric parts index lists)."""
    result = copy.deepcopy(body)
    node: Any = result
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return result


def encode(body: Any) -> str:
    """JSON text of ``body`` with the RAW markers replaced by their raw text."""
    text = json.dumps(body)
    for marker, raw in RAW.items():
        text = text.replace(json.dumps(marker), raw)
    return text


def _case(
    case_id: str,
    method: str,
    path: str,
    body: str | None = None,
    *,
    status: int | str = "4xx",
    code: str | None = None,
    query: str = f"api-version={API}",
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "id": case_id,
        "method": method,
        "path": path,
        "query": query,
        "headers": {"content-type": "application/json", **(headers or {})} if body is not None else dict(headers or {}),
        "body": body,
        "status": status,
        "code": code,
    }


def _field_cases() -> list[dict[str, Any]]:
    cases = []
    targets: list[tuple[str, str, str, dict[str, Any], list[tuple[str, tuple[str, ...]]]]] = []
    for index, (body, fields) in enumerate(_JOB_FIELDS):
        targets.append((f"job{index}", "PUT", "{job}", body, fields))
        targets.append((f"new-job{index}", "PUT", "{jc}/jobs/fresh-job", body, fields))
    targets.append(("collection", "PUT", "{jc}", COLLECTION, _COLLECTION_FIELDS))
    targets.append(("new-collection", "PUT", "{rg}/jobCollections/fresh-collection", COLLECTION, _COLLECTION_FIELDS))
    targets.append(("preview", "POST", "/_emulator/recurrence/preview", PREVIEW, _PREVIEW_FIELDS))
    for name, method, path, body, fields in targets:
        for field, kinds in fields:
            values = dict(ANY_FIELD)
            for kind in kinds:
                values.update({f"{kind}:{k}": v for k, v in _EXTRA[kind].items()})
            for value_name, value in values.items():
                if (field, value_name.split(":")[-1]) in _ACCEPTED:
                    continue
                # new-* targets get the generic values only, to keep the corpus's size (and time) modest
                if name.startswith("new-") and ":" in value_name:
                    continue
                cases.append(_case(f"{name}:{field}={value_name}", method, path, encode(_set(body, field, value))))
    # PATCH: a hostile value in a partial body, against the victims.
    for field, value_name in (
        ("properties.action.request.uri", "nul"),
        ("properties.startTime", "surrogate"),
        ("properties.recurrence.count", "2^64"),
        ("properties.recurrence.interval", "nan"),
        ("properties.action.request.headers", "deep"),
    ):
        cases.append(
            _case(f"patch-job:{field}={value_name}", "PATCH", "{job}", encode(_set({}, field, ANY_FIELD[value_name])))
        )
    for field, value in (
        ("properties.action.retryPolicy.retryInterval", "P99999999999Y"),
        ("properties.startTime", "0001-01-01T00:00:00+14:00"),
        ("properties.recurrence.count", 2**63),
        ("properties.action.request.uri", "http://127.0.0.1:99999/"),
    ):
        cases.append(_case(f"patch-job:{field}={value}", "PATCH", "{job}", encode(_set({}, field, value))))
    for field, value_name in (("location", "nul"), ("tags", "surrogate"), ("properties.quota.maxJobCount", "2^64")):
        cases.append(
            _case(
                f"patch-collection:{field}={value_name}",
                "PATCH",
                "{jc}",
                encode(_set({}, field, ANY_FIELD[value_name])),
            )
        )
    return cases


def _body_cases() -> list[dict[str, Any]]:
    """Whole bodies that are not a JSON object, or not JSON at all."""
    bodies = {
        "empty": "",
        "whitespace": "   ",
        "null": "null",
        "array": "[]",
        "string": '"x"',
        "number": "1",
        "truncated": '{"location": "westus"',
        "trailing-garbage": '{"location": "westus"} x',
        "single-quotes": "{'location': 'westus'}",
        "comment": '{"location": "westus" /* c */}',
        "nan-top": "NaN",
        "deep-500": "[" * 500 + "]" * 500,
        "deep-50000": "[" * 50000 + "]" * 50000,
        "deep-objects": '{"a":' * 33 + "1" + "}" * 33,
        "latin1": '{"location": "caf\udce9"}',  # byte 0xE9 alone (written with surrogateescape)
        "bom": '\ufeff{"location": "westus"}',
        "surrogate-key": '{"\\ud800": 1, "location": "westus"}',
        "nul-key": '{"a\\u0000": 1, "location": "westus"}',
        "huge-int-top": '{"location": "westus", "x": ' + "9" * 5000 + "}",
        "1e400-top": '{"location": "westus", "x": 1e400}',
    }
    cases = []
    for name, text in bodies.items():
        for target, method, path in (
            ("collection", "PUT", "{jc}"),
            ("collection-patch", "PATCH", "{jc}"),
            ("job", "PUT", "{job}"),
            ("job-patch", "PATCH", "{job}"),
            ("preview", "POST", "/_emulator/recurrence/preview"),
        ):
            cases.append(_case(f"body-{name}:{target}", method, path, text))
    return cases


def _name_cases() -> list[dict[str, Any]]:
    """Path segments that cannot name a resource, on every operation."""
    bad = {
        "dot": ".",
        "dotdot": "..",
        "encoded-dotdot": "%2e%2e",
        "trailing-dot": "abc.",
        "leading-dash": "-abc",
        "leading-underscore": "_abc",
        "nul": "a%00b",
        "newline": "a%0Ab",
        "carriage-return": "a%0Db",
        "question": "a%3Fb",
        "hash": "a%23b",
        "backslash": "a%5Cb",
        "space": "a%20b",
        "quote": "a%22b",
        "angle": "a%3Cscript%3E",
        "unicode": "caf%C3%A9",
        "101-chars": "n" * 101,
        "surrogate-escape": "a%ED%A0%80b",
    }
    cases = []
    job_body = encode(job(HTTP_ACTION))
    collection_body = encode(COLLECTION)
    for name, segment in bad.items():
        create = 400
        cases += [
            _case(
                f"name-{name}:put-collection", "PUT", "{rg}/jobCollections/" + segment, collection_body, status=create
            ),
            _case(f"name-{name}:get-collection", "GET", "{rg}/jobCollections/" + segment, status=404),
            _case(f"name-{name}:delete-collection", "DELETE", "{rg}/jobCollections/" + segment, status=404),
            _case(
                f"name-{name}:patch-collection", "PATCH", "{rg}/jobCollections/" + segment, collection_body, status=404
            ),
            _case(f"name-{name}:enable-collection", "POST", "{rg}/jobCollections/" + segment + "/enable", status=404),
            _case(f"name-{name}:put-job", "PUT", "{jc}/jobs/" + segment, job_body, status=create),
            _case(f"name-{name}:get-job", "GET", "{jc}/jobs/" + segment, status=404),
            _case(f"name-{name}:delete-job", "DELETE", "{jc}/jobs/" + segment, status=404),
            _case(f"name-{name}:patch-job", "PATCH", "{jc}/jobs/" + segment, job_body, status=404),
            _case(f"name-{name}:run-job", "POST", "{jc}/jobs/" + segment + "/run", status=404),
            _case(f"name-{name}:history", "GET", "{jc}/jobs/" + segment + "/history", status=404),
        ]
        if name != "leading-underscore":  # resource group names may start with '_' (Azure's rule)
            cases.append(
                _case(
                    f"name-{name}:put-in-group",
                    "PUT",
                    f"/subscriptions/{{sub}}/resourceGroups/{segment}/providers/Microsoft.Scheduler/jobCollections/x",
                    collection_body,
                    status=create,
                )
            )
    return cases


def _content_type_cases() -> list[dict[str, Any]]:
    kinds = {
        "text-plain": "text/plain",
        "form": "application/x-www-form-urlencoded",
        "multipart": "multipart/form-data; boundary=x",
        "xml": "application/xml",
        "json-suffix-typo": "application/jsonx",
        "empty": "",
        "garbage": "\u00ff\u00fe",
    }
    cases = []
    job_body = encode(job(HTTP_ACTION))
    for name, value in kinds.items():
        for target, method, path, body in (
            ("put-collection", "PUT", "{rg}/jobCollections/fresh-collection", encode(COLLECTION)),
            ("patch-collection", "PATCH", "{jc}", '{"tags": {"changed": "yes"}}'),
            ("put-job", "PUT", "{jc}/jobs/fresh-job", job_body),
            ("patch-job", "PATCH", "{job}", '{"properties": {"state": "Disabled"}}'),
            ("run-job", "POST", "{job}/run", ""),
            ("disable-collection", "POST", "{jc}/disable", ""),
            ("preview", "POST", "/_emulator/recurrence/preview", encode(PREVIEW)),
        ):
            cases.append(
                _case(
                    f"content-type-{name}:{target}",
                    method,
                    path,
                    body,
                    status=415,
                    code="UnsupportedMediaType",
                    headers={"content-type": value},
                )
            )
    return cases


def _query_cases() -> list[dict[str, Any]]:
    lists = {
        "jobs": "{jc}/jobs",
        "collections": "{rg}/jobCollections",
        "subscription": "/subscriptions/{sub}/providers/Microsoft.Scheduler/jobCollections",
        "history": "{job}/history",
    }
    queries = {
        "top-2^63": "$top=9223372036854775808",
        "skip-2^63": "$skip=9223372036854775808",
        "skip-2^64": "$skip=18446744073709551616",
        "skip-digits": "$skip=" + "9" * 5000,
        "skip-negative": "$skip=-1",
        "top-zero": "$top=0",
        "top-text": "$top=ten",
        "top-unicode-digit": "$top=%D9%A3",
        "skip-float": "$skip=1.5",
        "filter-junk": "$filter=state%20eq%20%27x%27%20or%201%3D1",
        "filter-nul": "$filter=state%20eq%20%27a%00%27",
    }
    cases = []
    for list_name, path in lists.items():
        for name, query in queries.items():
            if list_name != "jobs" and name.startswith("filter"):
                continue
            cases.append(
                _case(f"query-{name}:{list_name}", "GET", path, status=400, query=f"api-version={API}&{query}")
            )
    for name, query in {
        "missing": "",
        "unknown": "api-version=2099-01-01",
        "nul": "api-version=2016-03-01%00",
        "twice-bad": "api-version=x&api-version=2016-03-01",
    }.items():
        cases.append(_case(f"api-version-{name}:get-job", "GET", "{job}", status=400, query=query))
        cases.append(
            _case(f"api-version-{name}:put-job", "PUT", "{job}", encode(job(HTTP_ACTION)), status=400, query=query)
        )
    return cases


def _size_cases() -> list[dict[str, Any]]:
    big = encode({"location": "westus", "tags": {"t": "x" * 70_000}})
    job_big = encode(_set(job(HTTP_ACTION), "properties.action.request.body", "x" * 60_000))
    definition = encode(
        _set(job(HTTP_ACTION), "properties.action.request.headers", {f"h{i}": "v" * 300 for i in range(49)})
    )
    return [
        _case("size-body-70k:put-collection", "PUT", "{jc}", big, status=413, code="RequestEntityTooLarge"),
        _case(
            "size-body-70k:put-job",
            "PUT",
            "{job}",
            encode(_set(job(HTTP_ACTION), "x", "y" * 70_000)),
            status=413,
            code="RequestEntityTooLarge",
        ),
        _case("size-body-60k:put-job", "PUT", "{job}", job_big),
        _case("size-definition-over-16k:put-job", "PUT", "{job}", definition),
        _case(
            "size-monthly-occurrences:preview",
            "POST",
            "/_emulator/recurrence/preview",
            encode(
                _set(PREVIEW, "recurrence.schedule.monthlyOccurrences", [{"day": "Monday", "occurrence": 1}] * 3000)
            ),
            status=413,
        ),
        _case(
            "size-count-1001:preview",
            "POST",
            "/_emulator/recurrence/preview",
            encode(_set(PREVIEW, "count", 1001)),
            status=400,
        ),
        _case("size-head-20k:get-job", "GET", "{job}", status=431, headers={"x-big": "h" * 20_000}),
    ]


def _semantic_cases() -> list[dict[str, Any]]:
    """Values that parse but break a rule of the operation."""
    cases = []
    for name, recurrence in {
        "interval-zero": {"frequency": "Minute", "interval": 0},
        "interval-over": {"frequency": "Day", "interval": 549},
        "week-days-on-day": {"frequency": "Day", "schedule": {"weekDays": ["Monday"]}},
        "month-day-zero": {"frequency": "Month", "schedule": {"monthDays": [0]}},
        "occurrence-six": {
            "frequency": "Month",
            "schedule": {"monthlyOccurrences": [{"day": "Monday", "occurrence": 6}]},
        },
        "hours-24": {"frequency": "Day", "schedule": {"hours": [24]}},
        "frequency-year": {"frequency": "Year"},
        "end-before-now": {"frequency": "Hour", "endTime": "2001-01-01T00:00:00Z"},
    }.items():
        cases.append(
            _case(
                f"rule-{name}:put-job",
                "PUT",
                "{job}",
                encode(_set(job(HTTP_ACTION), "properties.recurrence", recurrence)),
            )
        )
    for name, action in {
        "https-with-http-uri": {"type": "Https", "request": {"uri": LOOPBACK, "method": "GET"}},
        "payload-mismatch": {"type": "Http", "queueMessage": QUEUE_ACTION["queueMessage"]},
        "basic-without-password": {
            "type": "Http",
            "request": {"uri": LOOPBACK, "method": "GET", "authentication": {"type": "Basic", "username": "u"}},
        },
        "header-name-space": {"type": "Http", "request": {"uri": LOOPBACK, "method": "GET", "headers": {"a b": "1"}}},
        "header-name-colon": {"type": "Http", "request": {"uri": LOOPBACK, "method": "GET", "headers": {"a:b": "1"}}},
        "header-value-crlf": {
            "type": "Http",
            "request": {"uri": LOOPBACK, "method": "GET", "headers": {"a": "1\r\nX-Evil: 1"}},
        },
        "method-connect": {"type": "Http", "request": {"uri": LOOPBACK, "method": "CONNECT"}},
        "pfx-not-base64": {
            "type": "Http",
            "request": {
                "uri": LOOPBACK,
                "method": "GET",
                "authentication": {"type": "ClientCertificate", "pfx": "!!!", "password": "x"},
            },
        },
        "retry-count-21": {
            **HTTP_ACTION,
            "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT30S", "retryCount": 21},
        },
        "retry-interval-1s": {
            **HTTP_ACTION,
            "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT1S", "retryCount": 1},
        },
    }.items():
        cases.append(
            _case(f"rule-{name}:put-job", "PUT", "{job}", encode(_set(job(HTTP_ACTION), "properties.action", action)))
        )
    cases.append(
        _case(
            "rule-start-far-future:put-job",
            "PUT",
            "{job}",
            encode(_set(job(HTTP_ACTION), "properties.startTime", "9999-12-31T00:00:00Z")),
        )
    )
    for name, now in {
        "year-9999": "9999-12-31T00:00:00Z",
        "year-9998": "9998-12-31T00:00:00Z",
        "plus-14-year-1": "0001-01-01T00:00:00+14:00",
    }.items():
        cases.append(
            _case(
                f"preview-now-{name}",
                "POST",
                "/_emulator/recurrence/preview",
                encode({"now": now, "recurrence": {"frequency": "Minute"}, "count": 5, "startTime": now}),
            )
        )
    cases.append(
        _case(
            "rule-sku-unknown:put-collection",
            "PUT",
            "{jc}",
            encode(_set(COLLECTION, "properties.sku.name", "Platinum")),
        )
    )
    cases.append(
        _case(
            "rule-free-quota:put-collection", "PUT", "{jc}", encode(_set(COLLECTION, "properties.quota.maxJobCount", 0))
        )
    )
    cases.append(_case("method-not-allowed:post-job", "POST", "{job}", "{}", status=405))
    cases.append(_case("unknown-route:put", "PUT", "{job}/unknown", "{}", status=404))
    return cases


CASES: list[dict[str, Any]] = (
    _field_cases()
    + _body_cases()
    + _name_cases()
    + _content_type_cases()
    + _query_cases()
    + _size_cases()
    + _semantic_cases()
)
