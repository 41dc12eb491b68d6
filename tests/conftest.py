from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import settings

GOLDEN = Path(__file__).parent / "golden"

#: Property tests draw the same examples on every run (a test run, CI included, passes or fails for the
#: code, not for the draw); ``HYPOTHESIS_PROFILE=explore`` draws new ones, to look for failures.
settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="Rewrite tests/golden/*/*.jsonl from the code.")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def golden_cases(source: str) -> list[Path]:
    """The inputs of ``tests/golden/<source>/`` (every file that is not an expected ``.jsonl``)."""
    return sorted(p for p in (GOLDEN / source).iterdir() if p.suffix != ".jsonl" and p.is_file())


#: The bundled real incidents (``corpus/`` without its generated set ``corpus/synthetic/``): the tests
#: that count rows of the real samples read these.
REAL_CORPUS = sorted(p for p in (Path(__file__).parents[1] / "corpus").iterdir() if p.is_dir() and p.name != "synthetic")
#: The first 15 of them (``corpus/PROVENANCE.md`` before its December 2026 section): the tests that
#: print exact counts of a whole ingest read these.
FIRST_CORPUS = [
    p for p in REAL_CORPUS
    if f"| {p.name} |" in (p.parent / "PROVENANCE.md").read_text("utf-8").split("## Incidents gathered in December 2026")[0]
]


def first_samples() -> set[str]:
    """The names of the first 77 real samples (``tests/golden/PROVENANCE.md`` before its December 2026
    section): one launcher prefix style each, so that files can be mixed without changing what a
    share-based prefix decision sees."""
    text = (GOLDEN / "PROVENANCE.md").read_text("utf-8").split("## Samples gathered in December 2026")[0]
    return {m.group(1) for m in re.finditer(r"^\| [a-z]+/([^ |]+) \|", text, flags=re.MULTILINE)}
