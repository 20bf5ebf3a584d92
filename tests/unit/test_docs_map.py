"""The front page and the package map stay complete: every module under capsule/ is named in
capsule/README.md's map (in its package's row), and every page under docs/ is linked from README.md.

A module added without a line in the map, or a docs page nobody can reach from the front page, fails
here; what the map says about each module is for people to read, only its presence is checked.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "capsule"
TICKED = re.compile(r"`([^`]+)`")


def map_rows() -> dict[str, set[str]]:
    """Each row of capsule/README.md's table: the packages its second cell names (`prereg/`, `cli.py`)
    -> every backticked name in the row."""
    rows: dict[str, set[str]] = {}
    for line in (PACKAGE / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 4 or set(cells[0]) <= {"-"}:
            continue
        names = set(TICKED.findall(line))
        for package in TICKED.findall(cells[1]):
            rows.setdefault(package, set()).update(names)
    return rows


def unmapped_modules() -> list[str]:
    """The modules under capsule/ that the map does not name in their own package's row."""
    rows = map_rows()
    everywhere = set().union(*rows.values())
    missing: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if path.name == "__init__.py":
            continue
        if len(relative.parts) == 1:  # capsule/errors.py: in the ground row, or `cli.py` in its own
            named = path.stem in everywhere or path.name in everywhere
        else:
            row = rows.get(f"{relative.parts[0]}/", set())
            inner = [f"{part}/" for part in relative.parts[1:-1]]  # generation/backends/hf.py: `backends/`
            named = path.stem in row and all(part in row for part in inner)
        if not named:
            missing.append(str(path.relative_to(ROOT)))
    return missing


def test_every_module_under_capsule_is_in_the_package_map() -> None:
    missing = unmapped_modules()
    assert not missing, f"add these modules to capsule/README.md's map, in their package's row: {missing}"


def test_the_map_check_sees_a_module_missing_from_its_row() -> None:
    """The check reads the right rows: `verify` is in the evidence row, not in pipeline's."""
    rows = map_rows()
    assert "verify" in rows["evidence/"] and "verify" not in rows["pipeline/"]
    assert "loader" in rows["prereg/"] and "errors" in rows["capsule/"]


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pages = sorted((ROOT / "docs").glob("*.md"))
    unlinked = [page.name for page in pages if f"](docs/{page.name})" not in readme]
    assert not unlinked, f"link these docs pages from README.md: {unlinked}"


def test_the_readme_is_a_front_page() -> None:
    """README.md stays a front page (issue 29): at most 200 lines; the rest lives in docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 200, f"README.md has {lines} lines; move a topic into a docs/ page"
