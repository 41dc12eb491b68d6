"""Versions as evidence: what the logs say the driver, its libraries and the programs run with, and where
those versions cannot work together.

Three data tables, each row cited (``forensics/data``):

* ``versions.toml`` — the messages that state a version (NVRM's banner, nvidia-smi's header, PyTorch's
  ``found version 11040`` and ``collect_env``, NCCL's banner, the container toolkit's requirement, TF's
  ``kernel reported version``, the GSP firmware path …), a named group per fact;
* ``cuda_drivers.csv`` — each CUDA release's minimum Linux driver, and the minimum for minor-version
  compatibility within its major release (NVIDIA's CUDA release notes, tables 2 and 3);
* ``gpu_archs.csv`` — each GPU architecture's products, its first CUDA and driver, the last driver branch
  that supports it, the kernel modules it needs.

:func:`facts` reads the statements into a table (one row per version a message states); :func:`conflicts`
finds, per host, the versions that cannot work together and returns them as ``env.version_conflict``
event rows whose message is the reasoning and whose ``detail`` names the facts (``file:line``).

>>> import polars as pl
>>> ev = pl.DataFrame({"incident": ["i"] * 2, "host": ["n1"] * 2, "file": ["k.log", "run.log"], "line": [1, 3],
...     "ts": [None, None], "message": ["NVRM: loading NVIDIA UNIX x86_64 Kernel Module  510.73.05  Fri May 6",
...     "nvidia-docker | 2016/06/07 18:49:33 Error: unsupported CUDA version: driver 7.0 < image 7.5"]})
>>> facts(ev).select("component", "version").rows()
[('kernel_module', '510.73.05'), ('cuda_driver', '7.0'), ('cuda_required', '7.5')]
>>> conflicts(facts(ev)).get_column("detail").str.json_path_match("$.conflict").to_list()
['cuda_required']
"""

from __future__ import annotations

import csv
import io
import json
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

#: The columns of :func:`facts`.
FACT_COLUMNS = ("incident", "host", "file", "line", "ts", "emitter", "statement", "component", "version")
#: What the facts' components name (the group names of ``versions.toml``, ``_int``/``_tag`` suffixes dropped).
COMPONENTS = ("kernel_module", "driver", "user_space", "cuda_driver", "cuda_required", "cuda_runtime",
              "cuda_toolkit", "nccl", "gsp_firmware", "product", "open", "compat")  # fmt: skip
KIND = "env.version_conflict"


@dataclass(frozen=True)
class Statement:
    id: str
    emitter: str
    pattern: str
    cite: str


@dataclass(frozen=True)
class Cuda:
    """One CUDA release: its minimum driver, and the minimum for minor-version compatibility (CUDA 11+)."""

    cuda: tuple[int, ...]
    min_driver: tuple[int, ...]
    compat_driver: tuple[int, ...] | None
    cite: str


@dataclass(frozen=True)
class Arch:
    name: str
    products: re.Pattern[str]
    min_cuda: tuple[int, ...] | None
    min_driver: tuple[int, ...] | None
    last_branch: int | None
    kernel_modules: str
    cite: str


def _data(name: str) -> str:
    return resources.files("forensics.data").joinpath(name).read_text("utf-8")


def parse_version(text: str) -> tuple[int, ...]:
    """``"525.105.17"`` → ``(525, 105, 17)``.

    >>> parse_version("12.1"), parse_version("570.26")
    ((12, 1), (570, 26))
    """
    return tuple(int(p) for p in re.findall(r"\d+", text))


@cache
def statements() -> tuple[Statement, ...]:
    rows = tomllib.loads(_data("versions.toml"))["statement"]
    return tuple(Statement(r["id"], r["emitter"], r["pattern"], r["cite"]) for r in rows)


@cache
def cuda_releases() -> tuple[Cuda, ...]:
    rows = csv.DictReader(io.StringIO(_data("cuda_drivers.csv")))
    return tuple(Cuda(parse_version(r["cuda"]), parse_version(r["min_driver"]),
                      parse_version(r["compat_driver"]) if r["compat_driver"] else None, r["cite"]) for r in rows)  # fmt: skip


@cache
def architectures() -> tuple[Arch, ...]:
    rows = csv.DictReader(io.StringIO(_data("gpu_archs.csv")))
    return tuple(Arch(r["arch"], re.compile(r["products"]), parse_version(r["min_cuda"]) or None,
                      parse_version(r["min_driver"]) or None, int(r["last_branch"]) if r["last_branch"] else None,
                      r["kernel_modules"], r["cite"]) for r in rows)  # fmt: skip


def _scoped(pattern: str) -> str:
    """A pattern made safe inside an alternation: a leading ``(?i)`` scoped to it, lines anchored per line."""
    flags = "m"
    if pattern.startswith("(?i)"):
        pattern, flags = pattern[4:], "mi"
    return f"(?{flags}:{pattern})"


@cache
def anchor() -> str:
    """One regular expression that finds every message stating a version (groups unnamed)."""
    return "|".join(re.sub(r"\(\?P<\w+>", "(?:", _scoped(s.pattern)) for s in statements())


#: The ``gpus`` columns that are facts (an ``nvidia-smi`` dump's header and each GPU's product name).
GPU_FACTS = {"driver": "driver", "cuda": "cuda_driver", "product": "product"}


def facts(events: pl.DataFrame | pl.LazyFrame, gpus: pl.DataFrame | pl.LazyFrame | None = None) -> pl.DataFrame:
    """The versions the messages of ``events`` state, and those of the ``nvidia-smi`` dumps of ``gpus``
    (a ``gpus`` table: its ``driver``, ``cuda`` and ``product``, once per dump): one row per fact
    (:data:`FACT_COLUMNS`), in file order. ``version`` is the text as printed, a CUDA integer (11040) as
    ``11.4`` and a wheel's tag (``cu121``) as ``12.1``; ``open`` and ``compat`` facts hold the words that
    say so."""
    cols = ["incident", "host", "file", "line", "ts", "message"]
    rows = events.lazy().select(cols).filter(pl.col("message").str.contains(anchor())).collect()
    out: list[pl.DataFrame] = [] if gpus is None else [_gpu_facts(gpus)]
    for s in statements():
        pattern = _scoped(s.pattern)
        hit = rows.filter(pl.col("message").str.contains(pattern))
        if hit.is_empty():
            continue
        groups = hit.with_columns(_g=pl.col("message").str.extract_groups(pattern)).unnest("_g")
        for name in re.findall(r"\(\?P<(\w+)>", s.pattern):
            value = pl.col(name)
            if name.endswith("_int"):  # cuDriverGetVersion's 1000 × major + 10 × minor
                n = value.cast(pl.Int64)
                value = pl.format("{}.{}", n // 1000, (n % 1000) // 10)
            elif name.endswith("_tag"):  # a wheel's cuXYZ: the last digit is the minor release
                value = pl.format("{}.{}", value.str.head(-1), value.str.tail(1))
            out.append(groups.filter(pl.col(name).is_not_null()).select(
                *cols[:5], emitter=pl.lit(s.emitter), statement=pl.lit(s.id),
                component=pl.lit(re.sub(r"_(?:int|tag)$", "", name)), version=value.str.strip_chars()))  # fmt: skip
    schema = {c: rows.schema.get(c, pl.String) for c in FACT_COLUMNS}
    if not out:
        return pl.DataFrame(schema=schema)
    return pl.concat([f.cast(schema) for f in out]).sort("incident", "file", "line", maintain_order=True)  # type: ignore[arg-type]


def _gpu_facts(gpus: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """The facts of a ``gpus`` table: each value once per file and host, on the first line that gives it."""
    parts = [
        gpus.lazy().select("incident", "host", "file", "line", "ts", version=pl.col(column))
        .drop_nulls("version").with_columns(emitter=pl.lit("nvidia-smi"), statement=pl.lit(f"gpus.{column}"),
                                            component=pl.lit(component))  # fmt: skip
        for column, component in GPU_FACTS.items()
    ]
    return (pl.concat(parts).sort("incident", "file", "line").unique(["incident", "host", "file", "component", "version"],
            keep="first", maintain_order=True).select(FACT_COLUMNS).collect())  # fmt: skip


def driver_cuda(driver: tuple[int, ...]) -> tuple[int, ...] | None:
    """The newest CUDA release a driver supports fully (release notes, table 3).

    >>> driver_cuda((525, 105, 17)), driver_cuda((470, 82, 1)), driver_cuda((340, 1))
    ((12, 0), (11, 4), None)
    """
    ok = [c.cuda for c in cuda_releases() if driver >= c.min_driver]
    return max(ok) if ok else None


def needed_driver(cuda: tuple[int, ...]) -> tuple[tuple[int, ...], str] | None:
    """The oldest driver that runs a program built with ``cuda``: the minor-version compatibility minimum
    of its major release (CUDA 11+), else that release's own minimum; with the row's citation.

    >>> needed_driver((12, 1))[0], needed_driver((10, 2))[0]
    ((525, 60, 13), (440, 33))
    """
    rows = [c for c in cuda_releases() if c.cuda[:2] == cuda[:2]]
    if not rows:
        return None
    c = rows[0]
    return (c.compat_driver or c.min_driver), c.cite


def _same(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Two printings of one version: equal on the parts both print (``515.65`` is ``515.65.01``)."""
    n = min(len(a), len(b))
    return n > 0 and a[:n] == b[:n]


@cache
def _printed() -> dict[tuple[int, ...], str]:
    """The driver versions of the tables as NVIDIA prints them (``520.61.05``, not ``520.61.5``)."""
    text = _data("cuda_drivers.csv") + _data("gpu_archs.csv")
    return {parse_version(v): v for v in re.findall(r"\b\d{3}\.\d+(?:\.\d+)?\b", text)}


def _show(v: tuple[int, ...]) -> str:
    return _printed().get(v) or ".".join(map(str, v))


def conflicts(found: pl.DataFrame) -> pl.DataFrame:
    """The version conflicts of each host among ``found`` (:func:`facts`), as ``env.version_conflict`` event
    rows (incident, host, file, line, ts, kind, severity, message, detail), each on the line of the fact that
    could not be met. A fact without a host belongs to its incident's one host, when it has one.

    Conflicts: a CUDA an image requires newer than the driver's (``cuda_required``); a program built with a
    CUDA the driver cannot run, even under minor-version compatibility (``cuda_runtime``); the kernel module
    and a user-space library of different versions (``kernel_user_mismatch``); a GSP firmware file of
    another version (``gsp_mismatch``); a GPU the driver branch has dropped or does not know yet, or one
    that needs the open kernel modules (``arch``). No CUDA conflict is reported on a host that uses the
    forward-compatibility package."""
    schema = {"incident": pl.String, "host": pl.String, "file": pl.String, "line": pl.Int64,
              "ts": pl.Datetime("us", "UTC"), "kind": pl.String, "severity": pl.String, "message": pl.String,
              "detail": pl.String}  # fmt: skip
    if found.is_empty():
        return pl.DataFrame(schema=schema)
    hosts = found.filter(pl.col("host").is_not_null()).group_by("incident").agg(_one=pl.col("host").unique())
    found = found.join(hosts, on="incident", how="left").with_columns(
        host=pl.coalesce("host", pl.when(pl.col("_one").list.len() == 1).then(pl.col("_one").list.first())))
    rows: list[dict[str, Any]] = []
    for (incident, host), group in found.group_by(["incident", "host"], maintain_order=True):
        rows += _host_conflicts(str(incident), host, group.to_dicts())  # type: ignore[arg-type]
    return pl.DataFrame(rows, schema=schema)


def _host_conflicts(incident: str, host: str | None, facts_: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by: dict[str, list[dict[str, Any]]] = {}
    for f in facts_:
        by.setdefault(f["component"], []).append(f)
    out: list[dict[str, Any]] = []

    def where(f: dict[str, Any]) -> str:
        return f"{f['file']}:{f['line']}"

    def conflict(name: str, at: dict[str, Any], why: str, cited: list[dict[str, Any]], **values: Any) -> None:
        places = list(dict.fromkeys(where(f) for f in cited))
        detail = {"conflict": name, "facts": places, **values}
        out.append({"incident": incident, "host": host, "file": at["file"], "line": at["line"], "ts": at["ts"],
                    "kind": KIND, "severity": "error", "message": f"version conflict: {why} [{', '.join(places)}]",
                    "detail": json.dumps(detail)})  # fmt: skip

    kernel = by.get("kernel_module", []) + by.get("driver", [])
    last_kernel = kernel[-1] if kernel else None
    driver = parse_version(last_kernel["version"]) if last_kernel else None
    capable = [parse_version(f["version"]) for f in by.get("cuda_driver", [])]
    cuda_cap = max(capable) if capable else (driver_cuda(driver) if driver else None)
    compat = bool(by.get("compat"))
    if not compat:
        for f in by.get("cuda_required", []):
            need = parse_version(f["version"])
            if cuda_cap is not None and need > cuda_cap:
                given = next((g for g in by.get("cuda_driver", []) if parse_version(g["version"]) == cuda_cap), last_kernel)
                conflict("cuda_required", f, f"{f['emitter']} requires CUDA {f['version']}, the driver "
                         f"{'(' + last_kernel['version'] + ') ' if last_kernel else ''}supports CUDA {_show(cuda_cap)}",
                         [given, f] if given else [f], required=f["version"], supported=_show(cuda_cap))  # fmt: skip
                break
        for f in by.get("cuda_runtime", []):
            built = parse_version(f["version"])
            need = needed_driver(built)
            if driver is not None and need is not None and driver < need[0]:
                conflict("cuda_runtime", f, f"{f['emitter']} was built with CUDA {f['version']}, which needs driver "
                         f">= {_show(need[0])}; the driver is {last_kernel['version']}",  # type: ignore[index]
                         [last_kernel, f], built=f["version"], driver=_show(driver), needs=_show(need[0]))  # type: ignore[list-item]
                break
            if driver is None and capable and (max(capable)[0] < built[0] or (built[0] < 11 and max(capable) < built[:2])):
                cap = next(g for g in by["cuda_driver"] if parse_version(g["version"]) == max(capable))
                conflict("cuda_runtime", f, f"{f['emitter']} was built with CUDA {f['version']}, the driver supports "
                         f"CUDA {cap['version']}", [cap, f], built=f["version"], supported=cap["version"])  # fmt: skip
                break
    user = by.get("user_space", [])
    if last_kernel and user and not _same(parse_version(user[-1]["version"]), driver or ()):
        u = user[-1]
        conflict("kernel_user_mismatch", u, f"the kernel module is {last_kernel['version']}, user space "
                 f"({u['emitter']}) is {u['version']}", [last_kernel, u],
                 kernel_module=last_kernel["version"], user_space=u["version"])  # fmt: skip
    for f in by.get("gsp_firmware", []):
        if driver is not None and not _same(parse_version(f["version"]), driver):
            conflict("gsp_mismatch", f, f"GSP firmware {f['version']} is requested by driver {last_kernel['version']}",  # type: ignore[index]
                     [last_kernel, f], gsp_firmware=f["version"], driver=_show(driver))  # type: ignore[list-item]
            break
    _arch_conflicts(by, last_kernel, conflict)
    return out


def _arch_conflicts(by: dict[str, list[dict[str, Any]]], last_kernel: dict[str, Any] | None, conflict: Any) -> None:
    """The first conflict between a GPU's architecture and the driver or a program's CUDA, told to ``conflict``."""
    driver = parse_version(last_kernel["version"]) if last_kernel else None
    for p in by.get("product", []):
        arch = next((a for a in architectures() if a.products.search(p["version"])), None)
        if arch is None:
            continue
        name = f"{p['version']} ({arch.name})"
        old = [f for f in by.get("cuda_runtime", []) if arch.min_cuda and parse_version(f["version"]) < arch.min_cuda]
        # A GPU named by the tool that names the driver (nvidia-smi's dump) is one that driver runs: no conflict.
        if last_kernel and last_kernel["file"] == p["file"]:
            driver = None
        if last_kernel and driver and arch.last_branch is not None and driver[0] > arch.last_branch:
            conflict("arch", p, f"{name} is not supported after driver branch {arch.last_branch}; the driver is "
                     f"{last_kernel['version']}", [last_kernel, p], arch=arch.name, driver=last_kernel["version"])  # fmt: skip
        elif last_kernel and driver and arch.min_driver is not None and driver < arch.min_driver:
            conflict("arch", p, f"{name} needs driver >= {_show(arch.min_driver)}; the driver is {last_kernel['version']}",
                     [last_kernel, p], arch=arch.name, driver=last_kernel["version"])  # fmt: skip
        elif old and arch.min_cuda:
            conflict("arch", p, f"{name} needs CUDA >= {_show(arch.min_cuda)}; {old[0]['emitter']} was built with "
                     f"CUDA {old[0]['version']}", [old[0], p], arch=arch.name, built=old[0]["version"])  # fmt: skip
        elif last_kernel and arch.kernel_modules == "open" and last_kernel["component"] == "kernel_module" \
                and not by.get("open"):  # fmt: skip
            conflict("arch", p, f"{name} needs the open kernel modules; the proprietary module "
                     f"{last_kernel['version']} is loaded", [last_kernel, p], arch=arch.name, driver=last_kernel["version"])  # fmt: skip
        else:
            continue
        break
