"""The code cites documents the repository holds: every ``docs/<page>.md#<section>`` and ``bench/README.md#<section>``
named in the code, tests, benchmarks and scripts is a file with that heading, every link inside ``docs/reference/``
resolves, and no citation of the behaviour contract kept outside the repository (its "§" sections, ``SPEC.md``,
``CLASSIC.md``) comes back. The source cites a benchmark's rationale by its section of bench/README.md (a mechanism and
its figures), never by the session that found it. Pure: reads files, no server."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"
# Where the project's own text lives (the links of the docs/ pages outside docs/reference/ are checked by
# tests/test_docs_pages.py; their citations and "§" are checked here too).
SCANNED = ("src", "tests", "migrations", "bench", "scripts", "docs")
SCANNED_FILES = ("README.md", "Makefile", "Dockerfile", "pyproject.toml", "docker-compose.yml")
SKIPPED_DIRS = {"__pycache__", "node_modules", ".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
TEXT_SUFFIXES = {".py", ".md", ".js", ".css", ".html", ".toml", ".ini", ".cfg", ".txt", ".sh", ".yml", ".yaml", ".mako"}

CITATION = re.compile(r"docs/[A-Za-z0-9_./-]+?\.md(?:#[A-Za-z0-9_-]+)?")
# A contract outside the repository: its file names, or a "§" section that is not an RFC's ("RFC 9112 §9.3.1").
# Spelt in pieces so that this file does not match itself.
FOREIGN = re.compile("|".join((r"\bSPEC\b", "SPEC" + r"\.md", "CLASSIC" + r"\.md", r"/work/shared", r"(?<!\d )§")))
# A section of the benchmarks' results page: "bench/README.md#write-gathering".
BENCH_CITATION = re.compile(r"bench/README\.md#([A-Za-z0-9_-]+)")
# The benchmarks' results page cited with no section ("(bench/README)", "bench/README.md,"), or a rationale cited by
# the session that measured it ("issue 33, seventh session", "session 10"): the page is no diary any more.
BENCH_PAGE = re.compile(r"bench/README(?!\.md#)(?:\.md)?(?![#A-Za-z0-9_])")
SESSION = re.compile(
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth"
    r"|fifteenth)[\s#]+sessions?\b|\bsessions?[\s#]+\d+\b",
    re.IGNORECASE,
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def project_files() -> list[Path]:
    """The text files of the scanned folders and the scanned top-level files (this test left out)."""
    files = [ROOT / name for name in SCANNED_FILES if (ROOT / name).is_file()]
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*")):
            if SKIPPED_DIRS & set(path.relative_to(ROOT).parts) or not path.is_file():
                continue
            if path.suffix in TEXT_SUFFIXES and path != Path(__file__).resolve():
                files.append(path)
    return files


def slugs(markdown: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file (lower case, punctuation dropped, spaces to
    hyphens, ``-1``, ``-2``… on repeats), code blocks skipped."""
    seen: Counter[str] = Counter()
    anchors = set()
    fenced = False
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = HEADING.match(line)
        if fenced or not match:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(2))
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        anchors.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return anchors


def unresolved(target: Path, anchor: str | None) -> str | None:
    """Why a citation of ``target`` (and its ``anchor``) does not resolve; None when it does."""
    if not target.is_file():
        return "no such file"
    if anchor and anchor not in slugs(target):
        return f"no heading with the anchor #{anchor}"
    return None


def diary_citations(text: str) -> list[tuple[int, str]]:
    """(line, what) for each citation in ``text`` of the benchmarks' page with no section, and of a session."""
    found = [(match.start(), f"cites {match.group(0)} with no section") for match in BENCH_PAGE.finditer(text)]
    for match in SESSION.finditer(text):
        found.append((match.start(), f"cites a session ({' '.join(match.group(0).split())!r})"))
    return sorted((text.count("\n", 0, start) + 1, what) for start, what in found)


def test_the_scan_sees_the_code_and_the_reference() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in project_files()}
    assert "src/scheduler_emulator/config.py" in names
    assert "src/scheduler_emulator/ui/app.js" in names
    assert "docs/reference/README.md" in names
    assert "tests/conftest.py" in names


def test_no_citation_of_a_contract_the_repository_does_not_hold() -> None:
    found = []
    for path in project_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if FOREIGN.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "cite docs/reference/<page>.md#<section> instead:\n" + "\n".join(found)


def test_every_cited_docs_page_and_section_exists() -> None:
    cited: dict[str, list[str]] = {}
    for path in project_files():
        if path.is_relative_to(REFERENCE):
            continue  # its own links are relative; the next test reads them
        for match in CITATION.finditer(path.read_text(encoding="utf-8")):
            cited.setdefault(match.group(0), []).append(path.relative_to(ROOT).as_posix())
    assert len(cited) > 20, "the code should cite the reference"
    broken = []
    for citation, where in sorted(cited.items()):
        page, _, anchor = citation.partition("#")
        problem = unresolved(ROOT / page, anchor or None)
        if problem:
            broken.append(f"{citation} ({problem}), cited in {', '.join(sorted(set(where)))}")
    assert not broken, "\n".join(broken)


def test_every_cited_bench_section_exists() -> None:
    bench_readme = ROOT / "bench" / "README.md"
    broken = []
    for path in project_files():
        for match in BENCH_CITATION.finditer(path.read_text(encoding="utf-8")):
            problem = unresolved(bench_readme, match.group(1))
            if problem:
                broken.append(f"{match.group(0)} ({problem}), cited in {path.relative_to(ROOT)}")
    assert not broken, "\n".join(sorted(set(broken)))


def test_a_diary_citation_is_found_and_a_section_is_not() -> None:
    """The check below, on text of each kind: what it must find (with its line) and what it must let pass."""
    text = (
        "a GET cost a quarter less (bench/README, issue 33, fourth\n"
        "    session); young collections (bench/README).\n"
        "# (bench/README.md, issue 33's fifth session) and session 10\n"
        "see bench/README.md#write-gathering, bench/store_cost.py and docs/reference/actions.md#http\n"
    )
    assert diary_citations(text) == [
        (1, "cites a session ('fourth session')"),
        (1, "cites bench/README with no section"),
        (2, "cites bench/README with no section"),
        (3, "cites a session ('fifth session')"),
        (3, "cites a session ('session 10')"),
        (3, "cites bench/README.md with no section"),
    ]


def test_the_source_cites_benchmark_sections_not_sessions() -> None:
    """A comment or docstring of src/ gives a benchmark's rationale as ``bench/README.md#<section>`` (where the
    mechanism and its figures are, checked by test_every_cited_bench_section_exists) or as a script
    (``bench/store_cost.py``), never as the page alone or the session that measured it."""
    found = []
    for path in project_files():
        if path.is_relative_to(ROOT / "src"):
            for number, what in diary_citations(path.read_text(encoding="utf-8")):
                found.append(f"{path.relative_to(ROOT)}:{number}: {what}")
    assert not found, "cite bench/README.md#<section> instead:\n" + "\n".join(found)


@pytest.mark.parametrize("page", sorted(path.name for path in REFERENCE.glob("*.md")))
def test_every_link_of_a_reference_page_resolves(page: str) -> None:
    source = REFERENCE / page
    broken = []
    for target in LINK.findall(source.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target):
            continue  # an external URL
        file, _, anchor = unquote(target).partition("#")
        path = (source.parent / file).resolve() if file else source
        problem = unresolved(path, anchor or None)
        if problem:
            broken.append(f"{target}: {problem}")
    assert not broken, f"{page}: " + "; ".join(broken)


def test_the_reference_index_lists_every_page() -> None:
    index = (REFERENCE / "README.md").read_text(encoding="utf-8")
    listed = set(LINK.findall(index))
    missing = [path.name for path in REFERENCE.glob("*.md") if path.name != "README.md" and path.name not in listed]
    assert not missing, f"docs/reference/README.md does not list {missing}"
