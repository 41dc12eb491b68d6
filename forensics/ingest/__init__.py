"""Ingest: incidents in any packaging → one Parquet dataset (:mod:`forensics.store`).

Stages: :mod:`.discover` (incidents and their files), :mod:`.archive` (packaging, in memory, capped),
:mod:`.bugreport` (sections), :mod:`.incident` (parse every member), :mod:`.align` (hosts, clocks,
identities). :func:`ingest` runs them over many incidents, in worker processes, and commits each
incident to the dataset as soon as it is read.

Incremental and idempotent: an incident whose files have the same sizes and modification times as
when it was stored is skipped without reading; one whose files changed is read, and replaced only if
its content digest changed.
"""

from __future__ import annotations

import os
import sys
import time
import types
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from ..errors import InputError
from ..store import Dataset, Record, incident_key
from .archive import Limits
from .discover import IncidentRef, find_incidents
from .incident import IncidentTables, digest, read_incident

__all__ = ["Done", "IngestReport", "fingerprint", "ingest", "ingest_one"]


@dataclass
class Done:
    """What happened to one incident: ``added``, ``replaced``, ``unchanged`` or ``failed``."""

    id: str
    path: str
    status: str
    files: int = 0
    events: int = 0
    bytes: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass
class IngestReport:
    """The result of one ingest run."""

    dataset: Path
    done: list[Done] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    cleaned: int = 0

    def count(self, status: str) -> int:
        return sum(1 for d in self.done if d.status == status)


def fingerprint(path: Path) -> str:
    """Sizes and modification times of every file of an incident (cheap: no file is read)."""
    if path.is_file():
        st = path.stat()
        return f"{st.st_size}:{st.st_mtime_ns}"
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(folder, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            h.update(f"{os.path.relpath(full, path)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def ingest_one(ref: IncidentRef, dataset: str, known: Record | None, limits: Limits) -> Done:
    """Read one incident and commit it to ``dataset`` (run in a worker process)."""
    start = time.perf_counter()
    store = Dataset(Path(dataset))
    key = incident_key(ref.id)
    print_ = fingerprint(ref.path)
    try:
        if known is not None and known.digest == digest(ref, Limits(limits.file_bytes, limits.incident_bytes)):
            store.touch(key, print_)
            return Done(ref.id, str(ref.path), "unchanged", seconds=time.perf_counter() - start)
        tables: IncidentTables = read_incident(ref, limits=limits)
        record = tables.incidents
        i = record.schema.get_field_index("fingerprint")
        tables.incidents = record.set_column(i, record.schema.field(i), pa.array([print_], pa.string()))
        store.commit(key, tables.tables())
    except Exception as exc:  # one broken incident must not stop the others; the report says why
        return Done(ref.id, str(ref.path), "failed", seconds=time.perf_counter() - start,
                    error=f"{type(exc).__name__}: {exc}")  # fmt: skip
    files = tables.files
    return Done(
        tables.id, str(ref.path), "replaced" if known is not None else "added",
        files=files.num_rows, events=tables.events.num_rows,
        bytes=int(sum(v or 0 for v in files.column("bytes").to_pylist())),
        seconds=time.perf_counter() - start,
    )  # fmt: skip


def ingest(
    paths: Iterable[str | Path],
    dataset: str | Path,
    *,
    jobs: int | None = None,
    max_file_bytes: int | None = None,
    max_incident_bytes: int | None = None,
    progress: Callable[[Done, int, int], None] | None = None,
) -> IngestReport:
    """Ingest the incidents under ``paths`` into the dataset folder ``dataset`` (made if missing).

    ``jobs``: worker processes (default: every core; 1 reads in this process). ``max_file_bytes`` and
    ``max_incident_bytes`` cap decompressed bytes (defaults 1 GiB and 8 GiB). ``progress(done, n, total)``
    is called after each incident.
    """
    found = find_incidents([Path(p) for p in paths])
    store = Dataset.create(dataset)
    limits = Limits()
    if max_file_bytes is not None:
        limits.file_bytes = max_file_bytes
    if max_incident_bytes is not None:
        limits.incident_bytes = max_incident_bytes
    if limits.file_bytes <= 0 or limits.incident_bytes <= 0:
        raise InputError("the byte caps must be positive")
    report = IngestReport(store.root, skipped=found.skipped)
    with store.lock():
        report.cleaned = store.clean()
        state = store.state()
        todo: list[tuple[IncidentRef, Record | None]] = []
        for ref in found.incidents:
            known = state.get(incident_key(ref.id))
            if known is not None and known.fingerprint == fingerprint(ref.path) and known.path == str(ref.path):
                report.done.append(Done(ref.id, str(ref.path), "unchanged"))
                continue
            todo.append((ref, known))
        total = len(found.incidents)
        for n, d in enumerate(report.done, 1):
            if progress:
                progress(d, n, total)
        workers = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
        if workers == 1:
            for ref, known in todo:
                _finish(report, ingest_one(ref, str(store.root), known, limits), progress, total)
        else:
            _run_pool(todo, str(store.root), limits, workers, report, progress, total)
    return report


def _finish(report: IngestReport, done: Done, progress: Callable[[Done, int, int], None] | None, total: int) -> None:
    report.done.append(done)
    if progress:
        progress(done, len(report.done), total)


def _run_pool(todo: list[tuple[IncidentRef, Record | None]], root: str, limits: Limits, workers: int,
              report: IngestReport, progress: Callable[[Done, int, int], None] | None, total: int) -> None:  # fmt: skip
    import multiprocessing

    # Fresh interpreters ("spawn"): forking a process that runs Polars' thread pool is unsafe. Each
    # worker parses one incident at a time with one Polars thread, so N workers keep N cores busy.
    context = multiprocessing.get_context("spawn")
    saved = os.environ.get("POLARS_MAX_THREADS")
    os.environ["POLARS_MAX_THREADS"] = "1"  # inherited by the workers as they start
    try:
        _pool(context, todo, root, limits, workers, report, progress, total)
    finally:
        if saved is None:
            os.environ.pop("POLARS_MAX_THREADS", None)
        else:
            os.environ["POLARS_MAX_THREADS"] = saved


def _pool(context, todo, root, limits, workers, report, progress, total) -> None:  # type: ignore[no-untyped-def]
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        pending: set[Future[Done]] = set()
        queue = list(todo)
        while queue or pending:
            while queue and len(pending) < workers * 2:
                ref, known = queue.pop(0)
                pending.add(pool.submit(ingest_one, ref, root, known, limits))
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                _finish(report, future.result(), progress, total)



class _Callable(types.ModuleType):
    """``forensics.ingest(...)`` runs :func:`ingest`, while ``forensics.ingest.discover`` and the other
    stages stay importable: a function of the same name would hide the package."""

    def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return ingest(*args, **kwargs)


sys.modules[__name__].__class__ = _Callable
