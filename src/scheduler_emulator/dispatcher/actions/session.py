"""The process's one aiohttp session, shared by every action that speaks HTTP (the Http/Https action, and the
Storage Queue SDK's transport): one connection pool, one resolver — every name resolved through the outbound
policy (see outbound.py) — and no cookie jar, so one job's target cannot set cookies another job's request
carries. (Service Bus speaks AMQP over its own connections: it has no use for it.)"""

from __future__ import annotations

import math
import ssl

import aiohttp

from scheduler_emulator.dispatcher.actions.outbound import PolicyResolver
from scheduler_emulator.domain.outbound import OutboundPolicy

# Open connections to one host (scheme, host, port and TLS settings) at most. Fires that find them all busy wait
# for the first one free, inside their action timeout, rather than each opening its own: when a burst of fires
# comes due together (or late, all at once), an unbounded pool opened a connection per fire, hundreds per burst to
# one target (11-18 % of a dispatcher's CPU in connects at 3,000 fires/s), where the kept-alive ones would have
# served them a moment later. 100 connections answer 3,000 fires/s at up to 30 ms per response.
CONNECTIONS_PER_HOST = 100


def exact_timeout(seconds: float) -> aiohttp.ClientTimeout:
    """A total timeout of exactly ``seconds``: aiohttp rounds a deadline of 5 s or more up to the next whole second
    unless its ceil threshold says otherwise."""
    return aiohttp.ClientTimeout(total=seconds, ceil_threshold=math.inf)


class SharedSession:
    """Creates the session in the running loop on first use (aiohttp needs one), and closes it once."""

    def __init__(self, policy: OutboundPolicy, timeout: float) -> None:
        self.policy = policy
        self.seconds = timeout
        self.timeout = exact_timeout(timeout)
        self.verify = ssl.create_default_context()  # honours SSL_CERT_FILE / SSL_CERT_DIR
        self._session: aiohttp.ClientSession | None = None

    def get(self) -> aiohttp.ClientSession:
        """The session; a request may set its own ``ssl`` (a client certificate) and ``timeout``."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=0,
                limit_per_host=CONNECTIONS_PER_HOST,
                ssl=self.verify,
                ttl_dns_cache=60,
                resolver=PolicyResolver(self.policy),
            )
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self.timeout, trust_env=False, cookie_jar=aiohttp.DummyCookieJar()
            )
            # aiohttp sends an idempotent request (GET, PUT, DELETE, ...) again by itself when a reused kept-alive
            # connection drops before the answer; the target may have acted on the first, so that would be a second
            # fire no retry policy asked for. A fire is sent once; the job's retry policy decides what follows.
            # (No public option in aiohttp 3.14: ClientSession sets this attribute True in __init__.)
            self._session._retry_connection = False
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = None
