"""The repository holds its own test data: every real sample has its provenance, and no file of the
project reads a path outside the repository (a clone with nothing beside it must pass ``make test``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .conftest import GOLDEN, golden_cases

ROOT = Path(__file__).parents[1]
SOURCES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())

# A path that leaves the repository: the team's folder beside it, or a parent of the repository root.
OUTSIDE = re.compile(
    r"\.\./" r"shared\b"  # written in two pieces so that this file does not name it
    r"|\bshared/(?:samples|reference|hooks|DESIGN\.md|STYLE\.md)"
    r"|\b(?:ROOT|REPO)\.parent\b"
)
PARENTS = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")


def _project_files() -> list[Path]:
    """The tracked files (every file but the virtualenv and build output where git is absent)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache"}
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.parts)]
    return [ROOT / n for n in names if (ROOT / n).is_file()]


def outside_paths(path: Path, text: str) -> list[str]:
    """The places in one file that name a path outside the repository.

    >>> outside_paths(Path("x.py"), 'A = Path(__file__).parents[1] / "data"\\nB = Path(__file__).parents[0]')
    ['x.py:1: Path(__file__).parents[1]']
    >>> len(outside_paths(Path("notes.md"), "see ../" "shared/" "samples, or shared/" "reference/FACTS.md"))
    2
    """
    depth = len(path.parts) - 1  # folders between the repository root and the file
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        found += [f"{path}:{number}: {m.group(0)}" for m in OUTSIDE.finditer(line)]
        found += [f"{path}:{number}: {m.group(0)}" for m in PARENTS.finditer(line) if int(m.group(1)) > depth]
    return found


def test_no_project_file_names_a_path_outside_the_repository() -> None:
    found = []
    for path in _project_files():
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        found += outside_paths(path.relative_to(ROOT), data.decode("utf-8", "replace"))
    assert not found, "\n".join(found)


def _provenance_rows() -> dict[str, str]:
    text = (GOLDEN / "PROVENANCE.md").read_text("utf-8")
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| ([a-z]+/[^ |]+) \|.*$", text, flags=re.MULTILINE)}


def test_every_real_sample_has_its_provenance_and_every_row_its_file() -> None:
    rows = _provenance_rows()
    inputs = {f"{source}/{case.name}" for source in SOURCES for case in golden_cases(source)}
    # a journal excerpt is an input of kernel/ too, under its journal row
    described = set(rows) | {f"kernel/{name.split('/', 1)[1]}" for name in rows if name.startswith("journal/")}
    assert sorted(inputs - described) == []
    assert sorted(set(rows) - inputs) == []
    for name, row in rows.items():
        cells = [c.strip() for c in row.split(" | ")]
        # where it came from: a link, or (forum archives the index shows without one) the thread named
        assert len(cells) >= 5 and ("https://" in row or re.search(r"\b(?:thread|post)\b", row)), name


def test_every_golden_input_has_its_expected_rows() -> None:
    missing = [f"{s}/{c.name}" for s in SOURCES for c in golden_cases(s) if not c.with_suffix(".jsonl").exists()]
    assert missing == []
