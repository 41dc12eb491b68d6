from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"


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
