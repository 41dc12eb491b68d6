"""Score real incidents blind: ingest them, diagnose, and print one ledger row each.

    python bench/blind.py --batch 1 DIR...    # rows for corpus/BLIND.md, then a per-cause summary

Each DIR is an incident folder with an ``incident.toml`` naming ``[label] root_cause`` (the cause the public
thread established) and, since batch 9, ``[label] evidence``: ``logs`` when a line of its files names the cause,
``prose`` when only the thread's words do (the summary scores the two apart). The diagnosis comes from whichever ``forensics`` package Python imports, so an older
commit is scored with ``PYTHONPATH=<its checkout>``; the row names the commit of that package's checkout.
Nothing here reads the labels before the diagnosis is made: ``forensics.diagnose`` never reads them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter
from pathlib import Path

import forensics


def _commit() -> str:
    root = Path(forensics.__file__).resolve().parent.parent
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--date", default=dt.date.today().isoformat())
    args = ap.parse_args(argv)
    dirs = sorted(d for d in args.dirs if (d / "incident.toml").is_file())
    truth, shows = {}, {}
    for d in dirs:
        meta = tomllib.loads((d / "incident.toml").read_text("utf-8"))
        truth[meta.get("id", d.name)] = meta["label"]["root_cause"]
        # Where the established cause shows (the gatherer's judgement): "logs" when a line of the files names
        # it, "prose" when only the thread's words do; unrecorded before batch 9.
        shows[meta.get("id", d.name)] = meta["label"].get("evidence", "unrecorded")
    with tempfile.TemporaryDirectory() as tmp:
        forensics.ingest(dirs, Path(tmp) / "ds", jobs=2)
        got = forensics.diagnose(forensics.open_dataset(Path(tmp) / "ds"))
    answers = dict(zip(got["incident"].to_list(), got["root_cause"].to_list(), strict=True))
    commit = _commit()
    right: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    where_right: Counter[str] = Counter()
    where_seen: Counter[str] = Counter()
    for incident, cause in sorted(truth.items()):
        answer = answers.get(incident, "unknown")
        ok = answer == cause
        seen[cause] += 1
        right[cause] += ok
        where_seen[shows[incident]] += 1
        where_right[shows[incident]] += ok
        print(f"| {args.batch} | {args.date} | {commit} | {incident} | {answer} | {cause} | {'yes' if ok else 'no'} |")
    total = sum(right.values())
    print(f"\nbatch {args.batch} at {commit}: {total}/{len(truth)} right "
          f"({100 * total / max(len(truth), 1):.1f}%)", file=sys.stderr)  # fmt: skip
    for cause in sorted(seen):
        print(f"  {cause:<18} {right[cause]}/{seen[cause]}", file=sys.stderr)
    print("  where the cause shows: " + ", ".join(f"{w} {where_right[w]}/{where_seen[w]}" for w in sorted(where_seen)),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
