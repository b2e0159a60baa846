"""The token service's rules that need no server: which paths it claims (and leaves to the classic and ARM
routes), and how operator-given principals are read."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_emulator.api.classic.routes import resolve
from scheduler_emulator.api.identity.paths import find, is_open
from scheduler_emulator.api.identity.principals import DEFAULT_SUBSCRIPTION, load_principals
from scheduler_emulator.config import ConfigError


@pytest.mark.parametrize(
    ("path", "name", "arguments"),
    [
        ("/contoso.example/v2.0/.well-known/openid-configuration", "openid_v2", ["contoso.example"]),
        ("/t/.well-known/OpenID-Configuration", "openid_v1", ["t"]),
        ("/t/discovery/v2.0/keys", "keys_v2", ["t"]),
        ("/t/oauth2/V2.0/token", "token_v2", ["t"]),
        ("/t/oauth2/token/", "token_v1", ["t"]),
        ("/metadata/endpoints", "metadata", []),
        ("//metadata/endpoints", "metadata", []),
        ("/Subscriptions", "subscriptions", []),
        ("/subscriptions/s-1/LOCATIONS", "locations", ["s-1"]),
        ("/tenants", "tenants", []),
    ],
)
def test_paths_it_claims(path: str, name: str, arguments: list[str]) -> None:
    found = find(path)
    assert found is not None
    assert (found[0].name, found[1]) == (name, arguments)


@pytest.mark.parametrize(
    "path",
    [
        "/sub/cloudservices/cs",  # classic
        "/sub/cloudservices/cs/resources/scheduler/~/JobCollections/jc/jobs",
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/jc",  # ARM
        "/subscriptions/s/providers/Microsoft.Scheduler",
        "/_emulator/health",
        "//oauth2/token",  # no tenant
        "/t/oauth2/v2.0/token/extra",
        "///metadata/endpoints",
    ],
)
def test_paths_it_leaves_alone(path: str) -> None:
    assert find(path) is None


def test_the_classic_route_does_not_claim_token_paths() -> None:
    for path in ("/t/oauth2/token", "/t/oauth2/v2.0/token", "/t/v2.0/.well-known/openid-configuration"):
        assert resolve("POST", path) is None


def test_only_the_token_service_and_metadata_are_open() -> None:
    assert is_open("/t/oauth2/v2.0/token") and is_open("/metadata/endpoints") and is_open("/t/discovery/keys")
    assert not is_open("/subscriptions") and not is_open("/tenants") and not is_open("/subscriptions/s/locations")


def test_principals_from_the_flag_and_a_file(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('[{"clientId": "c", "secret": "x:y", "subscription": "s1", "displayName": "C"}]')
    principals = load_principals("a:s1:tenant-a:sub-a, b:s2\nc2:s3::sub-c", tmp_path / "p.json")
    assert len(principals) == 4
    a, b, c2, c = (principals.find(name) for name in ("A", "b", "c2", "c"))
    assert a and (a.secret, a.tenant, a.subscription) == ("s1", "tenant-a", "sub-a")
    assert b and (b.tenant, b.subscription) == (None, DEFAULT_SUBSCRIPTION) and b.signs_in_to("any")
    assert c2 and (c2.tenant, c2.subscription) == (None, "sub-c")
    assert c and c.secret == "x:y" and c.display_name == "C"
    assert a.object_id == principals.find("a").object_id != b.object_id  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("flag", "document", "message"),
    [
        ("a", None, "entry 1 must be CLIENT_ID:SECRET"),
        ("a:b, c:", None, "entry 2 must be"),
        ("a:b:t:s:extra", None, "entry 1 must be"),
        ("a:b, A:c", None, "configured twice"),
        ("bad/id:x", None, "the client id must be"),
        (None, '{"principals": [{"clientId": "a"}]}', "give it a 'secret', a 'certificate' or both"),
        (None, '{"principals": [{"clientId": "a", "secret": "s", "role": "x"}]}', "unknown field(s) role"),
        (None, '{"principals": {"a": 1}}', "must hold"),
        (None, "not json", "not valid JSON"),
        (
            None,
            '{"principals": [], "assignments": [{"principalId": "o", "role": "Owner", "scope": "/tenants/x"}]}',
            "the scope '/tenants/x' is not '/', a subscription, a resource group or a job collection",
        ),
        (
            None,
            '{"principals": [{"clientId": "a", "secret": "s", "roles": [{"role": "Boss", "scope": "/"}]}]}',
            "there is no built-in role 'Boss'",
        ),
    ],
)
def test_bad_principals_are_named_without_their_secret(
    tmp_path: Path, flag: str | None, document: str | None, message: str
) -> None:
    file = None
    if document is not None:
        file = tmp_path / "p.json"
        file.write_text(document)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as raised:
        load_principals(flag, file)
    assert ":b" not in str(raised.value) and "x:y" not in str(raised.value)


def test_a_principals_file_gives_roles_at_the_root(tmp_path: Path) -> None:
    """"/" is assignable by the configuration (docs/reference/authorization.md#the-root-scope)."""
    (tmp_path / "p.json").write_text(
        '{"principals": [{"clientId": "admin", "secret": "s", "roles": [{"role": "Owner", "scope": "/"}]}],'
        ' "assignments": [{"principalId": "o-1", "role": "Reader", "scope": "//"}]}'
    )
    principals = load_principals(None, tmp_path / "p.json")
    admin = principals.find("admin")
    assert admin is not None and [(r.scope, r.role_definition_id) for r in admin.roles] == [
        ("/", "8e3af657-a8ff-443c-a75c-2fe8c4bcb635")
    ]
    assert [(r.principal_id, r.scope) for r in principals.assignments] == [("o-1", "/")]
