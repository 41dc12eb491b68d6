"""Read the files of an incident in memory, whatever their packaging, without extracting anything.

Compression and archive formats are recognized by their magic bytes, never by name: gzip (including
multi-member gzip, as ``nvidia-bug-report.log.gz`` is), zstd, xz, bzip2, tar (plain or compressed) and
zip, nested to any depth up to :data:`MAX_DEPTH`. Nothing is written to disk, so a member named
``../../evil`` or ``/etc/passwd`` can do no harm; its name is made relative and the rename is noted.
Symbolic and hard links inside archives are listed, not followed.

Every decompression is metered: a member that grows past ``Limits.file_bytes`` or an incident past
``Limits.incident_bytes`` stops being read and ends as an ``error`` (a gzip bomb costs at most the cap in
memory and time). A truncated or corrupt stream keeps what was readable, with the reason.

>>> import gzip
>>> [(m.path, m.data, m.error) for m in expand("a.log.gz", gzip.compress(b"one\\n") + gzip.compress(b"two\\n"))]
[('a.log.gz', b'one\\ntwo\\n', None)]
"""

from __future__ import annotations

import bz2
import calendar
import gzip
import io
import lzma
import os
import posixpath
import re
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

#: Archives inside archives are opened this deep; deeper ones are listed with an error.
MAX_DEPTH = 6
#: Decompressed bytes asked for per read. A decompressor that meets the cut end of a truncated stream
#: raises and drops what it decompressed in that read, so a small read keeps all but the last 64 KiB.
_CHUNK = 1 << 16


@dataclass
class Limits:
    """Caps on decompressed bytes: per file (member) and per incident."""

    file_bytes: int = 1 << 30
    incident_bytes: int = 8 << 30
    used: int = field(default=0, compare=False)

    def room(self) -> int:
        """How many more bytes the current file may take: the smaller of both caps."""
        return max(0, min(self.file_bytes, self.incident_bytes - self.used))


#: A plain file on disk (not compressed, not an archive) larger than this is not read into memory: its
#: member holds its head and its path, and ingest reads it as a stream of chunks, its records of interest
#: (``forensics.parse.iter_parse_path``). A kernel log read whole with every record takes ~12 times its
#: bytes at its peak: below this size, under the 500 MB ingest keeps to.
STREAM_BYTES = 32 << 20
#: The head such a member holds (sniffing, bug-report and hostname checks read no more).
HEAD_BYTES = 64 * 1024


@dataclass
class Member:
    """One file of an incident: its path inside the incident, its bytes (None if unreadable) and why not.
    A big plain file on disk (:data:`STREAM_BYTES`) holds only its head in ``data``, its path in
    ``fs_path`` and its size in ``size``: read it with :meth:`blocks`."""

    path: str
    data: bytes | None
    error: str | None = None
    mtime: float | None = None
    fs_path: str | None = None
    size: int | None = None

    @property
    def nbytes(self) -> int:
        """The member's size (-1 when unreadable)."""
        if self.fs_path is not None and self.size is not None:
            return self.size
        return len(self.data) if self.data is not None else -1

    def blocks(self, size: int = 1 << 20) -> Iterator[bytes]:
        """The member's bytes, in blocks when it is left on disk."""
        if self.fs_path is None:
            if self.data:
                yield self.data
            return
        with open(self.fs_path, "rb") as f:
            while block := f.read(size):
                yield block

    def load(self) -> None:
        """Read a member left on disk into ``data`` (a bug report is split in memory)."""
        if self.fs_path is not None:
            self.data, self.fs_path, self.size = b"".join(self.blocks()), None, None


class _CapExceeded(Exception):
    pass


def over_cap(limits: Limits, size: int | None = None) -> str:
    """Why a member is not read: which cap it passes (``size`` known from a header or ``stat``, or not)."""
    which = "file" if limits.room() == limits.file_bytes else "incident"
    cap = limits.file_bytes if which == "file" else limits.incident_bytes
    what = f"{size:,} bytes, over" if size is not None else "decompresses to more than"
    return f"{what} the {which} cap of {cap:,} bytes; not read (raise --max-{which}-bytes)"


#: How the error of a member whose bytes were not all had begins (the incident is then not read whole);
#: other errors name what was left out on purpose (a link not followed, a renamed member) or a note.
_LOSS = ("truncated or corrupt", "corrupt ", "cannot read", "unreadable member", "archive nested deeper",
         "incident cap of", "decompresses to more than")  # fmt: skip
_OVER_CAP = re.compile(r"^[\d,]+ bytes, over the (?:file|incident) cap")


def is_loss(error: str | None) -> bool:
    """Whether ``error`` (a member's, possibly joined with others by ``; ``) says bytes were not read.

    >>> is_loss("truncated or corrupt stream after 900 bytes: Compressed file ended"), is_loss("symbolic link; not followed")
    (True, False)
    """
    parts = (error or "").split("; ")
    return any(p.startswith(_LOSS) or _OVER_CAP.match(p) for p in parts)


def compression(head: bytes) -> str | None:
    """The compression a stream starting with ``head`` uses, if any.

    >>> compression(b"\\x1f\\x8b\\x08\\x00"), compression(b"(\\xb5/\\xfd"), compression(b"hello")
    ('gzip', 'zstd', None)
    """
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return "zstd"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head.startswith(b"BZh") and head[3:4].isdigit():
        return "bzip2"
    return None


def is_tar(head: bytes) -> bool:
    """A POSIX/GNU tar header (``ustar`` magic at offset 257)."""
    return len(head) >= 262 and head[257:262] == b"ustar"


def is_zip(head: bytes) -> bool:
    return head.startswith((b"PK\x03\x04", b"PK\x05\x06"))


def decompressor(kind: str, raw: IO[bytes]) -> IO[bytes]:
    """A stream of the decompressed bytes of ``raw``."""
    if kind == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # reads every member of a multi-member file
    if kind == "bzip2":
        return bz2.BZ2File(raw)
    if kind == "xz":
        return lzma.LZMAFile(raw)
    import zstandard

    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)  # type: ignore[return-value]


def safe_name(name: str) -> tuple[str, str | None]:
    """A member name made relative and free of ``..``, and a note when that changed it.

    >>> safe_name("var/log/kern.log"), safe_name("../../evil"), safe_name("/etc/passwd")[0]
    (('var/log/kern.log', None), ('evil', "member name '../../evil' leaves the archive; read as 'evil'"), 'etc/passwd')
    """
    clean = posixpath.normpath("/" + name.replace("\\", "/")).lstrip("/")
    parts = [p for p in clean.split("/") if p not in ("", ".", "..")]
    clean = "/".join(parts) or "_"
    if not name.startswith(("/", "\\")) and ".." not in name.replace("\\", "/").split("/"):
        return clean, None
    return clean, f"member name {name!r} leaves the archive; read as {clean!r}"


def read_capped(stream: IO[bytes], limits: Limits) -> tuple[bytes, str | None]:
    """Read ``stream`` to its end within the caps; return the bytes and the error that stopped it, if any.

    Over a cap, the bytes are dropped (a bomb must not cost memory) and the error names the cap.
    """
    room = limits.room()
    reason = over_cap(limits)  # worded before this read uses up the room
    chunks: list[bytes] = []
    got = 0
    error: str | None = None
    try:
        while True:
            chunk = stream.read(min(_CHUNK, room - got + 1))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if got > room:
                raise _CapExceeded
    except _CapExceeded:
        limits.used += got
        return b"", reason
    except Exception as exc:  # EOFError, zlib/lzma errors, zstandard.ZstdError: keep what was read
        error = f"truncated or corrupt stream after {got:,} bytes: {_reason(exc)}"
    limits.used += got
    return b"".join(chunks), error


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def expand(path: str, data: bytes, *, limits: Limits | None = None, mtime: float | None = None,
           depth: int = 0) -> Iterator[Member]:  # fmt: skip
    """The members held by the bytes ``data`` of the file ``path``: itself (decompressed) or, for an
    archive, each file inside it, recursively. Paths inside archives are ``path/member``.
    """
    limits = limits or Limits(incident_bytes=1 << 62)
    note: str | None = None
    kind = compression(data[:8])
    if kind is not None:
        data, note = read_capped(decompressor(kind, io.BytesIO(data)), limits)
        if not data and note:
            yield Member(path, None, note, mtime)
            return
        if compression(data[:8]) is not None and depth < MAX_DEPTH:  # .gz of a .gz
            yield from _annotated(expand(path, data, limits=limits, mtime=mtime, depth=depth + 1), note)
            return
    if is_tar(data[:512]) or is_zip(data[:4]):
        if depth >= MAX_DEPTH:
            yield Member(path, None, f"archive nested deeper than {MAX_DEPTH} levels; not opened", mtime)
            return
        inner = iter_tar(io.BytesIO(data), prefix=path, limits=limits, depth=depth + 1) if is_tar(data[:512]) \
            else iter_zip(io.BytesIO(data), prefix=path, limits=limits, depth=depth + 1)  # fmt: skip
        yield from _annotated(inner, note, container=path)
        return
    yield Member(path, data, note, mtime)


def expand_file(fs_path: str, name: str, *, limits: Limits, mtime: float | None = None) -> Iterator[Member]:
    """Like :func:`expand` for a file on disk, streamed: a tar (compressed or not) is read member by
    member, so a large archive never sits in memory whole.
    """
    try:
        raw = open(fs_path, "rb")  # noqa: SIM115  (closed below, after the generator is drained)
    except OSError as exc:
        yield Member(name, None, f"cannot read: {exc.strerror or exc}", mtime)
        return
    with raw:
        kind = compression(raw.read(8))
        raw.seek(0)
        if kind is None:
            head = raw.read(512)
            raw.seek(0)
            if is_zip(head):
                yield from iter_zip(raw, prefix=name, limits=limits)
                return
            if not is_tar(head):
                size = _size(raw)
                if size > limits.room():
                    yield Member(name, None, over_cap(limits, size), mtime)
                    return
                if size > STREAM_BYTES:
                    limits.used += size
                    yield Member(name, raw.read(HEAD_BYTES), None, mtime, fs_path=fs_path, size=size)
                    return
                data = raw.read()
                limits.used += len(data)
                yield Member(name, data, None, mtime)
                return
            yield from iter_tar(raw, prefix=name, limits=limits)
            return
        stream = _Peeked(decompressor(kind, raw))
        try:
            head = stream.peek(512)
        except Exception as exc:  # a corrupt header: no byte of it is readable
            yield Member(name, None, f"corrupt {kind} stream: {_reason(exc)}", mtime)
            return
        if is_tar(head):
            yield from iter_tar(stream, prefix=name, limits=limits)  # type: ignore[arg-type]
            return
        data, note = read_capped(stream, limits)  # type: ignore[arg-type]
        if not data and note:
            yield Member(name, None, note, mtime)
            return
        for member in expand(name, data, limits=limits, mtime=mtime, depth=1):
            if member.path == name:
                member.error = _join(note, member.error)
            yield member


def _size(f: IO[bytes]) -> int:
    return os.fstat(f.fileno()).st_size


class _Peeked:
    """A read-only stream whose first bytes can be looked at before it is handed on."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream, self.buffer = stream, b""

    def peek(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.stream.read(n - len(self.buffer))
            if not chunk:
                break
            self.buffer += chunk
        return self.buffer[:n]

    def read(self, n: int = -1) -> bytes:
        if self.buffer:
            if n < 0:
                out, self.buffer = self.buffer + self.stream.read(), b""
                return out
            out, self.buffer = self.buffer[:n], self.buffer[n:]
            return out
        return self.stream.read(n)


def _annotated(members: Iterator[Member], note: str | None, container: str | None = None) -> Iterator[Member]:
    """Pass ``members`` through; a note about the container (a truncated .tar.gz) becomes its own row."""
    yield from members
    if note:
        yield Member(container or "", None, note)


def iter_tar(stream: IO[bytes], *, prefix: str, limits: Limits, depth: int = 1) -> Iterator[Member]:
    """The files of a (possibly compressed) tar read as a stream; links are listed, not followed.

    A truncated or corrupt archive yields every member before the damage, then a row for the archive
    itself (``prefix``) with the reason.
    """
    count = 0
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            for info in tar:
                name, renamed = safe_name(info.name)
                where = f"{prefix}/{name}" if prefix else name
                if info.isdir():
                    continue
                count += 1
                if info.issym() or info.islnk():
                    what = "symbolic" if info.issym() else "hard"
                    yield Member(where, None, _join(renamed, f"{what} link to {info.linkname!r}; not followed"), info.mtime)
                    continue
                if not info.isfile():
                    yield Member(where, None, _join(renamed, "not a regular file (device, fifo); not read"), info.mtime)
                    continue
                if info.size > limits.room():
                    full = limits.room() < limits.file_bytes
                    yield Member(where, None, _join(renamed, over_cap(limits, info.size)), info.mtime)
                    if full:
                        yield Member(prefix, None, f"incident cap of {limits.incident_bytes:,} bytes reached after {count} member(s); rest not read")  # fmt: skip
                        return
                    continue
                extracted = tar.extractfile(info)
                data, error = read_capped(extracted, limits) if extracted else (b"", "unreadable member")
                if error and not data:
                    yield Member(where, None, _join(renamed, error), info.mtime)
                    continue
                for member in expand(where, data, limits=limits, mtime=float(info.mtime), depth=depth):
                    if member.path == where:
                        member.error = _join(_join(renamed, error), member.error)
                    yield member
    except Exception as exc:  # tarfile, EOF and decompressor errors (zlib, lzma, zstandard): keep what was read
        yield Member(prefix, None, f"truncated or corrupt tar after {count} member(s): {_reason(exc)}")


def iter_zip(stream: IO[bytes], *, prefix: str, limits: Limits, depth: int = 1) -> Iterator[Member]:
    """The files of a zip archive; encrypted or damaged members get an error, the rest are read."""
    try:
        archive = zipfile.ZipFile(stream)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        yield Member(prefix, None, f"corrupt zip: {_reason(exc)}")
        return
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            name, renamed = safe_name(info.filename)
            where = f"{prefix}/{name}" if prefix else name
            mtime = _zip_mtime(info)
            if (info.external_attr >> 16) & 0o170000 == 0o120000:
                yield Member(where, None, _join(renamed, "symbolic link; not followed"), mtime)
                continue
            try:
                with archive.open(info) as member:
                    data, error = read_capped(member, limits)
            except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError, EOFError, zlib.error) as exc:
                data, error = b"", f"unreadable member: {_reason(exc)}"
            if error and not data:
                yield Member(where, None, _join(renamed, error), mtime)
                continue
            for m in expand(where, data, limits=limits, mtime=mtime, depth=depth):
                if m.path == where:
                    m.error = _join(_join(renamed, error), m.error)
                yield m


def _zip_mtime(info: zipfile.ZipInfo) -> float | None:
    try:
        return float(calendar.timegm((*info.date_time, 0, 0, 0)))
    except (ValueError, OverflowError):
        return None


def _join(a: str | None, b: str | None) -> str | None:
    return f"{a}; {b}" if a and b else a or b
