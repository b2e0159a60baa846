"""What the service keeps on disk, kept private (docs/reference/security.md#secrets-at-rest): the data directory (0700,
files 0600) and the key that seals stored secrets (``--secret-key-file``, default ``<data-dir>/secret.key``, or
``SCHEDULER_SECRET_KEY``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cryptography.fernet import Fernet

from scheduler_emulator.config import ConfigError
from scheduler_emulator.config_groups import IdentitySettings, ServerSettings, StoreSettings

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def make_files_private() -> None:
    """From now on every file this process creates is 0600 and every directory 0700 (SQLite's database,
    its -wal and -shm files, TLS keys): created so, never chmod-ed after the fact."""
    os.umask(0o077)


# What the service keeps in its data directory (and only that is tightened: the directory may hold the
# operator's own files too).
OWN_FILES = (
    "scheduler.db",
    "scheduler.db-wal",
    "scheduler.db-shm",
    "scheduler.db-journal",
    "secret.key",
    "token-signing-key.pem",
)
OWN_TLS_FILES = ("cert.pem", "key.pem")


def uses_data_dir(store: StoreSettings, server: ServerSettings, identity: IdentitySettings) -> bool:
    """Whether the service keeps files in ``--data-dir`` (``store.data_dir``): the SQLite file, the secret key's
    file, the generated HTTPS certificate or the token service's signing key."""
    on_disk = not store.in_memory
    sqlite_file = on_disk and not store.database_url
    key_file = on_disk and store.secret_key is None and store.secret_key_file is None
    signing_key = identity.signing_key_file is None and identity.has_principals
    return sqlite_file or key_file or server.self_signed or signing_key


def prepare_data_dir(store: StoreSettings, server: ServerSettings, identity: IdentitySettings) -> None:
    """Create ``--data-dir`` (0700) when the service keeps files there, and check that it is a directory this
    process can write: ConfigError, in one line naming the cause and the fix, if not. Run before anything else
    writes there (make_files_private first)."""
    if not uses_data_dir(store, server, identity):
        return
    directory = store.data_dir
    try:
        directory.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    except FileExistsError:  # a file (or a link to one) is in the way
        raise ConfigError(
            f"--data-dir {directory} is a file, not a directory: name a directory (it is created if missing)"
        ) from None
    except NotADirectoryError:
        raise ConfigError(
            f"--data-dir {directory} cannot be created: part of its path is a file, not a directory; name another "
            "directory"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"--data-dir {directory} cannot be created ({exc.strerror}): create it, or name a directory this user "
            "may write in"
        ) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(
            f"--data-dir {directory} is not writable by this user: make it writable (chmod u+rwx), or name another "
            "directory"
        )


def secure_data_dir(directory: Path) -> None:
    """Tighten what an earlier version left readable: the data directory and its tls/ 0700, the service's
    own files in them 0600. Nothing happens when the directory does not exist yet."""
    if not directory.is_dir():
        return
    paths = [directory, directory / "tls"]
    paths += [directory / name for name in OWN_FILES] + [directory / "tls" / name for name in OWN_TLS_FILES]
    for path in paths:
        if not path.exists() or path.is_symlink():
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            path.chmod(mode & (PRIVATE_DIR if path.is_dir() else PRIVATE_FILE))


def secret_key(store: StoreSettings) -> bytes:
    """The key that seals stored secrets: ``SCHEDULER_SECRET_KEY``, else the key file (created on first
    start with a new random key), else — for an in-memory store — a key that lives as long as the process."""
    if store.secret_key is not None:
        return _checked(store.secret_key.get_secret_value().strip().encode(), "SCHEDULER_SECRET_KEY")
    path = store.secret_key_file or store.data_dir / "secret.key"
    if store.in_memory and store.secret_key_file is None:
        return Fernet.generate_key()
    if not path.exists():
        path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
        except FileExistsError:
            pass  # another process created it meanwhile: use theirs
        else:
            with os.fdopen(descriptor, "wb") as file:
                file.write(Fernet.generate_key() + b"\n")
    try:
        key = path.read_bytes().strip()
    except OSError as exc:
        raise ConfigError(f"--secret-key-file: cannot read {path}: {exc.strerror}") from None
    return _checked(key, str(path))


def check_given_secret_key(store: StoreSettings) -> None:
    """Check the key the operator gave (SCHEDULER_SECRET_KEY, or an existing --secret-key-file) as
    ``secret_key`` would (ConfigError), without creating anything: the CLI runs it before importing the service."""
    given_file = store.secret_key_file is not None and store.secret_key_file.is_file()
    if store.secret_key is not None or given_file:
        secret_key(store)


def _checked(key: bytes, source: str) -> bytes:
    try:
        Fernet(key)
    except ValueError:
        raise ConfigError(
            f"the secret key from {source} is not a valid key: it must be 32 bytes in url-safe base64 "
            "(44 characters), e.g. the output of: python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'"
        ) from None
    return key
