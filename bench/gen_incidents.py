"""A folder of many incidents for the ingest benchmark, deterministic for a seed.

Each incident is a copy of one of the bundled ``corpus/`` incidents (real log excerpts, see
``corpus/PROVENANCE.md``) under its own id and host names, packed in turn as the ways users archive
them: a plain folder, a folder of gzip-compressed logs, a ``.tar.gz``, a ``.tar.zst`` and a ``.zip``.
(``forensics synth`` will give labelled, larger incidents; this set measures the per-incident cost of
ingest on small real ones.)

    python bench/gen_incidents.py OUT --incidents 1000 [--seed 1]
"""

from __future__ import annotations

import gzip
import io
import random
import shutil
import zipfile
from pathlib import Path

import zstandard
from gen_common import generator_main

from forensics.synth import tar_bytes

CORPUS = Path(__file__).parents[1] / "corpus"
PACKAGINGS = ("folder", "gzip-files", "tar.gz", "tar.zst", "zip")
MTIME = 1737801000  # fixed member times: the same seed gives the same bytes


def _members(incident: Path, new_id: str, suffix: str) -> dict[str, bytes]:
    """The incident's files, renamed: a new id in incident.toml, each host folder ``<host>-<suffix>``."""
    out: dict[str, bytes] = {}
    for path in sorted(p for p in incident.rglob("*") if p.is_file()):
        rel = path.relative_to(incident)
        data = path.read_bytes()
        if rel.name == "incident.toml":
            data = data.replace(f'id = "{incident.name}"'.encode(), f'id = "{new_id}"'.encode(), 1)
            name = "incident.toml"
        else:
            name = "/".join([f"{rel.parts[0]}-{suffix}", *rel.parts[1:]])
        out[name] = data
    return out


def write(out: Path, incidents: int, seed: int = 1) -> None:
    sources = sorted(p for p in CORPUS.iterdir() if (p / "incident.toml").is_file())
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    r = random.Random(seed)
    for n in range(incidents):
        source = sources[r.randrange(len(sources))]
        new_id = f"{n:06d}-{source.name}"
        members = _members(source, new_id, f"{n:06d}")
        packaging = PACKAGINGS[n % len(PACKAGINGS)]
        if packaging in ("folder", "gzip-files"):
            for name, data in members.items():
                target = out / new_id / name
                target.parent.mkdir(parents=True, exist_ok=True)
                if packaging == "gzip-files" and name != "incident.toml":
                    target = target.with_name(target.name + ".gz")
                    data = gzip.compress(data, mtime=MTIME)
                target.write_bytes(data)
        elif packaging == "tar.gz":
            (out / f"{new_id}.tar.gz").write_bytes(gzip.compress(tar_bytes(new_id, members), mtime=MTIME))
        elif packaging == "tar.zst":
            (out / f"{new_id}.tar.zst").write_bytes(zstandard.ZstdCompressor(level=3).compress(tar_bytes(new_id, members)))
        else:
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
                for name, data in members.items():
                    z.writestr(zipfile.ZipInfo(f"{new_id}/{name}", date_time=(2025, 1, 25, 10, 30, 0)), data)
            (out / f"{new_id}.zip").write_bytes(buf.getvalue())


if __name__ == "__main__":
    generator_main(__doc__, "incidents", 1000, write)
