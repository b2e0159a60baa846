"""Every command-line flag and its environment variable, observed on a started server."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from support.api_client import API
from support.certificates import self_signed, write_pem_files
from support.databases import TEST_SECRET_KEY, PostgresDatabase, require_postgres
from support.environment import missing
from support.names import Names
from support.processes import children_of, socket_owner
from support.server import ServerProcess
from support.times import iso_seconds
from support.waiting import wait_until


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def create_collection(server: ServerProcess, names: Names) -> None:
    with server.client() as client:
        response = client.put(names.collection_path, params={"api-version": API}, json={"location": "westus"})
        assert response.status_code == 201, response.text


def collection_status(server: ServerProcess, names: Names) -> int:
    with server.client() as client:
        return client.get(names.collection_path, params={"api-version": API}).status_code


CONSOLE_SCRIPT = str(Path(sys.executable).parent / "scheduler-emulator")
AS_MODULE = [sys.executable, "-m", "scheduler_emulator"]
# ``python -m scheduler_emulator`` that says on stderr each process it starts (Python's audit events).
SAYING_EACH_PROCESS_STARTED = [
    sys.executable,
    "-c",
    "import runpy, sys\n"
    "def said(event, args):\n"
    "    if event in ('os.fork', 'os.forkpty', 'os.posix_spawn', 'subprocess.Popen'):\n"
    "        print(f'process started: {event}', file=sys.__stderr__, flush=True)\n"
    "sys.addaudithook(said)\n"
    "runpy.run_module('scheduler_emulator', run_name='__main__', alter_sys=True)",
]


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    command: list[str] = AS_MODULE,
    launcher: tuple[str, ...] = (),
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """The command line run to its end (``command``: ``python -m scheduler_emulator`` or the console script)."""
    return subprocess.run([*launcher, *command, *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd)


def refused_in_one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a start refused for the user's input prints: exit status 2, no traceback, nothing started."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("scheduler-emulator: error: "), result.stderr
    assert result.stdout == "", result.stdout  # no store line, no "Listening on": nothing was started
    return lines[0]


def test_host_flag_binds_the_given_interface(emulators, tmp_path: Path) -> None:
    server = emulators.start(tmp_path, "--host", "127.0.0.2")
    assert server.url.startswith("http://127.0.0.2:")
    create_collection(server, Names())


def test_port_flag_and_its_environment_variable_on_the_default_host_loopback(emulators, tmp_path: Path) -> None:
    port = free_port()
    server = emulators.start(tmp_path / "a", port=port)  # no --host: loopback
    assert server.url == f"http://127.0.0.1:{port}"
    env_port = free_port()
    by_env = emulators.start(tmp_path / "b", port=None, env={"SCHEDULER_PORT": str(env_port)})
    assert by_env.url == f"http://127.0.0.1:{env_port}"


def test_data_dir_holds_the_sqlite_file_and_survives_a_restart(emulators, tmp_path: Path) -> None:
    data_dir = tmp_path / "state"
    names = Names()
    first = emulators.start(data_dir)
    create_collection(first, names)
    assert (data_dir / "scheduler.db").is_file()
    first.stop()
    second = emulators.start(data_dir)
    assert collection_status(second, names) == 200


def test_in_memory_keeps_nothing(emulators, tmp_path: Path) -> None:
    names = Names()
    first = emulators.start(tmp_path, in_memory=True)
    create_collection(first, names)
    assert collection_status(first, names) == 200
    assert not (tmp_path / "scheduler.db").exists()
    first.stop()
    second = emulators.start(tmp_path, in_memory=True)
    assert collection_status(second, names) == 404


def test_database_url_stores_in_postgresql(emulators, tmp_path: Path) -> None:
    require_postgres()
    import psycopg

    database = PostgresDatabase().create()
    try:
        names = Names()
        server = emulators.start(tmp_path, database_url=database.url)
        create_collection(server, names)
        with psycopg.connect(database.url) as conn:
            stored = conn.execute("SELECT name FROM job_collections").fetchall()
        assert stored == [(names.collection,)]
        assert not (tmp_path / "scheduler.db").exists()
        server.stop()
    finally:
        database.drop()


def test_https_generates_a_certificate_once_and_reuses_it(emulators, tmp_path: Path) -> None:
    # A long grace: a stop that waited for the idle client below would be killed (by stop()) before it ended.
    first = emulators.start(tmp_path, "--shutdown-grace", "60", https=True)
    assert first.url.startswith("https://127.0.0.1:")
    assert first.cert_path == (tmp_path / "tls" / "cert.pem").resolve()
    generated = first.cert_path.read_bytes()
    create_collection(first, Names())
    with pytest.raises(httpx.ConnectError):  # an untrusting client refuses the self-signed certificate
        httpx.get(
            first.url + "/subscriptions/s/providers/Microsoft.Scheduler/jobCollections", params={"api-version": API}
        )
    with first.client() as idle:  # a client keeping its TLS connection open does not hold up a stop
        assert idle.get(f"/subscriptions/s/providers/Microsoft.Scheduler/jobCollections?api-version={API}").is_success
        first.stop()
    assert first.wait_exit() == -signal.SIGTERM, first.log_tail()
    assert "graceful shutdown exceeded" not in first.log
    second = emulators.start(tmp_path, https=True)
    assert second.cert_path is not None and second.cert_path.read_bytes() == generated
    create_collection(second, Names())


def _write_certificate(directory: Path) -> tuple[Path, Path, x509.Certificate]:
    key, certificate = self_signed("operator-cert", dns_names=("localhost",))
    return (*write_pem_files(directory, "op", key, certificate), certificate)


def test_cert_and_key_serve_the_operators_certificate(emulators, tmp_path: Path) -> None:
    cert_path, key_path, certificate = _write_certificate(tmp_path)
    server = emulators.start(tmp_path, "--cert", str(cert_path), "--key", str(key_path))
    assert server.url.startswith("https://")
    host, port = server.url.removeprefix("https://").rsplit(":", 1)
    served = ssl.get_server_certificate((host, int(port)))
    assert x509.load_pem_x509_certificate(served.encode()) == certificate
    assert not (tmp_path / "tls").exists()  # no self-signed certificate was generated


def test_log_level_controls_the_access_log(emulators, tmp_path: Path) -> None:
    names = Names()
    quiet = emulators.start(tmp_path / "q", log_level="warning")
    create_collection(quiet, names)
    chatty = emulators.start(tmp_path / "c", log_level="info")
    create_collection(chatty, names)
    quiet.stop()
    chatty.stop()
    assert names.collection not in quiet.log
    assert any(names.collection in line and "201" in line for line in chatty.output)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--in-memory", "--database-url", "sqlite:////tmp/x.db"],
            "--in-memory and --database-url cannot be used together",
        ),
        (["--cert", "/tmp/c.pem"], "--cert and --key must be given together"),
        (["--key", "/tmp/k.pem"], "--cert and --key must be given together"),
        (["--port", "70000"], "--port"),
        (["--log-level", "loud"], "--log-level"),
        (["--claim-ahead", "-1"], "--claim-ahead"),
        (["--duration-format", "rfc"], "--duration-format"),
        (["--clock", "fast"], "--clock"),
        (["--clock-start", "2030-01-01T00:00:00Z"], "--clock-start only applies with --clock virtual"),
        (["--clock", "virtual", "--clock-start", "2030-01-01T00:00:00"], "--clock-start needs a time zone"),
        (["--clock", "virtual", "--clock-start", "next tuesday"], "--clock-start"),
        (["--supervised"], "--supervised is the dispatcher role of another emulator process: it needs --no-api"),
        (["--action-process", "on"], "--action-process"),  # gone (docs/flags.md): refused as any unknown flag
    ],
)
def test_conflicting_or_invalid_flags_fail_at_start(args: list[str], message: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Listening" not in result.stdout


def _retry_intervals(server: ServerProcess, names: Names, agent: str) -> tuple[str, str]:
    """(GET, list) retryInterval of the job ``names`` holds, as a client with User-Agent ``agent`` reads it."""
    with server.client(headers={"user-agent": agent}) as client:
        one = client.get(names.job_path("job"), params={"api-version": API}).json()
        listed = client.get(names.collection_path + "/jobs", params={"api-version": API}).json()["value"]
    return one["properties"]["action"]["retryPolicy"]["retryInterval"], listed[0]["properties"]["action"][
        "retryPolicy"
    ]["retryInterval"]


@pytest.mark.parametrize(
    ("how", "agent", "sent", "read"),
    [
        # timespan: every client is taken for azure-mgmt-scheduler 1.1.3/2.0.0, days read and written x30.
        ("--duration-format=timespan", "curl/8", "30.01:30:00", ("30.01:30:00", "P1DT1H30M")),
        # iso: every client is taken for an ISO-8601 one, whatever it says it is.
        ("SCHEDULER_DURATION_FORMAT=iso", "curl/8", "1.01:30:00", ("P1DT1H30M", "P1DT1H30M")),
        # echo: as sent, even to 7.0.0.
        ("--duration-format=echo", "azsdk-python-mgmt-scheduler/7.0.0", "1.01:30:00", ("1.01:30:00", "1.01:30:00")),
        # auto, the default (by User-Agent): tests/api/test_client_dialects.py.
    ],
)
def test_duration_format_flag_and_its_environment_variable(emulators, tmp_path: Path, how, agent, sent, read) -> None:
    args, env = [], {}
    if how.startswith("--"):
        args.append(how)
    else:
        env = dict([how.split("=", 1)])
    server = emulators.start(tmp_path, *args, env=env)
    names = Names()
    create_collection(server, names)
    action = {
        "type": "Http",
        "request": {"uri": "http://127.0.0.1:9/x", "method": "GET"},
        "retryPolicy": {"retryType": "Fixed", "retryInterval": sent, "retryCount": 1},
    }
    start = iso_seconds(datetime.now(UTC) + timedelta(days=7))
    with server.client(headers={"user-agent": agent}) as client:
        body = {"properties": {"startTime": start, "action": action}}
        response = client.put(names.job_path("job"), params={"api-version": API}, json=body)
        assert response.status_code == 201, response.text
    assert _retry_intervals(server, names, agent) == read


def test_missing_certificate_file_fails_at_start(tmp_path: Path) -> None:
    result = run_cli("--cert", str(tmp_path / "nope.pem"), "--key", str(tmp_path / "nope.key"), "--port", "0")
    assert result.returncode == 2
    assert "nope.pem does not exist" in result.stderr


@pytest.mark.parametrize("command", [AS_MODULE, [CONSOLE_SCRIPT]], ids=["python -m", "console script"])
def test_a_mistyped_flag_is_one_line_with_the_flag_meant_and_no_usage(command: list[str]) -> None:
    line = refused_in_one_line(run_cli("--htps", "--prot", "8080", command=command))
    assert line == (
        "scheduler-emulator: error: unrecognized arguments: --htps --prot 8080 (did you mean --https, --port?); "
        "see scheduler-emulator --help"
    )
    far_off = refused_in_one_line(run_cli("--xyzzy", command=command))
    assert far_off == "scheduler-emulator: error: unrecognized arguments: --xyzzy; see scheduler-emulator --help"
    bad_value = refused_in_one_line(run_cli("--log-level", "loud", command=command))
    assert "invalid choice: 'loud'" in bad_value and bad_value.endswith("; see scheduler-emulator --help")


def test_help_shows_the_defaults_the_service_uses(tmp_path: Path) -> None:
    # argparse wraps the help to the terminal's width (COLUMNS), breaking long paths at hyphens: not here.
    result = run_cli("--help", cwd=tmp_path, command=[CONSOLE_SCRIPT], env={**os.environ, "COLUMNS": "10000"})
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    for empty in ("default . ", "default None", "default False", "default True", "default ;"):
        assert empty not in text + " ", empty
    assert f"Env SCHEDULER_DATA_DIR; default ./data (here {tmp_path.resolve() / 'data'})." in text
    assert "Env SCHEDULER_IN_MEMORY; default off." in text
    assert "Env SCHEDULER_API; default on." in text
    assert "Env SCHEDULER_SHUTDOWN_GRACE; default 10." in text
    assert "Env SCHEDULER_MAX_BODY_BYTES; default 65536." in text
    assert "Env SCHEDULER_CERT." in text  # unset: no default shown
    assert "Env SCHEDULER_STORAGE_ENDPOINTS. Repeatable." in text  # empty: no default shown
    assert result.stdout.startswith("usage: scheduler-emulator [FLAG ...]\n")


def _sealed_store(path: Path) -> str:
    """A SQLite store whose secrets were sealed with a key other than the one given to the emulator."""
    from cryptography.fernet import Fernet

    from scheduler_emulator.store.database import Database
    from scheduler_emulator.store.secrets import SecretBox

    url = f"sqlite:///{path}"
    database = Database(url, SecretBox(Fernet.generate_key()))
    database.migrate()
    database.prepare_secrets()  # writes the check value of that key
    database.dispose()
    return url


def _not_writable(directory: Path) -> tuple[str, ...]:
    """Make ``directory`` unwritable for the emulator; the launcher that makes that hold for root too."""
    directory.mkdir()
    directory.chmod(0o500)
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        missing("As root, the unwritable data directory test needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE.")
    return (str(setpriv), "--bounding-set=-dac_override,-dac_read_search", "--")


@pytest.mark.parametrize(
    "case",
    [
        "data dir is a file",
        "data dir below a file",
        "data dir not writable",
        "port taken",
        "host not here",
        "certificate not PEM",
        "key of another certificate",
        "key encrypted",
        "database unreachable",
        "database URL unreadable",
        "secret key of another store",
        "management certificate not a certificate",
    ],
)
def test_each_start_up_failure_is_one_line_naming_the_cause_and_the_fix(tmp_path: Path, case: str) -> None:
    data_dir = tmp_path / "data"
    args: list[str] = ["--port", "0"]
    env = dict(os.environ)
    launcher: tuple[str, ...] = ()
    taken = None
    cert, key, _ = _write_certificate(tmp_path)
    if case == "data dir is a file":
        data_dir.write_text("not a directory")
        expected = f"--data-dir {data_dir} is a file, not a directory: name a directory"
    elif case == "data dir below a file":
        data_dir.write_text("not a directory")
        data_dir = data_dir / "below"
        expected = f"--data-dir {data_dir} cannot be created: part of its path is a file"
    elif case == "data dir not writable":
        launcher = _not_writable(data_dir)
        expected = f"--data-dir {data_dir} is not writable by this user: make it writable"
    elif case == "port taken":
        taken = socket.create_server(("127.0.0.1", 0))
        args = ["--port", str(taken.getsockname()[1])]
        expected = f"port {args[1]} on 127.0.0.1 is already in use"
    elif case == "host not here":
        args += ["--host", "192.0.2.7"]  # TEST-NET-1: no machine's address
        expected = "--host 192.0.2.7 is not an address of this machine"
    elif case == "certificate not PEM":
        (tmp_path / "junk.pem").write_text("not a certificate\n")
        args += ["--cert", str(tmp_path / "junk.pem"), "--key", str(key)]
        expected = f"--cert {tmp_path / 'junk.pem'} holds no PEM certificate"
    elif case == "key of another certificate":
        (tmp_path / "other").mkdir()
        _, other_key, _ = _write_certificate(tmp_path / "other")
        args += ["--cert", str(cert), "--key", str(other_key)]
        expected = f"--key {other_key} is not the private key of the certificate --cert {cert}"
    elif case == "key encrypted":
        encrypted = tmp_path / "encrypted.key"
        encrypted.write_bytes(
            self_signed("x")[0].private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.BestAvailableEncryption(b"passphrase"),
            )
        )
        args += ["--cert", str(cert), "--key", str(encrypted)]
        expected = f"--key {encrypted} is encrypted with a passphrase: give it unencrypted"
    elif case == "database unreachable":
        args += ["--database-url", f"postgresql+psycopg://postgres:s3cret@127.0.0.1:{free_port()}/test"]
        expected = "the database postgresql+psycopg://postgres:***@127.0.0.1:"
    elif case == "database URL unreadable":
        args += ["--database-url", "not a url:s3cret"]
        expected = "--database-url is not a URL SQLAlchemy can read"
    elif case == "management certificate not a certificate":
        (tmp_path / "junk.cer").write_text("not a certificate\n")
        sub = "00000000-0000-0000-0000-000000000000"
        args += ["--https", "--auth-token", "t0ken", "--management-certificate", f"{sub}:{tmp_path / 'junk.cer'}"]
        expected = f"--management-certificate: {tmp_path / 'junk.cer'} holds no certificate"
    else:
        args += ["--database-url", _sealed_store(tmp_path / "sealed.db")]
        env["SCHEDULER_SECRET_KEY"] = TEST_SECRET_KEY
        expected = "the secret key does not decrypt the secrets stored in"
    try:
        result = run_cli(*args, "--data-dir", str(data_dir), env=env, command=[CONSOLE_SCRIPT], launcher=launcher)
    finally:
        if taken is not None:
            taken.close()
    line = refused_in_one_line(result)
    assert expected in line, line
    assert "s3cret" not in result.stderr  # a password in the URL is never shown
    assert "Traceback" not in result.stderr


def _dispatcher_owners(data_dir: Path) -> set[str]:
    with sqlite3.connect(data_dir / "scheduler.db") as connection:
        return {owner for (owner,) in connection.execute("SELECT owner FROM dispatchers")}


def test_a_started_server_says_where_its_api_and_dashboard_are_and_holds_its_port_alone(
    emulators, tmp_path: Path
) -> None:
    """The start-up output names the API's and the dashboard's URLs. The port is bound before any child process is
    started, and the dispatcher role's child (dispatcher/child.py) does not inherit the socket: it neither keeps the
    port open nor takes a connection. A second server on that port is refused in one line
    before it opens the store or starts any process: nothing of it runs on the first one's data."""
    data_dir = tmp_path / "data"
    first = emulators.start(data_dir, "--dispatcher-process", "on")
    assert f"Listening on {first.url} (the ARM and classic APIs)" in first.output
    dashboard = f"Dashboard: {first.url}/_emulator/ui/"  # the line after "Listening on", where the kit returns
    wait_until(lambda: dashboard in first.output, 30, lambda: f"{dashboard!r} in {first.log}")
    names = Names()
    create_collection(first, names)
    with first.client() as client:
        assert client.get("/_emulator/ui/").status_code == 200

    port = first.url.rsplit(":", 1)[1]
    assert first.process is not None
    children = children_of(first.process.pid)
    descendants = children + [grandchild for child in children for grandchild in children_of(child)]
    assert len(descendants) == 1, descendants  # the dispatcher role's child
    assert socket_owner(int(port), [first.process.pid]) == first.process.pid
    assert socket_owner(int(port), descendants) is None

    owners = wait_until(lambda: _dispatcher_owners(data_dir), 30, "the first server's dispatcher row")
    for command in ([CONSOLE_SCRIPT], SAYING_EACH_PROCESS_STARTED):
        result = run_cli("--port", port, "--data-dir", str(data_dir), command=command)
        line = refused_in_one_line(result)  # (one line: no process was started)
        assert line.startswith(f"scheduler-emulator: error: port {port} on 127.0.0.1 is already in use"), line
    assert _dispatcher_owners(data_dir) == owners  # no dispatcher of the second ever ran on this store
    assert collection_status(first, names) == 200


@pytest.mark.parametrize(("sent", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)])
def test_a_stop_by_ctrl_c_or_sigterm_ends_quietly(tmp_path: Path, sent: signal.Signals, status: int) -> None:
    """Ctrl-C (SIGINT) or SIGTERM (``docker stop``) on the console script stops the service gracefully and ends the
    process without a traceback: Ctrl-C with 130, as a shell expects of an interrupted command; SIGTERM by the
    signal itself, as uvicorn re-raises it once stopped."""
    process = subprocess.Popen(
        [CONSOLE_SCRIPT, "--port", str(free_port()), "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        for _ in range(50):  # the start-up lines (bounded: the process ends if it cannot start)
            line = process.stdout.readline()
            if not line or line.startswith("Listening on"):
                break
        assert line.startswith("Listening on"), line
        process.send_signal(sent)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert "Traceback" not in stderr, stderr
    assert '"Application shutdown complete."' in stderr  # the graceful stop ran
    assert process.returncode == status, (process.returncode, stderr[-2000:])


# ``python -m scheduler_emulator`` that says on stderr when it starts a process (and which tables its SQLite file
# holds right then) and when it begins to import the API (Python's audit events).
SAYING_WHEN_IT_STARTS_THE_CHILD = [
    sys.executable,
    "-c",
    "import runpy, sqlite3, sys\n"
    "DB = sys.argv[sys.argv.index('--data-dir') + 1] + '/scheduler.db'\n"
    "def said(event, args):\n"
    "    if event == 'subprocess.Popen':\n"
    "        with sqlite3.connect(f'file:{DB}?mode=ro', uri=True) as db:\n"
    "            tables = sorted(n for (n,) in db.execute(\"SELECT name FROM sqlite_master WHERE type = 'table'\"))\n"
    "        print(f'process started, tables {tables}', file=sys.__stderr__, flush=True)\n"
    "    elif event == 'import' and args[0] == 'scheduler_emulator.app':\n"
    "        print('importing the API', file=sys.__stderr__, flush=True)\n"
    "sys.addaudithook(said)\n"
    "runpy.run_module('scheduler_emulator', run_name='__main__', alter_sys=True)",
]


def test_the_dispatcher_child_is_started_once_the_store_is_migrated_and_before_the_api_is_built(
    tmp_path: Path,
) -> None:
    """The start's order (serving.py): everything a start can fail on first (the port, the data directory, the
    store migrated), then the dispatcher role's child, then the API imported and built while the child imports,
    and the port served once the child has made its first claim cycle."""
    data_dir = tmp_path / "data"
    process = subprocess.Popen(
        [*SAYING_WHEN_IT_STARTS_THE_CHILD, "--port", "0", "--dispatcher-process", "on", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        assert process.stdout is not None
        for _ in range(200):  # bounded: the process ends if it cannot start
            line = process.stdout.readline()
            lines.append(line.strip())
            if not line or line.startswith("Listening on"):
                break
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    said = [line for line in lines if line.startswith(("process started", "importing the API", "Listening on"))]
    assert len(said) == 3, lines
    started, importing, listening = said
    assert started.startswith("process started, tables [") and "'alembic_version'" in started, lines
    assert "'jobs'" in started, lines  # migrated, not only begun
    assert importing == "importing the API", lines
    assert listening.startswith("Listening on"), lines
