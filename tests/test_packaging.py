"""What the wheel carries beyond Python modules: the dashboard's files, the migrations and the pytest plugin's
entry point (a user's `pip install azure-scheduler-emulator` gets them all)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_ships_the_dashboard_the_migrations_and_the_pytest_plugin(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--quiet", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("azure_scheduler_emulator-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    for name in ("index.html", "app.js", "app.css"):
        assert f"scheduler_emulator/ui/{name}" in names
    assert "scheduler_emulator/migrations/versions/0008_classic_surface.py" in names
    assert "scheduler_emulator/testing/plugin.py" in names
    assert "[pytest11]\nscheduler_emulator = scheduler_emulator.testing.plugin" in entry_points
