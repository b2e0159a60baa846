"""An HTTP attempt's history message in the service's words (docs/reference/actions.md#history-messages), as the
recorded service wrote it (azure-sdk-for-net, Scenario_JobHistoryList, 2016): ``Http Action - Response from host
'www.bing.com': 'OK' Response Headers: Vary: Accept-Encoding\\r\\n...Set-Cookie: a, b\\r\\n...Date: ...\\r\\n Body:
<!DOCTYPE ...``."""

from __future__ import annotations

from scheduler_emulator.dispatcher.actions.http import response_message


def test_headers_as_dotnet_wrote_them_then_the_body() -> None:
    headers = (
        (b"Vary", b"Accept-Encoding"),
        (b"Content-Type", b"text/html"),
        (b"Set-Cookie", b"A=1; path=/"),
        (b"Content-Length", b"9"),
        (b"set-cookie", b"B=2; path=/"),
        (b"Date", b"Wed, 30 Mar 2016 20:39:53 GMT"),
    )
    message = response_message("www.bing.com", "OK", headers, b"<!DOCTYPE html>")
    assert message == (
        "Http Action - Response from host 'www.bing.com': 'OK' Response Headers: Vary: Accept-Encoding\r\n"
        "Set-Cookie: A=1; path=/, B=2; path=/\r\nDate: Wed, 30 Mar 2016 20:39:53 GMT\r\n Body: <!DOCTYPE html>"
    )


def test_the_reason_phrase_as_sent_and_every_part_bounded() -> None:
    headers = tuple((f"X-H{i}".encode(), b"v" * 100) for i in range(100))
    message = response_message("h", "Teapot Says Hi", headers, b"b" * 5000)
    assert message.startswith("Http Action - Response from host 'h': 'Teapot Says Hi' Response Headers: X-H0: ")
    head, body = message.split(" Body: ")
    assert body == "b" * 2048
    assert len(head.split("Response Headers: ", 1)[1].encode()) == 2048
    assert response_message("h", None, (), b"").endswith("'' Response Headers:  Body: ")
