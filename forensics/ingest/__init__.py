"""Ingest: incidents in any packaging → one Parquet dataset (:mod:`forensics.store`).

Stages: :mod:`.discover` (incidents and their files), :mod:`.archive` (packaging, in memory, capped),
:mod:`.bugreport` (sections), :mod:`.incident` (parse every member), :mod:`.align` (hosts, clocks,
identities). :func:`ingest` runs them over many incidents, in worker processes, and commits each
incident to the dataset as soon as it is read.

Incremental and idempotent: an incident whose files have the same sizes and modification times as
when it was stored is skipped without reading; one whose files changed is read, and replaced only if
its content digest changed.

Engines: ``processes`` (default) runs a pool of local worker processes; ``dask`` submits one task per
incident to a Dask distributed cluster (:func:`_run_dask`). Either way each worker writes its
incident's Parquet parts and commit record straight into the dataset folder, and only the small
:class:`Done` summary travels back, so the dataset folder must be one that every worker sees at the
same path.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from .._modules import make_callable
from ..errors import InputError
from ..store import Dataset, Record, incident_key
from . import archive
from .archive import Limits
from .discover import IncidentRef, Skipped, find_incidents, walk_files
from .incident import IncidentTables, digest, read_incident

__all__ = ["ENGINES", "Done", "IngestReport", "fingerprint", "ingest", "ingest_one"]

#: Where the incidents are read: local worker processes, or a Dask distributed cluster.
ENGINES = ("processes", "dask")


@dataclass
class Done:
    """What happened to one incident: ``added``, ``replaced``, ``unchanged`` or ``failed``; and, for one
    that was read, each file with a problem (``(file, why)``, as in ``files.error``) and each file no
    source claimed (``(file, lines)``)."""

    id: str
    path: str
    status: str
    files: int = 0
    events: int = 0
    gpus: int = 0
    metrics: int = 0
    bytes: int = 0
    seconds: float = 0.0
    error: str | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)
    unclaimed: list[tuple[str, int]] = field(default_factory=list)

    @property
    def whole(self) -> bool:
        """False when some bytes of the incident could not be read (a truncated or corrupt archive, an
        unreadable file, a cap reached) or the incident failed."""
        return self.status != "failed" and not any(archive.is_loss(why) for _, why in self.problems)

    @property
    def empty(self) -> bool:
        """True for an incident that was read and gave no row at all (no file, or none with a row)."""
        return self.status in ("added", "replaced") and self.events + self.gpus + self.metrics == 0


@dataclass
class IngestReport:
    """The result of one ingest run."""

    dataset: Path
    done: list[Done] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    cleaned: int = 0
    #: What the refresh of the signals index did (:func:`forensics.mine.signals.refresh`), or why it failed.
    index: dict | None = None
    index_error: str | None = None

    def count(self, status: str) -> int:
        return sum(1 for d in self.done if d.status == status)

    @property
    def whole(self) -> bool:
        """Whether every incident of this run was read whole (:attr:`Done.whole`)."""
        return all(d.whole for d in self.done)


def fingerprint(path: Path) -> str:
    """Sizes and modification times of every file of an incident (cheap: no file is read)."""
    if path.is_file():
        st = path.stat()
        return f"{st.st_size}:{st.st_mtime_ns}"
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for rel, full, why in walk_files(path):
        try:
            st = full.stat() if why is None else full.lstat()
        except OSError:
            continue
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{why}\n".encode())
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
        store.commit(key, tables.tables(), replaces=known.digest if known is not None and known.digest else None)
    except Exception as exc:  # one broken incident must not stop the others; the report says why
        return Done(ref.id, str(ref.path), "failed", seconds=time.perf_counter() - start,
                    error=f"{type(exc).__name__}: {exc}")  # fmt: skip
    files = tables.files.select(["file", "source", "lines", "error"]).to_pylist()
    return Done(
        tables.id, str(ref.path), "replaced" if known is not None else "added",
        files=len(files), events=tables.events.num_rows, gpus=tables.gpus.num_rows, metrics=tables.metrics.num_rows,
        bytes=int(sum(v or 0 for v in tables.files.column("bytes").to_pylist())),
        seconds=time.perf_counter() - start,
        problems=[(f["file"], f["error"]) for f in files if f["error"]],
        unclaimed=[(f["file"], f["lines"]) for f in files if f["source"] is None and not f["error"]],
    )  # fmt: skip


def ingest(
    paths: Iterable[str | Path],
    dataset: str | Path,
    *,
    jobs: int | None = None,
    max_file_bytes: int | None = None,
    max_incident_bytes: int | None = None,
    progress: Callable[[Done, int, int], None] | None = None,
    engine: str = "processes",
    scheduler: str | None = None,
) -> IngestReport:
    """Ingest the incidents under ``paths`` into the dataset folder ``dataset`` (made if missing).

    ``jobs``: worker processes (default: every core; 1 reads in this process). ``max_file_bytes`` and
    ``max_incident_bytes`` cap decompressed bytes (defaults 1 GiB and 8 GiB). ``progress(done, n, total)``
    is called after each incident. ``engine="dask"`` runs the incidents on the Dask scheduler at
    ``scheduler`` (``tcp://host:8786``), or on a local cluster of ``jobs`` workers when none is given.
    """
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if scheduler is not None and engine != "dask":
        raise InputError("a scheduler address needs the dask engine (--engine dask)")
    # Absolute paths: they are what the incidents table records, and what a worker on another
    # machine (sharing the file system) opens.
    found = find_incidents([Path(p).expanduser().absolute() for p in paths])
    store = Dataset.create(Path(dataset).expanduser().absolute())
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
        if engine == "dask":
            if todo:
                _run_dask(todo, str(store.root), limits, scheduler, workers, report, progress, total)
        elif workers == 1:
            for ref, known in todo:
                _finish(report, ingest_one(ref, str(store.root), known, limits), progress, total)
        else:
            _run_pool(todo, str(store.root), limits, workers, report, progress, total)
        _index(report)
    return report


def _index(report: IngestReport) -> None:
    """Refresh the dataset's signals index (:mod:`forensics.mine.signals`). The index is a shortcut
    for diagnosis, never the only copy of anything: when it cannot be written, the ingest still
    stands and the failure is reported."""
    import polars as pl

    from ..mine import signals

    try:
        report.index = signals.refresh(report.dataset)
    except (OSError, pl.exceptions.PolarsError, pa.ArrowException) as e:
        report.index_error = str(e) or type(e).__name__


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
        queue = deque(todo)
        while queue or pending:
            while queue and len(pending) < workers * 2:
                ref, known = queue.popleft()
                pending.add(pool.submit(ingest_one, ref, root, known, limits))
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                _finish(report, future.result(), progress, total)


def _run_dask(todo: list[tuple[IncidentRef, Record | None]], root: str, limits: Limits, scheduler: str | None,
              workers: int, report: IngestReport, progress: Callable[[Done, int, int], None] | None,
              total: int) -> None:  # fmt: skip
    """One task per incident on a Dask cluster; a bounded window of tasks is in flight at a time, so
    millions of incidents never sit in the scheduler at once. A worker lost mid-incident has its task
    rerun elsewhere: the commit is atomic, so a half-written incident is never visible."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as exc:
        raise InputError("the dask engine needs the distributed package: pip install 'gpu-forensics[dask]'") from exc

    cluster = None
    try:
        if scheduler is None:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, env={"POLARS_MAX_THREADS": "1"})  # fmt: skip
            client = Client(cluster)
        else:
            client = Client(scheduler, timeout="30s")
    except (OSError, TimeoutError, ValueError) as exc:
        if cluster is not None:
            cluster.close()
        raise InputError(f"cannot reach the Dask scheduler at {scheduler or 'a local cluster'}: {exc}") from exc
    try:
        if scheduler is not None:
            _check_workers(client)
        slots = max(1, sum(client.nthreads().values()))
        queue = deque(todo)
        running = as_completed()
        refs: dict[str, IncidentRef] = {}
        run = os.urandom(4).hex()  # task keys unique per run, readable on the dashboard

        def submit() -> None:
            ref, known = queue.popleft()
            future = client.submit(ingest_one, ref, root, known, limits, pure=False,
                                   key=f"ingest-{run}-{incident_key(ref.id)}")  # fmt: skip
            refs[future.key] = ref
            running.add(future)

        while queue and running.count() < slots * 2:
            submit()
        for future in running:
            ref = refs.pop(future.key)
            try:
                done = future.result()
            except Exception as exc:  # the task itself died (its worker was lost too often): that incident only
                done = Done(ref.id, str(ref.path), "failed", error=f"{type(exc).__name__}: {exc}")
            _finish(report, done, progress, total)
            future.release()
            if queue:
                submit()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _check_workers(client) -> None:  # type: ignore[no-untyped-def]
    """Every worker must run this version of gpu-forensics: another parser would write other rows."""
    from .. import __version__

    try:
        seen = client.run(_worker_version)
    except Exception as exc:  # noqa: BLE001 - a worker that cannot even load the check has no gpu-forensics
        raise InputError(f"the Dask workers cannot run gpu-forensics: {type(exc).__name__}: {exc}") from exc
    if not seen:
        raise InputError("the Dask cluster has no workers")
    wrong = {w: v for w, v in seen.items() if v != __version__}
    if wrong:
        worker, version = next(iter(wrong.items()))
        raise InputError(f"{len(wrong)} Dask worker(s) run gpu-forensics {version}, not {__version__} "
                         f"(for example {worker}); install the same version on every worker")  # fmt: skip


def _worker_version() -> str:
    try:
        from .. import __version__
    except ImportError as exc:  # pragma: no cover - only on a worker without the package
        return f"missing ({exc})"
    return __version__


make_callable(__name__, ingest)
