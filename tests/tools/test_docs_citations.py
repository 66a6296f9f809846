"""The docs cite only what the repository holds: no file outside it (the specification and design notes are kept
elsewhere; their decisions are written in docs/decisions.md), every relative link of a page resolves, to its
heading too, and no docs page is longer than a reader takes in at once."""
import re

from tests.support import ROOT

SKIPPED = {".git", ".venv", ".data", "node_modules", "__pycache__", ".pytest_cache", "results", "storage"}
# Files kept outside the repository, which nothing in it may send a reader to.
OUTSIDE = re.compile(r"\b(?:DESIGN|SPEC|STYLE)\.md\b|/work/shared")
# A Markdown link's target: a path, a #heading, or both.
LINK = re.compile(r"\]\(([^)\s#]*)(?:#([^)\s]*))?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^#{1,6} (.+?)\s*#*$", re.M)
# A page of one kind (tutorial, how-to, reference, explanation) stays short enough to read whole;
# a longer one is two pages (docs/README.md lists them).
MOST_LINES = 350
# A page a file names, `docs/<page>.md`, and the section it quotes after it, if any: `(docs/webhooks.md, "Requests")`.
CITED_PAGE = re.compile(r"\bdocs/([\w-]+\.md)(?:'s)?(?:,? ?\(?\s*)(?:\"([^\"\n]+)\")?")


def text_files():
    """The repository's own source and documentation files."""
    for path in ROOT.rglob("*"):
        if path.is_file() and not SKIPPED & set(path.relative_to(ROOT).parts) \
                and path.suffix in {".md", ".py", ".sql", ".txt", ".yaml", ".yml", ".toml", ".ini", ".cfg", ""}:
            yield path


def pages():
    """The README, CONTRIBUTING and every docs page."""
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def anchors(page):
    """The anchors GitHub gives the headings of `page` (code blocks left out; a repeated heading gets -1, -2...)."""
    seen = {}
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
        yield slug if seen[slug] == 0 else f"{slug}-{seen[slug]}"


def test_nothing_cites_a_file_kept_outside_the_repository():
    cited = sorted(f"{path.relative_to(ROOT)}: {match.group(0)}" for path in text_files()
                   if path.name != "test_docs_citations.py"
                   for match in OUTSIDE.finditer(path.read_text(errors="replace")))
    assert cited == []


def test_every_relative_link_of_the_docs_resolves_to_its_file_and_heading():
    broken = []
    for page in pages():
        for target, anchor in LINK.findall(FENCE.sub("", page.read_text())):
            if "://" in target or target.startswith("mailto:"):
                continue
            linked = (page.parent / target) if target else page
            if not linked.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in set(anchors(linked)):
                broken.append(f"{page.relative_to(ROOT)}: {target}#{anchor}")
    assert broken == []


def test_every_docs_page_a_file_names_exists_with_the_section_it_quotes():
    """Code comments, error messages and pages send readers to `docs/<page>.md, "<section>"`: both must be there
    (a section moved to another page leaves its name and a link behind)."""
    missing = []
    for path in text_files():
        for page, section in CITED_PAGE.findall(path.read_text(errors="replace")):
            target = ROOT / "docs" / page
            if not target.exists():
                missing.append(f"{path.relative_to(ROOT)}: docs/{page}")
            elif section and section.lower() not in re.sub(r"[*`]", "", target.read_text()).lower():
                missing.append(f"{path.relative_to(ROOT)}: docs/{page}, {section}")
    assert missing == []


def test_the_anchor_of_a_heading_is_githubs():
    """Punctuation dropped, spaces to hyphens, code blocks' `# comments` not headings."""
    assert "settings-flask---app-app-webhooks-" in set(anchors(ROOT / "docs" / "webhooks.md"))
    assert "where-a-deliverys-time-goes" in set(anchors(ROOT / "docs" / "performance.md"))
    assert "search-q" in set(anchors(ROOT / "docs" / "decisions.md"))
    assert "crontab-one-bounded-pass-a-minute" not in set(anchors(ROOT / "docs" / "webhook-delivery.md"))


def test_no_docs_page_is_longer_than_350_lines():
    long = {page.name: lines for page in sorted((ROOT / "docs").glob("*.md"))
            if (lines := len(page.read_text().splitlines())) > MOST_LINES}
    assert long == {}


def test_every_docs_page_is_listed_in_the_index():
    index = (ROOT / "docs" / "README.md").read_text()
    unlisted = [page.name for page in sorted((ROOT / "docs").glob("*.md"))
                if page.name != "README.md" and f"]({page.name})" not in index]
    assert unlisted == []
