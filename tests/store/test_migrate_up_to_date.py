"""Start-up's migration step on a database already at the newest revision is one query (Database.at_head), without
loading Alembic; a database at an older revision is still migrated by Alembic. The newest revision is read from
the scripts' own lines (head_revisions), which must agree with Alembic's reading of them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from support.databases import TEST_SECRET_KEY, fresh_database

from scheduler_emulator.store.database import Database, head_revisions, migrations_dir

# A fresh process (nothing imported yet) migrates the database again and says whether that loaded Alembic.
MIGRATE_AGAIN = """
import sys
from scheduler_emulator.store.database import Database
database = Database(sys.argv[1])
database.migrate()
database.dispose()
print("alembic loaded" if "alembic" in sys.modules else "alembic not loaded")
"""


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    return config


def revision_of(database: Database) -> list[str]:
    with database.engine.connect() as connection:
        return list(connection.scalars(text("SELECT version_num FROM alembic_version")))


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    with fresh_database(request.param, tmp_path_factory) as url:
        database = Database(url)
        try:
            yield database
        finally:
            database.dispose()


def test_the_heads_read_from_the_scripts_are_alembics() -> None:
    assert head_revisions() == frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


def test_an_up_to_date_database_is_recognised_without_alembic(database: Database, tmp_path: Path) -> None:
    assert not database.at_head()  # empty: no alembic_version table yet
    database.migrate()
    assert database.at_head()
    out = subprocess.run(
        [sys.executable, "-c", MIGRATE_AGAIN, database.url],
        env={**os.environ, "SCHEDULER_SECRET_KEY": TEST_SECRET_KEY},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == "alembic not loaded"
    assert revision_of(database) == sorted(head_revisions() or ())


def test_a_database_at_an_older_revision_is_migrated(database: Database) -> None:
    database.migrate()
    config = alembic_config()
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "-1")
    older = revision_of(database)
    assert older and older != sorted(head_revisions() or ())
    assert not database.at_head()
    database.migrate()
    assert database.at_head()
    assert revision_of(database) == sorted(head_revisions() or ())
