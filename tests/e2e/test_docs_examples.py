"""Every example of the README and of the pages under docs/ that a reader would run, run as written: the fenced
blocks are read from the Markdown at test time (support/doc_blocks.py), and each page's are run in order in a
network namespace of their own with only loopback, against the emulator the page itself starts, with the
page's own addresses and names (support/doc_runner.py says what the reader's folder and terminal are here).

A block marked ``<!-- illustrative: why -->`` is not run (it needs Docker, or it is this suite), and counted;
``json`` and ``text`` blocks are shown, not run; any other block the runner cannot run fails the first test.

Where a block says ``# pip install X``, X comes from this suite's environments, never from PyPI: the new SDK,
azure-identity, azure-mgmt-resource and this package with its ``kit`` extra from ``.venv`` (the pins checked
against what is installed there); an older SDK or the classic client from ``.venv-sdks/``
(support/sdk_envs.py); ``pip install azure-cli`` is ``.venv-az/`` (support/azure_cli.py) on ``PATH``;
``// npm install X@V`` is the repository's ``node_modules`` (package.json), the version checked. With CI=true
a missing component (the namespace, Node.js, an environment) fails the test, naming it."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import Counter
from importlib import metadata
from pathlib import Path

import pytest
from support.azure_cli import az_python
from support.doc_blocks import Block, blocks, pages, summary
from support.doc_runner import MAKE_RUN, Namespace, PageRun
from support.environment import REPO, missing
from support.sdk_envs import REQUIREMENTS, sdk_pythons

# What a page's examples must print, beyond running without error: page → (text in the block, what its output
# must contain). Each entry must match exactly one block, so that an edited page cannot leave one behind.
EXPECTED: dict[str, list[tuple[str, str]]] = {
    "README.md": [
        ("jobs/hello/history", r'"status": ?"Completed"'),
        ("jobs/hello/history", r"Body: hello from the target"),
        # Who may do what: the grant is listed, the team reads the group and its write is refused, then revoked
        ("az role assignment create", r"^3a3a3a3a-0000-4000-8000-000000000003\tReader$"),
        ("web-team-secret --tenant", r"^web\nAuthorizationFailed$"),
        ("az role assignment delete", r"^0$"),
    ],
    "docs/clients.md": [
        ("curl --fail-with-body", r'"name": ?"my-jobs/ping"'),
        ("pip install azure-mgmt-scheduler==7.0.0", r"\['my-jobs'\]"),
        ("azure-arm-scheduler ms-rest", r"\[ 'my-jobs' \]"),
        ("pip install azure-mgmt-scheduler==2.0.0", r"^1 day, 0:00:00\n\[.*'my-jobs/monthly-report'\]$"),
    ],
    "docs/classic-api.md": [
        ("azure-asm-scheduler@0.10.2", r"^ping \d{4}-\d\d-\d\dT"),
        ("azure-servicemanagement-legacy", r"^\['ping'\]$"),
    ],
    "docs/arm-templates.md": [
        ("ResourceManagementClient", r"Succeeded .*http://127\.0\.0\.1:8080/ping"),
        ("ResourceManagementClient", r"ping Succeeded"),
    ],
    "docs/azure-cli.md": [
        # az login lists the principal's subscription in its tenant; group and deployment are created.
        ("az resource list", r'"tenantId": "11111111-1111-1111-1111-111111111111"'),
        ("az resource list", r'"name": "my-app",\s+"type": "servicePrincipal"'),
        ("az resource list", r'"name": "my-service",\s+"properties": \{\s+"provisioningState": "Succeeded"'),
        ("az resource list", r'"provisioningState": "Succeeded",\s+"templateHash"'),
        ("az resource list", r"my-jobs/ping\s+my-service\s+Microsoft\.Scheduler/jobCollections/jobs"),
        ("ClientSecretCredential", r"^\['my-jobs'\]$"),
    ],
    "docs/testing-kit.md": [("test_reports.py", r"1 passed")],
}


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


def runnable_pages() -> list[Path]:
    return [page for page in pages() if any(block.kind == "run" for block in blocks(page))]


def test_every_example_is_run_or_marked_illustrative() -> None:
    """The run's summary lists the counts (tests/conftest.py's pytest_terminal_summary)."""
    found = all_blocks()
    unknown = [f"{b.where} ({b.language or 'no info string'})" for b in found if b.kind == "unknown"]
    assert not unknown, (
        "blocks with no runner: give each its language (sh, python, js; json or text for data) or mark it "
        f"<!-- illustrative: why --> -> {unknown}"
    )
    print(summary())
    # The pages' examples are there to be run: a parser that found none would pass everything.
    assert Counter(block.kind for block in found)["run"] >= 20


def test_make_run_is_the_console_script() -> None:
    """The runner runs ``make run`` as the Makefile's recipe: that recipe must still be exactly that."""
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^run: .*\n\t\$\(VENV\)/bin/scheduler-emulator \$\(ARGS\)\n", makefile, re.MULTILINE)
    assert any(MAKE_RUN.search(block.text) for block in blocks(Path("README.md")))


def test_the_kit_extra_names_what_the_kit_imports() -> None:
    """``pip install ...[kit]`` (docs/testing-kit.md) brings what ``sdk_client`` and the plugin import."""
    kit = [r for r in metadata.requires("azure-scheduler-emulator") or [] if re.search(r"extra ?== ?.kit.", r)]
    names = {re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower() for requirement in kit}  # type: ignore[union-attr]
    assert {"azure-mgmt-scheduler", "azure-core", "pytest"} <= names, kit


def _installed(spec: str) -> bool:
    """Whether this suite's own environment holds ``spec`` (``name``, ``name==version`` or this package's path
    with ``[kit]``), pins and the extra's requirements included."""
    if "azure-scheduler-emulator[kit]" in spec:
        kit = [r for r in metadata.requires("azure-scheduler-emulator") or [] if "kit" in r.split(";")[-1]]
        return bool(kit) and all(_installed(r.split(";")[0].replace(" ", "")) for r in kit)
    name, _, pin = spec.partition("==")
    name = re.split(r"[<>=\[]", name)[0]
    try:
        version = metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return not pin or version == pin


def python_bin(block: Block) -> Path:
    """The bin folder of the environment that holds what the block's ``# pip install`` names."""
    specs = [spec for spec in block.installs("pip") if not spec.startswith("-")]
    if all(_installed(spec) for spec in specs):
        return Path(sys.executable).parent
    for version, pins in REQUIREMENTS.items():
        if all(spec in pins for spec in specs):
            return sdk_pythons((version,))[version].parent
    pytest.fail(f"{block.where}: no environment of the suite holds {specs}")


def check_npm(block: Block) -> None:
    for spec in block.installs("npm"):
        name, _, version = spec.partition("@")
        package = REPO / "node_modules" / name / "package.json"
        if not package.exists():
            missing(f"{block.where} needs npm {name}: run `npm ci` in the repository (package.json)")
        assert not version or json.loads(package.read_text())["version"] == version, (block.where, spec)


def prepare(run: PageRun, page_blocks: list[Block]) -> None:
    """Give the page's blocks what they name: Python environments, npm packages, Node.js, the Azure CLI."""
    for block in page_blocks:
        if block.kind != "run":
            continue
        if block.language == "python":
            run.python_bins[block.where] = python_bin(block)
        if block.language == "js":
            if shutil.which("node") is None:
                missing(f"{block.where} needs Node.js (`make test` installs it)")
            check_npm(block)
        if block.language == "sh" and re.search(r"^az ", block.text, re.MULTILINE):
            run.az_bin = az_python().parent


def namespace() -> Namespace:
    if shutil.which("unshare") is None or shutil.which("nsenter") is None or shutil.which("ip") is None:
        missing("the docs examples run in a network namespace: they need unshare, nsenter (util-linux) and ip")
    try:
        return Namespace()
    except (RuntimeError, OSError) as exc:
        missing(f"could not make a network namespace for the docs examples: {exc}")
        raise


@pytest.mark.parametrize("page", runnable_pages(), ids=str)
def test_the_examples_of_a_page_run_as_written(page: Path, tmp_path: Path) -> None:
    page_blocks = blocks(page)
    expected = EXPECTED.get(str(page), [])
    for needle, _ in expected:
        matching = [b.where for b in page_blocks if needle in b.text and b.kind == "run"]
        assert len(matching) == 1, f"{page}: {needle!r} should name one runnable block, names {matching}"
    if not (Path(sys.prefix) / "bin" / "scheduler-emulator").exists():
        pytest.fail(f"the pages' .venv/bin/scheduler-emulator: this suite's environment ({sys.prefix}) has none")
    run = PageRun(tmp_path, namespace())
    try:
        prepare(run, page_blocks)
        for block in page_blocks:
            if block.kind != "run":
                continue
            outcome = run.run(block)
            assert outcome.returncode == 0, (
                f"{block.where} failed ({outcome.returncode}):\n{block.text}\n--- output:\n{outcome.output[-4000:]}"
                f"\n{run.log_tail()}"
            )
            for needle, pattern in expected:
                if needle in block.text and block.serves is None:
                    assert re.search(pattern, outcome.output, re.MULTILINE), (
                        f"{block.where} should print {pattern!r}:\n{outcome.output[-4000:]}"
                    )
    finally:
        run.close()
        run.namespace.close()
    served = sum(1 for o in run.outcomes if o.block.serves is not None)
    print(f"{page}: {len(run.outcomes)} blocks run ({served} left running in the background)")
    for outcome in run.outcomes:
        print(f"  {outcome.block.where} ({outcome.block.language}): {outcome.seconds:.1f} s")
