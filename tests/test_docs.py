"""The README and the documentation site, as a newcomer reads them: short, every snippet runs as
written, every extra it names exists, every internal link leads somewhere, and the site builds
strictly."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from .readme_snippets import README, snippets

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
PYTHON_SNIPPETS = [s for s in snippets() if s.language == "python"]
SHELL_SNIPPETS = [s for s in snippets() if s.language == "bash"]


def test_the_readme_is_at_most_250_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_the_readme_has_the_sections_a_user_looks_for():
    headings = re.findall(r"^## (.+)$", README.read_text(encoding="utf-8"), re.M)
    for wanted in ("Install", "Quick start", "LangChain", "LlamaIndex", "Command line", "Stores", "More"):
        assert wanted in headings
    assert "bm25" in README.read_text(encoding="utf-8").lower()


@pytest.mark.slow
@pytest.mark.parametrize("snippet", PYTHON_SNIPPETS, ids=lambda s: f"{s.section}:{s.line}")
def test_every_python_snippet_of_the_readme_runs_as_written(snippet, tmp_path):
    script = tmp_path / "snippet.py"
    script.write_text(snippet.code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=ENV, cwd=tmp_path
    )
    assert proc.returncode == 0, f"README line {snippet.line}:\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), "a snippet shows its result"


@pytest.mark.slow
def test_every_command_of_the_readme_runs_as_written(tmp_path):
    """The `lmk-rag` lines run in order in a folder holding the examples, through the command's own
    parser and dispatch in this process (the model loads once; the wheel check runs the installed
    `lmk-rag` entry point itself); `pip install` lines are checked against the extras that exist."""
    from .cli_runner import run_cli

    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    ran = 0
    for snippet in SHELL_SNIPPETS:
        for line in snippet.code.splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            if words[:2] == ["pip", "install"]:
                _check_install_line(words)
                continue
            assert words[0] == "lmk-rag", f"README line {snippet.line}: no test runs {line!r}"
            proc = run_cli(*words[1:], cwd=tmp_path)
            assert proc.returncode == 0, f"{line}\n{proc.stderr[-2000:]}"
            if words[1] == "search" and "tides" in line:  # the shipped demo corpus (--sample): a PDF, cited by page
                first = proc.stdout.splitlines()[0]
                assert "tide_tables.pdf" in first and (" p. " in first or " pp. " in first), proc.stdout
            elif words[1] == "search" and "--context" in words:
                assert "[1] examples/sample_corpus/home_solar.md" in proc.stdout, proc.stdout
            elif words[1] == "search" and "--json" not in words:
                assert proc.stdout.splitlines()[0].startswith("1. examples/sample_corpus/home_solar.md"), proc.stdout
            ran += 1
    assert ran >= 4


def _check_install_line(words: list[str]) -> None:
    for word in words[2:]:
        match = re.fullmatch(r"lmk-rag\[([\w,-]+)\]", word)
        if match:
            for extra in match.group(1).split(","):
                assert extra in EXTRAS, f"pip install names an extra that does not exist: {extra}"


def test_every_extra_is_in_the_readme_table_and_every_named_extra_exists():
    text = README.read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `([\w-]+)` \|", text, re.M))
    assert set(EXTRAS) - {"test", "docs"} <= table
    for page in PAGES:
        for group in re.findall(r"lmk-rag\[([\w,-]+)\]", page.read_text(encoding="utf-8")):
            for extra in group.split(","):
                assert extra in EXTRAS, f"{page.name} names the extra {extra!r}, which does not exist"


def _links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_internal_link_leads_to_a_file_and_heading_that_exist(page):
    broken = []
    for link in _links(page):
        if re.match(r"[a-z]+:", link):
            continue  # http(s), mailto: not checked offline
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists() or (anchor and path.suffix == ".md" and anchor not in _anchors(path)):
            broken.append(link)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


def _anchors(page: Path) -> set[str]:
    """The ids of a Markdown page's headings, as MkDocs and GitHub make them."""
    heads = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-") for h in heads}


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    """`mkdocs build --strict`: a broken link between pages, a missing page in the nav, or an API
    reference entry that does not resolve fails the build."""
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed: pip install 'lmk-rag[docs]'")
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("mkdocs")), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**ENV, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "index.html").read_text().count("doc-heading") > 20


def test_a_broken_link_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("see [the guide](guides/missing.md) and [x](#nowhere)\n\n# Title\n")
    assert _links(page) == ["guides/missing.md", "#nowhere"]
    assert "nowhere" not in _anchors(page) and "title" in _anchors(page)
