"""The command line the bench generators share: ``OUT [--SIZE N] [--seed S]``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path


def generator_main(doc: str, size: str, default: int, write: Callable[[Path, int, int], None]) -> None:
    """Parse ``OUT --<size> N --seed S`` and call ``write(out, n, seed)``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument(f"--{size}", type=int, default=default)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    write(args.out, getattr(args, size), args.seed)
