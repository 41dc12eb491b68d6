"""The signals index: the few events of a dataset that the rules can use, kept in one file.

Diagnosis reads a few percent of the events (:func:`~forensics.mine.engine.select_rows`), but finding
them means opening every incident's events file: on 10,000 incidents, reading and selecting costs
more than the diagnosis itself. ``forensics ingest`` therefore ends by writing what the selection
keeps into one file::

    DATASET/signals/<fingerprint>.parquet

``<fingerprint>`` names the selection (the predicates of the rule library and the engine's code): a
different library, or another version of this package, has another fingerprint and reads none of it.
The file's metadata records the content digest of each incident it holds; :func:`load` returns the
rows of the incidents whose digest still matches the dataset and names the others, which diagnosis
then reads from their events as before. So the index is only ever a shortcut: a missing, stale or
unreadable one gives the same diagnoses, slower.

Each refresh (:func:`refresh`, at the end of every ingest, under the dataset's lock) keeps the rows of
unchanged incidents, selects those of new and changed ones, and replaces the file atomically.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from .. import messages, versions
from ..schema import EVENTS
from ..store import Dataset, OpenDataset, _replacing
from . import engine, words
from .language import Library, load_library

FOLDER = "signals"
_META = b"forensics.signals"
#: Rows per row group of the index file: a chunk of incidents is read without the rest of the file.
ROW_GROUP = 65_536
#: Incidents read from their events files at once while refreshing (memory stays bounded by it).
CHUNK = 500


def fingerprint(library: Library) -> str:
    """What the selection depends on: every predicate the library's rules and followers test, the
    kinds they name, the message catalogs and version statements and tables, and the source of the engine
    that applies them."""
    source = b"".join(Path(m.__file__).read_bytes() for m in (engine, messages, versions, words))  # type: ignore[arg-type]
    text = repr((engine._matches(library), sorted(library.kinds()), engine.DETAIL_KEYS, engine._EXTRA,
                 messages.load().entries, messages.load().codes, versions.statements(), versions.cuda_releases(),
                 versions.architectures(), messages.load().defaults, words.load()))
    return hashlib.blake2b(source + text.encode(), digest_size=8).hexdigest()


def path_of(root: str | Path, library: Library) -> Path:
    return Path(root) / FOLDER / f"{fingerprint(library)}.parquet"


@dataclass(frozen=True)
class Index:
    """A usable index file: :meth:`rows` reads the rows of some of its incidents."""

    path: Path

    def rows(self, ids: list[str]) -> pl.DataFrame:
        """The indexed rows of ``ids``. The file is sorted by incident in row groups of
        :data:`ROW_GROUP` rows, so a run of neighbouring ids reads only its own row groups."""
        return pl.scan_parquet(self.path).filter(pl.col("incident").is_in(ids)).collect()


def load(ds: OpenDataset, library: Library, ids: Iterable[str]) -> tuple[Index | None, list[str]]:
    """The index of ``ds`` for ``library``, and those of the incidents ``ids`` it cannot answer for
    (not indexed, or changed since: their stored digest differs). ``(None, ids)`` when there is no
    usable index."""
    ids = list(ids)
    path = path_of(ds.root, library)
    held = _held(path)
    if held is None:
        return None, ids
    digests = {r.id: r.digest for r in ds._state.values()}
    stale = [i for i in ids if held.get(i) is None or held.get(i) != digests.get(i)]
    if len(stale) == len(ids):
        return None, ids
    return Index(path), stale


def _held(path: Path) -> dict[str, str] | None:
    """The incident → digest map of an index file (None when it is missing or unreadable)."""
    try:
        meta = pq.read_schema(path).metadata or {}
        return dict(json.loads(meta[_META])["incidents"])
    except (OSError, KeyError, ValueError, TypeError, pa.ArrowException):
        return None


def refresh(root: str | Path, library: Library | None = None, *, workers: int = 2) -> dict[str, Any]:
    """Bring the index of the dataset at ``root`` up to date with its committed incidents (call it
    holding the dataset's lock). Returns what it did: ``kept``, ``selected`` (incidents), ``rows``."""
    library = library or load_library()
    store = Dataset.open(root)
    state = store.state()
    path = path_of(store.root, library)
    path.parent.mkdir(exist_ok=True)
    held = _held(path) or {}
    digests = {r.id: r.digest for r in state.values()}
    keep = [i for i, d in digests.items() if held.get(i) == d]
    todo = sorted(set(digests) - set(keep))
    if not todo and len(keep) == len(held):
        return {"kept": len(keep), "selected": 0, "rows": None}
    files = {r.id: str(store.part_path("events", r.key, r.digest)) for r in state.values()}
    gpus = {r.id: str(store.part_path("gpus", r.key, r.digest)) for r in state.values()}
    columns = [*engine._COLUMNS, "detail"]
    empty = engine.select_rows(pl.from_arrow(EVENTS.empty_table()).select(columns), library)  # type: ignore[union-attr]
    kept = set(keep)
    old = Index(path) if keep else None

    def part(group: list[str]) -> pa.Table:
        """The index rows of a run of neighbouring incidents: the unchanged ones' from the old file,
        the others' selected from their events."""
        fresh = [i for i in group if i not in kept]
        frames = [old.rows([i for i in group if i in kept])] if old is not None and len(fresh) < len(group) else []
        if fresh:
            frames.append(engine.select_rows(pl.scan_parquet([files[i] for i in fresh]).select(columns).collect(), library,
                                             gpus=pl.scan_parquet([gpus[i] for i in fresh])))  # fmt: skip
        rows = pl.concat([f.cast(empty.schema) for f in frames]) if frames else empty  # type: ignore[arg-type]
        return rows.sort("incident", maintain_order=True).to_arrow()

    # Written a chunk at a time, in incident order: memory is bounded by the chunks in flight.
    ids = sorted(digests)
    groups = [ids[i : i + CHUNK] for i in range(0, len(ids), CHUNK)]
    schema = empty.to_arrow().schema.with_metadata({_META: json.dumps({"incidents": {i: digests[i] for i in ids}}).encode()})
    written = 0
    with _replacing(path) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd") as out, \
            ThreadPoolExecutor(max(1, workers)) as pool:  # fmt: skip
        for n in range(0, len(groups), max(1, workers)):
            for table in pool.map(part, groups[n : n + max(1, workers)]):
                out.write_table(table.replace_schema_metadata(schema.metadata), row_group_size=ROW_GROUP)
                written += table.num_rows
    for other in path.parent.glob("*.parquet"):  # indexes of other libraries or versions
        if other != path:
            other.unlink(missing_ok=True)
    return {"kept": len(keep), "selected": len(todo), "rows": written}
