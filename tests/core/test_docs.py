"""The docs stay current: what they cite exists, the README's test command is CI's, the manual keeps its sections."""
import re

import pytest

from ..workflow.conftest import ROOT

# Pages whose backticked paths are relative to the repository root.
PAGES = ["README.md", "docs/operations.md", "benchmarks/README.md",
         *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs" / "results").glob("*/README.md")))]
PAPERS = sorted((ROOT / "docs" / "papers").glob("*.md"))
TRACKED_TOPS = ("src/", "tests/", "workflow/", "benchmarks/", "tools/", "docs/", ".ci/", "params.yaml", "dvc.yaml",
                "Snakefile", "pyproject.toml")


def cited_paths(text: str):
    """Backticked tokens that name a file or folder of the checkout (run outputs and patterns left out)."""
    for token in re.findall(r"`([^`\s]+)", text):
        path = token.rstrip(".,;:)").split(":")[0]
        if path.startswith(TRACKED_TOPS) and not any(c in path for c in "<{*$|"):
            yield path


def links(text: str):
    """Relative targets of Markdown links, without their anchors."""
    return [t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if not t.startswith(("http:", "https:"))]


@pytest.mark.parametrize("page", PAGES)
def test_the_paths_and_links_a_page_cites_exist(page):
    text = (ROOT / page).read_text()
    missing = [p for p in cited_paths(text) if not (ROOT / p).exists()]
    missing += [t for t in links(text) if not (ROOT / page).parent.joinpath(t).exists()]
    assert not missing, f"{page} cites what is not in the checkout: {missing}"


@pytest.mark.parametrize("paper", PAPERS, ids=lambda p: p.name)
def test_a_paper_page_names_files_and_functions_that_exist(paper):
    """``path.py``: ``name``, ``name`` in a cell: the file exists (under ``src/relin/`` unless the path says
    otherwise) and defines or mentions each name."""
    missing = []
    for cell in re.split(r"[;|\n]", paper.read_text()):
        found = re.match(r"\s*`([\w/]+\.py)`\s*:\s*(.*)", cell)
        if not found:
            continue
        name, names = found.groups()
        path = ROOT / name if name.startswith(("workflow/", "benchmarks/", "tools/")) else ROOT / "src/relin" / name
        if not path.is_file():
            missing.append(name)
            continue
        source = path.read_text()
        missing += [f"{name}: {n}" for n in re.findall(r"`([A-Za-z_]\w*)[`(.]", names)
                    if not re.search(rf"\b{n}\b", source)]
    assert not missing, f"{paper.name} names what the code no longer has: {missing}"


def test_the_readme_test_command_is_what_ci_runs():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip().startswith("pytest")]
    assert len(ci) == 1, ci
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    commands = [line.strip() for block in blocks for line in block.splitlines() if line.strip().startswith("pytest")]
    assert commands == ci, f"README runs {commands}, .ci/run runs {ci}"


def test_the_manual_keeps_the_recovery_section():
    headings = re.findall(r"^## (.+)$", (ROOT / "docs" / "operations.md").read_text(), re.M)
    assert "Recovery after an interrupted run" in headings
    assert "[docs/operations.md](docs/operations.md)" in (ROOT / "README.md").read_text()


def test_the_readme_stays_an_index():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 180, f"README.md has {lines} lines: the manual belongs in docs/operations.md"
