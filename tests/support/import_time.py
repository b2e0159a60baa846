"""What a package's modules read from the environment as they are imported (the fork server's rule,
support/forkserver.py): ``environment_read_at_import(package)`` imports every module of ``package`` in a fresh
interpreter with ``os.environ`` replaced by a mapping that records each access made while a frame of the package is
on the stack, and answers one ``EnvironmentRead`` per access.

The outside modules the package imports at module level are imported first, unrecorded, so that what a library
reads as *it* is imported is not counted; what a library reads because the package's import-time code calls it
(pydantic as each model class is built, pydantic-settings when a settings object is built) is."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

_TESTS = str(Path(__file__).resolve().parents[1])
_PROBE = "import sys; sys.path.append(sys.argv[1]); from support.import_time import probe; probe(sys.argv[2:])"
_PATIENCE = 120.0  # seconds: importing every module of the service takes ~2 s


@dataclass(frozen=True)
class EnvironmentRead:
    """One access to the environment while ``module`` was being imported: ``at`` is the package's innermost frame
    (``path:line``, relative to the package), ``by_package`` whether that frame made the access itself (rather
    than a library it called), ``what`` the access (``reads NAME``, ``looks for NAME``, ``lists``)."""

    module: str
    at: str
    by_package: bool
    what: str
    name: str | None


def environment_read_at_import(package: str, *, search_path: Sequence[str] = ()) -> list[EnvironmentRead]:
    """Every access to the environment made by importing each module of ``package`` (found on ``search_path``
    first), in a fresh interpreter; AssertionError when a module cannot be imported."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, _TESTS, package, *search_path],
        capture_output=True,
        text=True,
        timeout=_PATIENCE,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["failed"] == [], f"modules that could not be imported: {answer['failed']}"
    return [EnvironmentRead(**read) for read in answer["reads"]]


# -- in the probing interpreter ------------------------------------------------------------------------


def probe(arguments: list[str]) -> None:
    """Import every module of ``arguments[0]`` (``arguments[1:]`` put first on the path), recording; print JSON."""
    package, search = arguments[0], arguments[1:]
    sys.path[:0] = search
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, f"{package} is not a package"
    root = Path(next(iter(spec.submodule_search_locations))).resolve()
    modules = {_module_name(package, root, path): path for path in sorted(root.rglob("*.py"))}
    for name in sorted(_outside_imports(package, modules.values())):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - ``from a import f`` names a function, not a module
            continue
    recorder = _Recorder(root)
    # Replaced, not cleared (what B003 warns of): os.getenv and Mapping.get read through this module attribute.
    os.environ = _Recording(os.environ, recorder)  # type: ignore[assignment] # noqa: B003
    os.environb = _Recording(os.environb, recorder)  # type: ignore[assignment]
    failed = []
    for name in modules:
        if name.endswith(".__main__"):
            continue  # running it is starting the service
        recorder.module = name
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    print(json.dumps({"reads": recorder.reads, "failed": failed}))


def _module_name(package: str, root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts)))


def run_at_import(tree: ast.Module) -> Iterator[ast.AST]:
    """The nodes a module runs as it is imported: all but the bodies of its functions and lambdas (their
    decorators and default values do run)."""
    todo: list[ast.AST] = list(tree.body)
    for _ in range(10_000_000):  # bounded: one round per node
        if not todo:
            return
        node = todo.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            todo += [*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d)]
        elif not isinstance(node, ast.Lambda):
            todo += list(ast.iter_child_nodes(node))


def _outside_imports(package: str, paths: Iterable[Path]) -> set[str]:
    """The modules outside ``package`` its modules import as they are imported (``from a import b``: ``a`` and
    ``a.b``)."""
    found = set()
    for path in paths:
        for node in run_at_import(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name != package and not name.startswith(package + ".")}


class _Recorder:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.module = ""
        self.reads: list[dict[str, object]] = []
        # the files of the accessor's own frames: os.getenv, Mapping.get (both frozen modules: ``<frozen os>``)
        self._machinery = {os.getenv.__code__.co_filename, MutableMapping.get.__code__.co_filename, __file__}

    def seen(self, what: str, name: str | None, frame: FrameType | None) -> None:
        """Record an access when a frame of the package is on the stack (``frame``: the accessor's caller)."""
        for _ in range(10_000):  # bounded: a stack is far shallower
            if frame is None:
                return
            if frame.f_code.co_filename not in self._machinery:
                break
            frame = frame.f_back
        reader = frame
        for _ in range(10_000):
            if frame is None:
                return
            file = Path(frame.f_code.co_filename)
            if file.is_relative_to(self.root):
                at = f"{file.relative_to(self.root)}:{frame.f_lineno}"
                self.reads.append(
                    {"module": self.module, "at": at, "by_package": frame is reader, "what": what, "name": name}
                )
                return
            frame = frame.f_back


class _Recording(MutableMapping[str, str]):
    """``os.environ`` that tells ``recorder`` of every access."""

    def __init__(self, real: MutableMapping[str, str], recorder: _Recorder) -> None:
        self.real = real
        self.recorder = recorder

    def __getitem__(self, key: str) -> str:
        self.recorder.seen(f"reads {key}", str(key), sys._getframe(1))
        return self.real[key]

    def __setitem__(self, key: str, value: str) -> None:
        self.real[key] = value

    def __delitem__(self, key: str) -> None:
        del self.real[key]

    def __iter__(self) -> Iterator[str]:
        self.recorder.seen("lists the environment", None, sys._getframe(1))
        return iter(self.real)

    def __len__(self) -> int:
        self.recorder.seen("counts the environment", None, sys._getframe(1))
        return len(self.real)

    def __contains__(self, key: object) -> bool:
        self.recorder.seen(f"looks for {key}", str(key), sys._getframe(1))
        return key in self.real

    def copy(self) -> dict[str, str]:
        self.recorder.seen("copies the environment", None, sys._getframe(1))
        return dict(self.real)
