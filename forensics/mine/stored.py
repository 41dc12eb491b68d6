"""Diagnoses kept in the dataset (``DATASET/diagnoses/``), served only while they are fresh.

A stored diagnosis carries the content ``digest`` of the incident it was made from and the ``rules``
fingerprint (:func:`fingerprint`: the rule library, the message catalogs and the code of the
diagnosis). :func:`diagnoses` returns the stored rows whose digest and fingerprint are the current
ones, diagnoses the other incidents and stores them. A changed incident's old diagnosis is deleted
with its old data (:meth:`forensics.store.Dataset.commit`), so a glob of ``diagnoses/*.parquet`` never
holds a diagnosis of data the dataset no longer has; one made with other rules stays until
``forensics diagnose`` replaces it, its ``rules`` column telling which.
"""

from __future__ import annotations

import hashlib
import sys
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl

from .. import messages, versions
from ..schema import DIAGNOSES
from ..store import DIAGNOSES as FOLDER
from . import words
from .diagnose import diagnose
from .language import Library, load_library


def fingerprint(library: Library) -> str:
    """What a diagnosis depends on besides the data: the library's rules and followers, the message
    catalogs, and the code that applies them (so a new version of the package redoes the diagnoses)."""
    return _fingerprint(repr((library.rules, library.followers)))


@cache
def _fingerprint(rules: str) -> str:
    # Every module of the mining package (the engine, the diagnosis, the words, the collectives …) and the
    # readers of messages and versions: a change to any of them redoes the diagnoses.
    modules = sorted(Path(sys.modules[diagnose.__module__].__file__).parent.glob("*.py"))  # type: ignore[arg-type]
    code = b"".join(p.read_bytes() for p in [*modules, Path(messages.__file__), Path(versions.__file__)])  # type: ignore[arg-type]
    catalog = repr((messages.load().entries, messages.load().codes, messages.load().defaults, words.load())).encode()
    return hashlib.blake2b(code + catalog + rules.encode(), digest_size=8).hexdigest()


def stored(ds: Any, library: Library, ids: list[str] | None = None) -> pl.DataFrame:
    """The fresh stored diagnoses of ``ds`` (of ``ids``, default all), in :data:`DIAGNOSES` columns."""
    current = fingerprint(library)
    wanted = None if ids is None else set(ids)
    files = [
        (r.id, r.digest, path) for r in ds._state.values()
        if (wanted is None or r.id in wanted) and (path := ds.store.part_path(FOLDER, r.key, r.digest)).is_file()
    ]  # fmt: skip
    empty = pl.DataFrame(pl.from_arrow(DIAGNOSES.empty_table()))
    if not files:
        return empty
    try:
        rows = pl.scan_parquet([str(f) for _, _, f in files]).collect()
    except (OSError, pl.exceptions.PolarsError):
        return empty  # unreadable: diagnosed again
    digests = pl.DataFrame({"incident": [i for i, _, _ in files], "_digest": [d for _, d, _ in files]})
    fresh = rows.join(digests, on="incident").filter((pl.col("digest") == pl.col("_digest")) & (pl.col("rules") == current))
    return fresh.drop("_digest").cast(empty.schema)  # type: ignore[arg-type]


def diagnoses(ds: Any, *, incident: str | None = None, library: Library | None = None, save: bool = True) -> pl.DataFrame:
    """Every incident's diagnosis (or ``incident``'s): fresh stored ones, the rest diagnosed now and,
    with ``save``, stored. Sets ``ds.save_error`` when storing failed (a read-only dataset)."""
    library = library or load_library()
    digests = {r.id: r.digest for r in ds._state.values()}
    ids = sorted(digests) if incident is None else [incident] * (incident in digests)
    fresh = stored(ds, library, ids)
    todo = sorted(set(ids) - set(fresh.get_column("incident").to_list()))
    ds.save_error = None
    if not todo:
        return fresh.sort("incident")
    new = diagnose(ds, incidents=todo, library=library).with_columns(
        digest=pl.col("incident").replace_strict(digests, return_dtype=pl.String),
        rules=pl.lit(fingerprint(library)),
    )
    new = to_schema(new)
    if save:
        try:
            ds.store.write_diagnoses(new.to_arrow().cast(DIAGNOSES), ds._state)
        except OSError as exc:
            ds.save_error = f"{exc.strerror or exc}: {getattr(exc, 'filename', '') or ds.root}"
    return pl.concat([fresh, new]).sort("incident")


def to_schema(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (diagnoses with ``digest`` and ``rules``) in the exact columns and types of :data:`DIAGNOSES`."""
    empty: pl.DataFrame = pl.from_arrow(DIAGNOSES.empty_table())  # type: ignore[assignment]
    return frame.select(empty.columns).cast(empty.schema)  # type: ignore[arg-type]


__all__ = ["diagnoses", "fingerprint", "stored", "to_schema"]
