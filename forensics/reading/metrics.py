"""Step lines of training logs into the ``metrics`` table: the trainer styles of ``data/train_metrics.toml``
(which message is a step line, its step, its ``key value`` pairs, their aliases and units), read in Polars
for all the step lines of a chunk at once."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import polars as pl

from ..regex import ascii_classes, first_match
from .fields import _data

#: A number as trainers print it: also with thousands separators (torchtitan's ``tps: 10,050``), and NaN as
#: Paddle's ``%f`` prints it (``nanxxx``).
_NUM = (
    r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
    r"|[-+]?(?:[Nn]a[Nn](?:xxx)?|NAN|[Ii]nf(?:inity)?|INF)"
)


@dataclass(frozen=True)
class _Style:
    name: str
    anchor: str
    step: str | None
    pairs: str
    epoch: str | None = None
    per_epoch: str | None = None
    first_epoch: int = 1
    unless: str | None = None


@cache
def _metric_rules() -> tuple[tuple[_Style, ...], list[str], dict[str, str], dict[str, float]]:
    data = _data("train_metrics.toml")
    def rx(pattern: str | None) -> str | None:
        return None if pattern is None else ascii_classes(pattern)

    styles = tuple(
        _Style(s["name"], ascii_classes(s["anchor"]), rx(s.get("step")), ascii_classes(s["pairs"].replace("{NUM}", _NUM)),
               rx(s.get("epoch")), rx(s.get("per_epoch")), s.get("first_epoch", 1), rx(s.get("unless")))
        for s in data["style"]
    )  # fmt: skip
    alias = {_normal_key(k): v for k, v in data["alias"].items()}
    return styles, data["units"], alias, data["scale"]


def _normal_key(key: str) -> str:
    return re.sub(r"[\s-]+", "_", key.strip().lower())


def _key_name(key: pl.Expr) -> pl.Expr:
    """A printed key in the form ``[alias]`` matches: lower case, spaces and dashes as ``_``."""
    return key.str.strip_chars().str.to_lowercase().str.replace_all(r"[\s-]+", "_")


def _style_expr(msg: pl.Expr, rows: int) -> pl.Expr:
    """The first style whose anchor ``msg`` has (and not its ``unless``), in a frame of ``rows`` rows: the
    styles between two with an ``unless`` are one :func:`first_match`."""
    parts: list[pl.Expr] = []
    run: list[tuple[str, str]] = []
    for style in _metric_rules()[0]:
        if style.unless is None:
            run.append((style.name, style.anchor))
            continue
        parts.append(first_match(msg, run, rows=rows))
        run = []
        match = msg.str.contains(style.anchor) & ~msg.str.contains(style.unless)
        parts.append(pl.when(match).then(pl.lit(style.name)))
    parts.append(first_match(msg, run, rows=rows))
    return pl.coalesce(parts)


#: Keys that number the step rather than measure it, and those that are no measure (an ETA counts down).
_STEP_KEYS = ("iter", "iteration", "step", "global_step", "num_updates", "eta")


def _step_of(style: _Style, msg: pl.Expr) -> pl.Expr:
    """The step a line of ``style`` names: global when the style counts steps within an epoch."""
    if style.step is None:
        return pl.lit(None, pl.Int64)
    step = msg.str.extract(style.step, 1).cast(pl.Int64, strict=False)
    if style.epoch is None or style.per_epoch is None:
        return step
    epoch = msg.str.extract(style.epoch, 1).cast(pl.Int64, strict=False)
    per_epoch = msg.str.extract(style.per_epoch, 1).cast(pl.Int64, strict=False)
    return pl.coalesce((epoch - style.first_epoch) * per_epoch + step, step)


def read_metrics(steps: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Step lines (``rec``, ``style``, ``msg``, and optionally ``i``, the input line) → their steps (``rec``,
    ``step``) and their metrics (``rec``, ``step``, ``name``, ``value``: one row per metric). A step line
    without a step takes the step of another on the same input line (a dict glued after a tqdm bar). A
    pair's text repeats a lot (``loss scale: 65536.0``), so each distinct pair of a style is read once."""
    styles, units, alias, scale = _metric_rules()
    frames = [pl.DataFrame(schema={"rec": pl.Int64, "step": pl.Int64, "name": pl.String, "value": pl.Float64})]
    numbered = [pl.DataFrame(schema={"rec": pl.Int64, "step": pl.Int64})]
    if not steps.height:  # (most chunks of a job's output that is not a trainer's: no step line)
        return numbered[0], frames[0]
    parts: list[tuple[_Style, pl.DataFrame]] = []
    for style in styles:
        part = steps.filter(pl.col("style") == style.name)
        if not part.height:
            continue
        part = part.with_columns(step=_step_of(style, pl.col("msg")))
        if style.epoch is not None:
            epoch = pl.col("msg").str.extract(style.epoch, 1).cast(pl.Float64, strict=False)
            frames.append(part.select("rec", "step", name=pl.lit("epoch"), value=epoch).drop_nulls("value"))
        parts.append((style, part))
        numbered.append(part.select("rec", "step"))
    steps_of = pl.concat(numbered)
    if "i" in steps.columns and steps_of.height:
        on_line = steps.select("rec", "i").join(steps_of, on="rec")
        line_step = on_line.group_by("i").agg(line_step=pl.col("step").drop_nulls().first())
        steps_of = on_line.join(line_step, on="i", how="left").select("rec", step=pl.coalesce("step", "line_step"))
    for style, part in parts:
        part = part.drop("step").join(steps_of, on="rec", how="left")
        pairs = part.select("rec", "step", pair=pl.col("msg").str.extract_all(style.pairs)).explode("pair").drop_nulls("pair")
        read = (
            pairs.select(pl.col("pair").unique())
            .with_columns(pl.col("pair").str.extract_groups(f"^(?:{style.pairs})").alias("g")).unnest("g")
        )  # fmt: skip
        # a key may name its value's unit ("elapsed time per iteration (ms)", "train_step_timing in s")
        unit = pl.col("unit").fill_null("")
        unit = pl.when(unit == "").then(pl.col("key").str.extract(ascii_classes(r"(?:\(|\bin )(ms|s)\)?\s*$"), 1).fill_null("")).otherwise(unit)
        value = pl.col("value").str.replace_all(",", "", literal=True).str.replace(r"x+$", "")
        printed = pl.coalesce(_key_name(pl.col("key")), pl.col("unit"))
        read = read.with_columns(unit=unit, printed=printed, name=printed.replace(alias)).filter(
            pl.col("unit").is_in(units) & ~pl.col("name").is_in(_STEP_KEYS)
        ).select(
            "pair", "name", "printed",
            value=value.cast(pl.Float64, strict=False) * pl.col("unit").replace_strict(scale, default=1.0, return_dtype=pl.Float64),
        )  # fmt: skip
        # a renamed key keeps its printed name on a line that prints the project's name too (NeMo's bar:
        # "loss=2.6, …, reduced_train_loss=2.590")
        taken = (pl.col("printed") == pl.col("name")).any().over("rec", "name")
        frames.append(
            pairs.join(read, on="pair", how="inner", maintain_order="left")
            .select("rec", "step", pl.when(taken & (pl.col("printed") != pl.col("name"))).then("printed").otherwise("name").alias("name"), "value")
        )  # fmt: skip
    return steps_of, pl.concat(frames)
