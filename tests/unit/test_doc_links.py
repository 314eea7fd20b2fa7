"""Every relative link in README.md and docs/ points at a file that exists, and at a heading that exists there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_anchors_are_githubs(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Design notes\n## Calibration: the CTRL+Z test\n```\n# not a heading\n```\n")
    page.write_text(page.read_text() + "## Limits\n## Limits\n")
    assert anchors(page) == {"design-notes", "calibration-the-ctrlz-test", "limits", "limits-1"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_doc_links_resolve(page: Path) -> None:
    for link in relative_links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.name} links to {link}: no such file"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{page.name} links to {link}: no such heading"
