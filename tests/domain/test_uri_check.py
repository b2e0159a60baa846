"""check_uri's shortcut for the common URI accepts exactly what the full check accepts: any URI, accepted or
refused by the shortcut or the full check, gets the same verdict from check_uri as from check_uri_fully."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_emulator.domain.errors import FieldError
from scheduler_emulator.schemas.job import MAX_URI_LENGTH, check_uri, check_uri_fully


def _verdict(check: object, uri: str) -> str | None:
    try:
        check(uri, "uri")  # type: ignore[operator]
    except FieldError as exc:
        return str(exc)
    return None


PIECES = st.sampled_from(
    [
        "http",
        "https",
        "HTTP",
        "ftp",
        "://",
        ":",
        "/",
        "//",
        "?",
        "#",
        "@",
        "[",
        "]",
        "::1",
        ".",
        "-",
        "%20",
        "%",
        " ",
        "\t",
        "\n",
        "\x00",
        "\x7f",
        "é",
        "例え",
        "a",
        "Z",
        "0",
        "9",
        "80",
        "0",
        "65535",
        "65536",
        "99999",
        "123456",
        "localhost",
        "127.0.0.1",
        "user:pw",
        "xn--",
        "&",
        "=",
        "~",
        "\\",
        "'",
        '"',
        "<",
        ">",
        "`",
    ]
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=14).map("".join))
def test_the_shortcut_agrees_with_the_full_check(uri: str) -> None:
    assert _verdict(check_uri, uri) == _verdict(check_uri_fully, uri)


@settings(max_examples=1000, deadline=None)
@given(st.text(max_size=60))
def test_the_shortcut_agrees_on_any_text(tail: str) -> None:
    for uri in (f"http://{tail}", f"https://host{tail}", f"http://h:8080/{tail}"):
        assert _verdict(check_uri, uri) == _verdict(check_uri_fully, uri)


@pytest.mark.parametrize(
    ("uri", "accepted"),
    [
        ("http://127.0.0.1:38080/fire/17", True),
        ("https://Example.COM/a/b?c=d&e=f#g", True),
        ("http://host:65535/", True),
        ("http://host:65536/", False),
        ("http://host:0/", False),
        ("http://host:/x", True),  # an empty port is no port, as urlsplit reads it
        ("http://user:pw@host/", True),
        ("http://[::1]:8080/", True),
        ("http://host/a b", False),
        ("http://host/a\tb", False),
        ("ftp://host/", False),
        ("http:///path", False),
        ("http://" + "h" * MAX_URI_LENGTH, False),
    ],
)
def test_examples(uri: str, accepted: bool) -> None:
    assert (_verdict(check_uri, uri) is None) is accepted
    assert (_verdict(check_uri_fully, uri) is None) is accepted
