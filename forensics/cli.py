"""The ``forensics`` command: a thin click layer, one library call per command.

Library errors (:class:`~forensics.errors.ForensicsError`) print as ``Error: …`` and exit 1;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import click
import pyarrow as pa

from . import output, sources
from .errors import ForensicsError, InputError
from .parse import ON_ERROR, parse_path

FORMATS = ("table", "summary", "jsonl", "csv", "parquet")


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ForensicsError as exc:
            if ctx.params.get("debug"):
                raise
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Group)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="gpu-forensics")
def main(debug: bool) -> None:
    """Offline log forensics for GPU training clusters."""


@main.command("parse")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--source", default="auto", show_default=True, help="A source name (see `forensics sources`) or auto.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout.")
@click.option("--on-error", type=click.Choice(ON_ERROR), default="keep", show_default=True,
              help="keep: unparsed records become rows; warn: also report them; raise: stop at the first.")
@click.option("--year", type=int, help="Year of year-less stamps (syslog, journal short).")
@click.option("--timezone", help="IANA zone of stamps printed in local time (default: UTC, noted as assumed).")
@click.option("--incident", default="", help="Incident id to put in the rows.")
@click.option("--table", "table_name", type=click.Choice(["events", "gpus"]), default="events", show_default=True,
              help="events, or gpus: the per-GPU rows of nvidia-smi dumps.")
def parse_cmd(files: tuple[str, ...], source: str, fmt: str, out: Path | None, on_error: str,
              year: int | None, timezone: str | None, incident: str, table_name: str) -> None:  # fmt: skip
    """Parse log files into event rows.

    Example: forensics parse dmesg.log --format jsonl -o events.jsonl
    """
    if source != "auto":
        sources.get(source)
    if fmt == "parquet" and out is None:
        raise InputError("--format parquet needs -o FILE")
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        what = "is a directory" if Path(missing[0]).is_dir() else "no such file"
        raise InputError(f"{missing[0]}: {what}")
    tables: list[pa.Table] = []
    gpu_tables: list[pa.Table] = []
    file_rows: list[pa.Table] = []
    for f in files:
        parsed = parse_path(f, source=source, incident=incident, year=year, timezone=timezone, on_error=on_error)
        tables.append(parsed.events)
        gpu_tables.append(parsed.gpus)
        file_rows.append(parsed.files)
        if on_error == "warn":
            for note in parsed.files.column("error").to_pylist():
                if note:
                    click.echo(f"Warning: {f}: {note}", err=True)
    events = pa.concat_tables(tables)
    files_table = pa.concat_tables(file_rows)
    if table_name == "gpus":
        if fmt in ("table", "summary"):
            raise InputError("--table gpus prints as jsonl, csv or parquet")
        events = pa.concat_tables(gpu_tables)
    with _destination(out, binary=fmt == "parquet") as stream:
        _WRITERS[fmt](events, files_table, stream)


@main.command("sources")
def sources_cmd() -> None:
    """List the sources and the printed forms each understands."""
    for name, module in sources.SOURCES.items():
        click.echo(name)
        for form in module.FORMS:
            click.echo(f"  - {form}")


def _write_table(events: pa.Table, files: pa.Table, stream: IO[Any]) -> None:
    stream.write(output.table_text(events))


def _write_summary(events: pa.Table, files: pa.Table, stream: IO[Any]) -> None:
    stream.write(output.summary_text(events, files))


def _write_jsonl(events: pa.Table, files: pa.Table, stream: IO[Any]) -> None:
    for line in output.jsonl_lines(events):
        stream.write(line)
        stream.write("\n")


def _write_csv(events: pa.Table, files: pa.Table, stream: IO[Any]) -> None:
    stream.write(output.csv_text(events))


def _write_parquet(events: pa.Table, files: pa.Table, stream: IO[Any]) -> None:
    import pyarrow.parquet as pq

    pq.write_table(events, stream, compression="zstd")


_WRITERS: dict[str, Callable[[pa.Table, pa.Table, IO[Any]], None]] = {
    "table": _write_table,
    "summary": _write_summary,
    "jsonl": _write_jsonl,
    "csv": _write_csv,
    "parquet": _write_parquet,
}


@contextmanager
def _destination(out: Path | None, *, binary: bool) -> Iterator[IO[Any]]:
    """stdout, or a temporary file renamed over ``out`` only when writing succeeded."""
    if out is None:
        yield sys.stdout.buffer if binary else sys.stdout
        return
    out = out.expanduser()
    if not out.parent.is_dir():
        raise InputError(f"{out.parent}: no such directory")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8", newline=None if binary else "") as f:
            yield f
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


if __name__ == "__main__":  # pragma: no cover
    main()
