"""The package's layering, read from its source (STYLE, "The house"): each module's imports — at the top, inside
functions and under TYPE_CHECKING alike — are parsed with ``ast``, nothing is imported. A rule broken names the
module and what it imports."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.import_time import run_at_import

import scheduler_emulator

PACKAGE = Path(scheduler_emulator.__file__).parent


def imported(path: Path, root: Path = PACKAGE) -> Iterator[str]:
    """Every module ``path`` (a file of the package at ``root``) imports, by its full name; ``from a.b import c``
    counts as ``a.b`` and ``a.b.c`` (``c`` may be a module)."""
    module = ".".join(("scheduler_emulator", *path.relative_to(root).with_suffix("").parts))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package this module is in
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def violations(
    layer: str, forbidden: tuple[str, ...], allowed: tuple[str, ...] = (), root: Path = PACKAGE
) -> list[str]:
    """``module: import`` for each import of a module in ``forbidden`` (or below it) by a module of ``layer``."""

    def within(name: str, prefixes: tuple[str, ...]) -> bool:
        return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)

    found = []
    for path in sorted((root / layer).rglob("*.py")):
        for name in imported(path, root):
            if within(name, forbidden) and not within(name, allowed):
                found.append(f"{path.relative_to(root)}: {name}")
    return found


def test_the_rules_see_an_import_that_breaks_them(tmp_path: Path) -> None:
    """The walker itself, on a package of one module: absolute, relative and function-level imports are seen."""
    root = tmp_path / "scheduler_emulator"
    (root / "store").mkdir(parents=True)
    (root / "store" / "probe.py").write_text(
        "from ..schemas.job import JobProperties\n"
        "def f():\n"
        "    import scheduler_emulator.virtual_clock\n"
        "    from scheduler_emulator import schemas\n"
    )

    assert violations("store", ("scheduler_emulator.schemas", "scheduler_emulator.virtual_clock"), root=root) == [
        "store/probe.py: scheduler_emulator.schemas.job",
        "store/probe.py: scheduler_emulator.schemas.job.JobProperties",
        "store/probe.py: scheduler_emulator.virtual_clock",
        "store/probe.py: scheduler_emulator.schemas",
    ]


def test_the_store_imports_no_wire_model() -> None:
    """store/ persists domain values and plain fields; turning wire models into them is service/'s or
    dispatcher/'s work (the dispatcher gives its store the reader of a job definition). ``schemas.job_shape`` is
    allowed: the declaration of where a definition's secrets sit, which the store walks to seal them at rest —
    tables of paths, no model."""
    assert violations("store", ("scheduler_emulator.schemas",), allowed=("scheduler_emulator.schemas.job_shape",)) == []


@pytest.mark.parametrize("layer", ["dispatcher", "domain", "store", "service"])
def test_no_layer_below_the_app_imports_the_concrete_virtual_clock(layer: str) -> None:
    """The dispatcher (and what it stands on) takes any ``domain.clock.Clock``; only the app and the stepping
    that serves POST /_emulator/clock know the virtual one."""
    assert violations(layer, ("scheduler_emulator.virtual_clock",)) == []


def test_the_domain_stays_pure() -> None:
    """domain/ does no I/O of a web framework, database or HTTP client, and imports no other layer."""
    forbidden = (
        "fastapi",
        "starlette",
        "sqlalchemy",
        "httpx",
        "aiohttp",
        "psycopg",
        "scheduler_emulator.api",
        "scheduler_emulator.service",
        "scheduler_emulator.store",
        "scheduler_emulator.dispatcher",
        "scheduler_emulator.schemas",
    )
    assert violations("domain", forbidden) == []


def test_service_imports_no_surface() -> None:
    """service/ holds the operations and their rules that every surface calls (the ARM routers, the classic API,
    template deployments, the dashboard): a service that imported a module of api/ would tie every other surface
    to that one and run back up the layers (request → api → service → store). A service raises the domain's
    errors (``domain/errors.py``); each surface turns them into its own wire shape (``api/errors.py``)."""
    assert violations("service", ("scheduler_emulator.api",)) == []


def test_the_kit_imports_nothing_of_the_service() -> None:
    """testing/ (the public test kit and its pytest plugin) drives the emulator as users run it: a separate
    ``python -m scheduler_emulator`` process, or one already running, over HTTP. So it imports nothing else of the
    package, not even lazily: it must work the same against any emulator it attaches to, and its plugin is loaded
    (the ``pytest11`` entry point) into every pytest run of an environment where the package is installed, fixtures
    used or not. ``scheduler_emulator/__init__.py`` runs whenever the kit is imported, so it imports nothing."""
    assert violations("testing", ("scheduler_emulator",), allowed=("scheduler_emulator.testing",)) == []
    assert list(imported(PACKAGE / "__init__.py")) == []


def test_the_kit_imports_only_the_standard_library_and_pytest_as_it_is_imported() -> None:
    """What loading the kit costs a test run: the standard library, and pytest for the plugin. Anything else it
    needs waits for the call that needs it (``Emulator.sdk_client`` imports the Azure SDK)."""
    found = []
    for path in sorted((PACKAGE / "testing").rglob("*.py")):
        for node in run_at_import(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top != "pytest" and not name.startswith("scheduler_emulator"):
                    found.append(f"{path.relative_to(PACKAGE)}: {name}")
    assert found == []


def test_the_dispatcher_imports_nothing_that_builds_or_serves_the_app() -> None:
    """Nothing in dispatcher/ runs back up to what assembles the service (app.py, serving.py, cli.py): building a
    dispatcher lives in dispatcher/here.py, and the dispatcher role's child starts from cli.py without a server."""
    forbidden = ("scheduler_emulator.app", "scheduler_emulator.serving", "scheduler_emulator.cli")
    assert violations("dispatcher", forbidden) == []


def test_the_api_sees_the_dispatcher_only_through_its_host_protocol() -> None:
    """api/ reaches the dispatcher through dispatcher/host.py (DispatcherHost) alone, wherever it runs; nothing of
    how it is built, run or supervised. ``dispatcher.actions.outbound`` is allowed: the outbound policy, which the
    API applies as well to the links it checks (api/resources/links.py)."""
    allowed = ("scheduler_emulator.dispatcher.host", "scheduler_emulator.dispatcher.actions.outbound")
    assert violations("api", ("scheduler_emulator.dispatcher",), allowed=allowed) == []


def test_no_two_modules_import_each_other_through_any_chain() -> None:
    """No circle in the package's import graph (docs/ARCHITECTURE.md#layer-rules): every module can be read after
    the ones it imports. An import under TYPE_CHECKING counts, as it ties the two just the same."""

    def name_of(path: Path) -> str:
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        return ".".join(("scheduler_emulator", *(parts[:-1] if parts[-1] == "__init__" else parts)))

    modules = {name_of(path): path for path in PACKAGE.rglob("*.py")}

    def ties(name: str, path: Path) -> set[str]:
        """The modules ``name`` imports: ``from a.b import c`` ties it to the module ``a.b.c`` when there is one
        (not to the package ``a.b`` as well), else to ``a.b``."""
        names = set(imported(path))
        found = {imp for imp in names if imp in modules and imp != name}
        return {imp for imp in found if not any(other.startswith(imp + ".") for other in found)} | {
            imp for imp in found if imp.count(".") > 1 and imp.rpartition(".")[0] in found and imp in modules
        }

    graph = {name: ties(name, path) for name, path in modules.items()}
    # Tarjan's strongly connected components, iteratively (bounded by the graph's size)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    circles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    assert not circles, "modules that import each other: " + "; ".join(", ".join(c) for c in circles)
