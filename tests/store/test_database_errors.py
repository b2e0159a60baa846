"""What a failed statement's error says: never the values it was given (job definitions carry secrets), on
either store, since such errors are logged."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from support.scratch_store import BACKENDS, scratch_database

SECRET = "pw-3b7e0c51-not-in-any-message"


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_failed_statement_does_not_show_its_values(kind: str, tmp_path: Path) -> None:
    with (
        scratch_database(kind, tmp_path) as database,
        pytest.raises(DBAPIError) as raised,
        database.session() as session,
    ):
        session.execute(text("SELECT * FROM no_such_table WHERE name = :secret"), {"secret": SECRET})
    assert "no_such_table" in str(raised.value)
    assert SECRET not in str(raised.value)
