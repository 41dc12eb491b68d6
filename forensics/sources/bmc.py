"""What a BMC record or sensor is about and how grave it is, from ``data/bmc_events.toml`` (its sensor type,
its name, its wording) beside the message catalogs' readings: the knowledge the ``sel`` and ``sensors``
sources share.

>>> bmc_kind(pl.Series(["Power Supply PS2 Status", "Fan FAN1", "Add-in Card GPU3 Status"])).to_list()
['bmc.psu', 'bmc.fan', 'bmc.gpu']
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

from .. import messages


@cache
def _rules() -> dict[str, Any]:
    return tomllib.loads(resources.files("forensics.data").joinpath("bmc_events.toml").read_text("utf-8"))


def bmc_kind(sensor: pl.Series, name: pl.Series | None = None, words: pl.Series | None = None) -> pl.Series:
    """The ``bmc.*`` kind of each record from its sensor type (or ipmitool's sensor column, which starts
    with it); a record of no sharper type whose name (``name``, else ``sensor``) says GPU is ``bmc.gpu``;
    one with no type at all is read by the ``words`` of its message; the rest is ``bmc.event``."""
    rules = _rules()
    text = sensor.cast(pl.String).fill_null("").str.strip_chars()
    named = (name if name is not None else sensor).cast(pl.String).fill_null("")
    kind = pl.lit(None, pl.String)
    for rule in reversed(rules["type"]):
        kind = pl.when(pl.col("t").str.contains(rule["pattern"])).then(pl.lit(rule["kind"])).otherwise(kind)
    worded = pl.lit(None, pl.String)
    for rule in reversed(rules["word"]):
        worded = pl.when(pl.col("w").str.contains(rule["pattern"])).then(pl.lit(rule["kind"])).otherwise(worded)
    worded = pl.when(pl.col("t") == "").then(worded)
    gpu = pl.col("n").str.contains(rules["gpu"]["pattern"]) | pl.col("t").str.contains(rules["gpu"]["pattern"])
    said = (words if words is not None else pl.Series([None] * text.len(), dtype=pl.String)).cast(pl.String).fill_null("")
    return pl.DataFrame({"t": text, "n": named, "w": said}).select(
        pl.coalesce(kind, pl.when(gpu).then(pl.lit("bmc.gpu")), worded, pl.lit("bmc.event")).alias("kind")
    ).to_series()


def gpu_index(name: pl.Series) -> pl.Series:
    """The GPU number a sensor's name carries (``GPU_3_TEMP`` → 3), or null."""
    pattern = _rules()["gpu"]["pattern"]
    return name.cast(pl.String).str.extract(pattern.replace("(?P<index>", "("), 1).cast(pl.Int64, strict=False)


def severity(text: pl.Series, *, state: pl.Series | None = None, asserted: pl.Series | None = None) -> pl.Series:
    """The severity of each record: ``info`` when deasserted or when the BMC's own state (FreeIPMI's State
    column, Redfish's Severity) says nominal; else the graver of that state and what the wording says
    (``notice`` when it says nothing)."""
    rules = _rules()
    order = {"info": 0, "notice": 1, "warning": 2, "error": 3, "critical": 4}
    worded = pl.lit("notice")
    for rule in reversed(rules["severity"]):
        worded = pl.when(pl.col("x").str.contains(rule["pattern"])).then(pl.lit(rule["severity"])).otherwise(worded)
    frame = pl.DataFrame({
        "x": text.cast(pl.String).fill_null(""),
        "s": state.cast(pl.String) if state is not None else pl.Series([None] * text.len(), dtype=pl.String),
        "a": asserted.cast(pl.Boolean) if asserted is not None else pl.Series([None] * text.len(), dtype=pl.Boolean),
    })  # fmt: skip
    ranked = frame.with_columns(w=worded, b=pl.col("s").replace_strict(rules["state"], default=None))
    graver = pl.when(pl.col("b").replace_strict(order, default=-1) > pl.col("w").replace_strict(order, default=-1)) \
        .then(pl.col("b")).otherwise(pl.col("w"))  # fmt: skip
    # the BMC's own "Nominal"/"OK" stands (its wording may still say "Critical Stop"); else the graver one
    said = pl.when(pl.col("b") == "info").then(pl.lit("info")).otherwise(graver)
    return ranked.select(pl.when(pl.col("a") == False).then(pl.lit("info")).otherwise(said).alias("severity")).to_series()  # noqa: E712


def catalog_reading(text: pl.Series) -> pl.DataFrame:
    """The message catalogs' reading of each text that one reads as a ``bmc.*`` kind: ``i`` (position),
    ``catalog`` (row id), ``cat_kind``."""
    read = messages.frame(messages.load(), text)
    return read.filter(pl.col("cat_kind").str.starts_with("bmc.")).select("i", "catalog", "cat_kind")
