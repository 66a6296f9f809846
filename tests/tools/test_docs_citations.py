"""The docs cite only what the repository holds: no file outside it (the specification and design notes are kept
elsewhere; their decisions are written in docs/decisions.md), and every relative link of a page resolves."""
import re

from tests.support import ROOT

SKIPPED = {".git", ".venv", ".data", "node_modules", "__pycache__", ".pytest_cache", "results", "storage"}
# Files kept outside the repository, which nothing in it may send a reader to.
OUTSIDE = re.compile(r"\b(?:DESIGN|SPEC|STYLE)\.md\b|/work/shared")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def text_files():
    """The repository's own source and documentation files."""
    for path in ROOT.rglob("*"):
        if path.is_file() and not SKIPPED & set(path.relative_to(ROOT).parts) \
                and path.suffix in {".md", ".py", ".sql", ".txt", ".yaml", ".yml", ".toml", ".ini", ".cfg", ""}:
            yield path


def test_nothing_cites_a_file_kept_outside_the_repository():
    cited = sorted(f"{path.relative_to(ROOT)}: {match.group(0)}" for path in text_files()
                   if path.name != "test_docs_citations.py"
                   for match in OUTSIDE.finditer(path.read_text(errors="replace")))
    assert cited == []


def test_every_relative_link_of_the_docs_resolves():
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [f"{page.relative_to(ROOT)}: {target}" for page in pages for target in LINK.findall(page.read_text())
              if "://" not in target and not target.startswith("mailto:") and not (page.parent / target).exists()]
    assert broken == []
