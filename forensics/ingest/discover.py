"""Find the incidents under the paths a user gives, and the files (members) each one holds.

An incident is a directory or an archive (DESIGN.md "An incident on disk"). A directory is *one*
incident when it holds ``incident.toml``; it is a *root of incidents* when a sub-folder holds one or it
holds archives (each sub-folder and archive is then an incident); otherwise it is one incident when it
has loose files or only leaf sub-folders (one per host), and a root when its sub-folders have folders
of their own. Symbolic links are followed (a folder of links to incident folders is a root), each real
folder once: a link back to a folder already read, a broken link and a loose file beside incidents (a
README) are reported as skipped, each with the reason.

Members come from :mod:`.archive` (every packaging, read in memory); an ``nvidia-bug-report.log`` is
cut into its sections (:mod:`.bugreport`), and a sosreport tree is walked by its layout: its logs and
command outputs are parsed, its copies of ``/proc``, ``/sys`` and ``/etc`` are listed only.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from . import archive, bugreport
from .archive import Limits, Member

CONFIG = "incident.toml"
#: Name endings stripped from an archive's name to make its incident id or host name.
ARCHIVE_ENDINGS = (".tar.gz", ".tar.zst", ".tar.xz", ".tar.bz2", ".tgz", ".tzst", ".txz", ".tbz2", ".tar", ".zip")
_DOCS = re.compile(r"(?i)^(readme|provenance|license|notes?)(\.\w+)?$|\.(md|rst)$")
#: Paths in a sosreport that hold logs and command output (the rest are copied config and pseudo-files).
_SOS_LOGS = re.compile(r"^(var/log/|sos_commands/|sos_strings/|journal/)")
_SOS_HOSTNAME = ("hostname", "sos_commands/general/hostname", "sos_commands/host/hostname", "etc/hostname")


@dataclass
class IncidentRef:
    """Where an incident is, its id, and its ``incident.toml`` (empty when there is none)."""

    id: str
    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    config_error: str | None = None


@dataclass(frozen=True)
class Skipped:
    """A path under the given ones that is not read, and why."""

    path: Path
    why: str
    #: Documentation beside incidents (a README): worth a note, not a warning.
    doc: bool = False


@dataclass
class Found:
    """The incidents found under the given paths, and the paths that are not part of any."""

    incidents: list[IncidentRef]
    skipped: list[Skipped]


def find_incidents(paths: list[Path] | list[str]) -> Found:
    """The incidents under ``paths`` (each a directory, an archive, or a single log file)."""
    incidents: list[IncidentRef] = []
    skipped: list[Skipped] = []
    seen: set[Path] = set()
    for given in paths:
        p = Path(given)
        if not p.exists():
            broken = f" (a broken symbolic link to {os.readlink(p)!r})" if p.is_symlink() else ""
            raise InputError(f"{p}: no such file or directory{broken}")
        if p.is_file():
            incidents.append(_incident(p))
        elif p.is_dir():
            _walk(p, incidents, skipped, seen)
        else:
            raise InputError(f"{p}: not a file or directory")
    ids: dict[str, Path] = {}
    for ref in incidents:
        if ref.id in ids and ids[ref.id] != ref.path:
            raise InputError(f"incident id {ref.id!r} is given by both {ids[ref.id]} and {ref.path}; "
                             f"give one of them another id in its {CONFIG}")  # fmt: skip
        ids[ref.id] = ref.path
    return Found(incidents, skipped)


def _walk(d: Path, incidents: list[IncidentRef], skipped: list[Skipped], seen: set[Path]) -> None:
    real = d.resolve()
    if real in seen:  # a link loop, or a second link to a folder already read
        skipped.append(Skipped(d, f"a symbolic link to {real}, a folder read already; skipped"))
        return
    seen.add(real)
    if (d / CONFIG).is_file() or not _is_root(d):
        incidents.append(_incident(d))
        return
    for child in _children(d):
        if child.is_symlink() and not child.exists():
            skipped.append(Skipped(child, f"a broken symbolic link to {os.readlink(child)!r}; skipped"))
        elif child.is_dir():
            _walk(child, incidents, skipped, seen)
        elif child.is_file() and _is_archive(child):
            incidents.append(_incident(child))
        elif not child.is_file():
            skipped.append(Skipped(child, "not a regular file or folder; skipped"))
        elif _DOCS.search(child.name):
            skipped.append(Skipped(child, "documentation beside incidents; skipped", doc=True))
        else:
            skipped.append(Skipped(child, "not an incident (a loose file beside incidents); skipped"))


def _children(d: Path) -> list[Path]:
    try:
        return sorted(c for c in d.iterdir() if not c.name.startswith("."))
    except OSError as exc:
        raise InputError(f"{d}: cannot list: {exc.strerror or exc}") from None


def _is_root(d: Path) -> bool:
    children = _children(d)
    dirs = [c for c in children if c.is_dir()]
    files = [c for c in children if c.is_file()]
    if any((c / CONFIG).is_file() for c in dirs) or any(_is_archive(f) for f in files):
        return True
    if any(not _DOCS.search(f.name) for f in files):
        return False
    return any(any(g.is_dir() for g in _children(c)) for c in dirs)


def _is_archive(p: Path) -> bool:
    """A tar or zip (compressed or not), by content."""
    try:
        with p.open("rb") as f:
            head = f.read(512)
            kind = archive.compression(head[:8])
            if kind is None:
                return archive.is_tar(head) or archive.is_zip(head)
            f.seek(0)
            stream = archive.decompressor(kind, f)
            return archive.is_tar(stream.read(512))
    except Exception:  # unreadable or corrupt: it is a file, and its error shows when it is read
        return False


def _incident(p: Path) -> IncidentRef:
    config, error = ({}, None)
    if p.is_dir() and (p / CONFIG).is_file():
        config, error = read_config((p / CONFIG).read_bytes())
    return IncidentRef(id=str(config.get("id") or strip_archive(p.name)), path=p, config=config, config_error=error)


def read_config(data: bytes) -> tuple[dict[str, Any], str | None]:
    """``incident.toml`` as a dict, or an empty one and the reason it could not be read."""
    try:
        return tomllib.loads(data.decode("utf-8")), None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, f"{CONFIG}: {exc}"


def strip_archive(name: str) -> str:
    """``node1.tar.gz`` → ``node1``; other names unchanged."""
    lower = name.lower()
    for ending in ARCHIVE_ENDINGS:
        if lower.endswith(ending) and len(name) > len(ending):
            return name[: -len(ending)]
    return name


@dataclass
class Item:
    """A member as ingest sees it: where it came from, and what to do with it."""

    member: Member
    first_line: int = 1  # bug-report sections keep the report's line numbers
    container: str | None = None  # the bug report or sosreport it belongs to
    parse: bool = True  # False: listed in ``files`` only (sosreport config copies, bug-report headers)


def members(ref: IncidentRef, limits: Limits) -> Iterator[Item]:
    """Every file of the incident, decompressed and unpacked, bug reports split into sections."""
    if ref.path.is_file():
        name = ref.path.name
        stream: Iterator[Member] = archive.expand_file(str(ref.path), name, limits=limits, mtime=_mtime(ref.path))
        # An incident archive's members are named without the archive's own name, and without the
        # folder it was made from (``tar czf x.tar.gz x/``), so hosts are the level below it.
        strips = [name + "/", strip_archive(name) + "/"]
    else:
        stream = _dir_members(ref.path, limits)
        strips = []
    # A sosreport tree given as the incident itself: its root is the container of every member.
    whole_sos = ref.path.is_dir() and any((ref.path / d).is_dir() for d in ("sos_commands", "sos_reports"))
    for member in stream:
        for prefix in strips:
            if member.path.startswith(prefix):
                member.path = member.path[len(prefix) :]
        yield from _items(member, sos_root="" if whole_sos else None)


def _dir_members(root: Path, limits: Limits) -> Iterator[Member]:
    for rel, full, why in walk_files(root):
        if rel == CONFIG:
            continue
        if why is not None:
            yield Member(rel, None, why)
            continue
        yield from archive.expand_file(str(full), rel, limits=limits, mtime=_mtime(full))


def walk_files(root: Path) -> Iterator[tuple[str, Path, str | None]]:
    """Every file under the incident folder ``root``: its path in the incident, its full path, and why it
    is not read (None when it is). Symbolic links are followed when they stay inside the incident, each
    real folder once; one leading outside it, a broken one and a loop are named and not followed."""
    real_root = root.resolve()
    seen = {real_root}
    for folder, dirs, files in os.walk(root, followlinks=True):
        kept = []
        for name in sorted(dirs):
            full = Path(folder, name)
            why = _link_problem(full, real_root) if full.is_symlink() else None
            if why is None and full.resolve() in seen:
                why = f"symbolic link to {os.readlink(full)!r}, a folder read already; not followed"
            if why is not None:
                yield full.relative_to(root).as_posix(), full, why
                continue
            seen.add(full.resolve())
            kept.append(name)
        dirs[:] = kept
        for name in sorted(files, key=rotation_key):
            full = Path(folder, name)
            why = _link_problem(full, real_root) if full.is_symlink() else None
            if why is None and not full.is_file():
                why = "not a regular file; not read"
            yield full.relative_to(root).as_posix(), full, why


def _link_problem(link: Path, real_root: Path) -> str | None:
    """Why the symbolic link ``link`` inside an incident is not followed, or None."""
    target = os.readlink(link)
    if not link.exists():
        return f"broken symbolic link to {target!r}; not followed"
    if not link.resolve().is_relative_to(real_root):
        return f"symbolic link to {target!r} outside the incident; not followed"
    return None


def _items(member: Member, *, sos_root: str | None = None) -> Iterator[Item]:
    sos = sos_root if sos_root is not None else _sos_root(member.path)
    if member.data is not None and bugreport.is_bug_report(member.data[:4096]):
        member.load()
        assert member.data is not None
        for section in bugreport.split(member.data):
            listed_only = section.name == "header" or not section.data
            yield Item(Member(f"{member.path}#{section.name}", section.data, section.note, member.mtime),
                       first_line=section.first_line, container=member.path, parse=not listed_only)  # fmt: skip
        if member.error:
            yield Item(Member(member.path, None, member.error, member.mtime), container=member.path, parse=False)
        return
    if sos is not None:
        inner = member.path[len(sos) :].lstrip("/")
        yield Item(member, container=sos, parse=bool(_SOS_LOGS.match(inner)))
        return
    yield Item(member)


def _sos_root(path: str) -> str | None:
    """The sosreport folder a member path lies in (by its layout), if any."""
    parts = path.split("/")
    for i, part in enumerate(parts[:-1]):
        if part in ("sos_commands", "sos_reports", "sos_logs", "sos_strings"):
            return "/".join(parts[:i])
        if part.startswith("sosreport-"):
            return "/".join(parts[: i + 1])
    return None


def sos_hostname(item: Item) -> str | None:
    """The host a sosreport's ``hostname`` file names, when ``item`` is that file."""
    if item.container is None or item.member.data is None:
        return None
    inner = item.member.path[len(item.container) :].lstrip("/")
    if inner in _SOS_HOSTNAME:
        text = item.member.data[:256].decode("utf-8", "replace").strip()
        return text.split()[0] if text else None
    return None


def sos_name_host(container: str) -> str | None:
    """The host in a sosreport's folder name ``sosreport-<host>-<date|case>…``."""
    name = container.rsplit("/", 1)[-1]
    m = re.match(r"sosreport-(.+?)(?:-\d{4}-\d{2}-\d{2}|-\d{6,}|-[0-9a-f]{6,}$|$)", strip_archive(name))
    return m[1] if m else None


_ROTATION = re.compile(r"^(?P<base>.+?)(?:[.-](?P<n>\d{1,4}|\d{8}))?(?P<z>\.(?:gz|zst|xz|bz2))?$")


def rotation_key(name: str) -> tuple[str, int]:
    """Sort key putting rotated logs oldest first: ``kern.log.2.gz``, ``kern.log.1``, ``kern.log``;
    date-suffixed rotations (``syslog-20250125``) in date order, before the live file.

    >>> sorted(["kern.log", "kern.log.1", "kern.log.2.gz", "dmesg"], key=rotation_key)
    ['dmesg', 'kern.log.2.gz', 'kern.log.1', 'kern.log']
    """
    base = name.rsplit("/", 1)[-1]
    m = _ROTATION.match(base)
    if not m or m["n"] is None:
        return (name, 0)
    prefix = name[: len(name) - len(base)] + m["base"]
    n = int(m["n"])
    return (prefix, n - 10**9 if len(m["n"]) == 8 else -n)  # dates ascend; numbers descend


def _mtime(p: Path) -> float | None:
    try:
        return p.stat().st_mtime
    except OSError:
        return None
