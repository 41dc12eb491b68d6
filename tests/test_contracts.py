"""The contracts other parts rely on: DESIGN.md's schemas, the grammar rules, the public API."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import forensics
from forensics import catalog, schema
from forensics.grammar import family_grammar, grammar_dir, kind_of, parser, rule_aliases
from forensics.pci import canonical_bdf
from forensics.regex import PYTHON_ROWS, ascii_classes, first_match, for_python
from forensics.reading import envelope

DESIGN = Path(__file__).parents[1] / "docs" / "DESIGN.md"

EVENTS_DESIGN = [
    ("incident", pa.string()), ("host", pa.string()), ("source", pa.string()), ("file", pa.string()),
    ("line", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("uptime_s", pa.float64()),
    ("kind", pa.string()), ("severity", pa.string()), ("gpu", pa.string()), ("rank", pa.int32()),
    ("pid", pa.int64()), ("code", pa.int64()), ("message", pa.string()), ("detail", pa.string()),
]  # fmt: skip


def test_events_schema_is_designs() -> None:
    assert [(f.name, f.type) for f in schema.EVENTS] == EVENTS_DESIGN


def test_events_columns_follow_design_md() -> None:
    table = DESIGN.read_text("utf-8").split("**events**", 1)[1].split("**gpus**", 1)[0]
    names = re.findall(r"^\| (\w+) \|", table, flags=re.MULTILINE)
    assert [n for n in names if n != "column"] == schema.EVENTS.names


def test_other_tables() -> None:
    assert schema.METRICS.names == ["incident", "host", "rank", "file", "line", "ts", "step", "name", "value"]
    # DESIGN.md's columns in its order, then the ones this project added
    assert schema.FILES.names == ["incident", "file", "source", "bytes", "lines", "records", "unparsed", "error",
                                  "host", "confidence", "families"]  # fmt: skip
    assert schema.INCIDENTS.names[:4] == ["incident", "hosts", "first_ts", "last_ts"]
    for name in ("gpu", "uuid", "serial", "pcie_gen_current", "pcie_width_max", "remapped_rows_pending",
                 "retired_pages_dbe", "ecc_volatile_uncorrected", "temp_gpu_c", "power_draw_w"):  # fmt: skip
        assert name in schema.GPUS.names


def test_every_grammar_builds_strict() -> None:
    for path in sorted(grammar_dir().glob("*.lark")):
        if not path.stem.startswith("_"):
            parser(path.stem, strict=True)


FAMILY_GRAMMARS = ("kernel", "journal", "nccl", "traceback", "trainlog")


@pytest.mark.parametrize("name", FAMILY_GRAMMARS)
def test_families_are_kinds_and_have_anchors(name: str) -> None:
    g = family_grammar(name)
    assert g.families
    for kind in g.families:
        assert kind in schema.KINDS, kind
        assert g.anchors[kind], f"{kind} has no A_ anchor terminal"
    lark = parser(name)
    assert {kind_of(a) for a in rule_aliases(lark)} <= schema.KINDS


def test_kernel_grammar_covers_design() -> None:
    assert len(family_grammar("kernel").families) >= 20


@pytest.mark.parametrize("name", FAMILY_GRAMMARS)
def test_prefilter_compiles_in_polars_and_python(name: str) -> None:
    import polars as pl

    regex = family_grammar(name).prefilter_regex()
    re.compile(for_python(regex))
    assert pl.Series(["hello"]).str.contains(regex).to_list() == [False]


def test_kernel_prefilter_flags_xid() -> None:
    import polars as pl

    regex = family_grammar("kernel").prefilter_regex()
    assert pl.Series(["NVRM: Xid (PCI:0000:3b:00): 79, x", "hello"]).str.contains(regex).to_list() == [True, False]


def test_public_api_sorted_and_complete() -> None:
    import types

    assert forensics.__all__ == sorted(forensics.__all__)
    # (dir, not vars: most of the API is imported when first used, see forensics.__getattr__)
    public = {n for n in dir(forensics) if not n.startswith("_")
              and (callable(v := getattr(forensics, n)) or not isinstance(v, types.ModuleType))}  # fmt: skip
    assert public - {"annotations"} == set(forensics.__all__)
    assert callable(forensics.ingest) and callable(forensics.open_dataset)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PCI:0000:3b:00", "0000:3b:00.0"), ("0000:03:00", "0000:03:00.0"), ("0000:3b:00.0", "0000:3b:00.0"),
        ("PCI:0000:05:00.0", "0000:05:00.0"), ("00000000:3B:00.0", "0000:3b:00.0"), ("PCI:0000:D8:00", "0000:d8:00.0"),
        ("PCI:0001:6c:00", "0001:6c:00.0"), ("3b:00.0", "0000:3b:00.0"), ("GPU-1234", None), ("", None),
    ],
)  # fmt: skip
def test_canonical_bdf(text: str, expected: str | None) -> None:
    assert canonical_bdf(text) == expected


def test_nccl_bus_id() -> None:
    assert canonical_bdf("3b000", nccl=True) == "0000:3b:00.0"
    assert canonical_bdf("b2000", nccl=True) == "0000:b2:00.0"


def test_xid_catalog_covers_facts() -> None:
    cat = catalog.xid_catalog()
    for code in (13, 31, 32, 43, 45, 48, 63, 64, 74, 79, 94, 95, 109, 119, 120, 140, 143, 144, 150, 154, 163, 172):
        assert code in cat, code
    assert cat[79].immediate_action == "RESTART_BM" and "BUS" in cat[79].causes
    assert catalog.xid(999) is None


def test_aer_names() -> None:
    assert catalog.aer_short_name("Receiver Error") == "RxErr"
    assert catalog.aer_short_name("Surprise Down Error") == "SDES"
    assert catalog.aer_bits_from_status(0x4020, "fatal") == ["SDES", "CmpltTO"]
    assert catalog.aer_agent(["CmpltTO"]) == "Requester"


def test_month_names_agree_across_locales() -> None:
    months = envelope.month_numbers()
    assert months["фев"] == 2 and months["11月"] == 11 and months["mrt"] == 3 and months["dec"] == 12


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=" \t\r\x1c\u3000ab", max_size=6), max_size=90), st.integers(0, 2), st.booleans())
@example([""] * 70 + ["  a", "   b"], 2, False)  # the first line with text past the first 64
@example(["\x1c", "  a"], 1, False)  # U+001C is text to Polars (Python's strip() calls it blank)
def test_dedent_takes_the_indentation_every_text_line_shares(lines: list[str], least: int, indented: bool) -> None:
    """dedent by its definition: blank means blank to Polars' strip_chars(); spaces first (when at
    least ``least`` are shared), then tabs."""
    from forensics.text import dedent

    lines = ["  " + line for line in lines] if indented else lines
    series = pl.Series("line", lines, dtype=pl.String)
    blank = (series.str.strip_chars() == "").to_list()
    want = list(lines)
    for pad, at_least in ((" ", least), ("\t", 1)):
        text = [line for line, b in zip(want, blank, strict=True) if not b]
        if not text:
            break
        common = min(len(line) - len(line.lstrip(pad)) for line in text)
        if common >= at_least:
            want = [line if b else line[common:] for line, b in zip(want, blank, strict=True)]
    assert dedent(series, least).to_list() == want


def _golden_lines() -> list[str]:
    lines: list[str] = []
    for path in sorted((Path(__file__).parent / "golden").glob("*/*.log")):
        lines += path.read_bytes().decode("utf-8", "replace").splitlines()
    return lines



def test_word_boundaries_are_ascii_in_polars_and_python() -> None:
    """A pattern's word boundaries are ASCII in both engines (Rust's fast engine cannot decide a Unicode
    one beside a non-ASCII character): Polars and Python's ``re`` agree beside é, CJK and bar blocks."""
    texts = ["NCCL WARN x", "NCCL WARNé x", "éNCCL WARN", "█ NCCL WARN", "NCCL WARN█", "WARNING", "日本WARN", "x_WARN"]
    for pattern in (r"\bWARN\b", r"WARN\B", r"(?:NCCL )?WARN\b ?", r"\w\bWARN"):
        rust = pl.Series(texts).str.contains(ascii_classes(pattern)).to_list()
        assert rust == [bool(re.search(for_python(ascii_classes(pattern)), t)) for t in texts], pattern
    assert pl.Series(["NCCL WARNé", "日本WARN"]).str.contains(ascii_classes(r"\bWARN\b")).to_list() == [True, True]
    assert ascii_classes(ascii_classes(r"\bWARN\b")) == ascii_classes(r"\bWARN\b")


def test_first_match_in_python_is_the_polars_chain_on_real_lines() -> None:
    """A small frame's chain of patterns, searched in Python, names line for line what the chain of Polars
    searches names (the path of large frames): the job-record classes, trainer styles and kernel record
    tags, on every golden line, and a chain whose first pattern matches later on the line than the
    second's (the chain's order decides, not the position)."""
    from forensics.sources.kernel import _record_rules
    from forensics.reading.metrics import _metric_rules
    from forensics.reading.records import _classes

    lines = pl.DataFrame({"msg": [*_golden_lines(), None, "", "Traceback (most recent call last):\nx"]})
    rules = _record_rules()
    chains = {
        "classes": list(_classes()),
        "styles": [(s.name, s.anchor) for s in _metric_rules()[0]],
        "heads": list(rules.heads.items()),
        "context": list(rules.context.items()),
        "overlapping": [("late", "Error"), ("early", "^[a-z]"), ("never", "^$x")],
    }
    large = PYTHON_ROWS + 1
    for label, named in chains.items():
        python = pl.concat(
            lines.slice(start, PYTHON_ROWS).select(first_match(pl.col("msg"), named, rows=PYTHON_ROWS)).to_series()
            for start in range(0, lines.height, PYTHON_ROWS)
        )
        chain = lines.select(first_match(pl.col("msg"), named, rows=large)).to_series()
        assert chain.is_not_null().sum() > 0, label
        assert python.fill_null("-").to_list() == chain.fill_null("-").to_list(), label


@pytest.mark.parametrize("dtype", [pl.String, pl.Int64, pl.Float64, pl.Boolean, pl.Datetime("us", "UTC")])
def test_scatter_in_python_is_polars_scatter(dtype: pl.DataType) -> None:
    """A small column is scattered in Python; it equals Polars' scatter (the path of large columns)."""
    import datetime as dt

    sample = {pl.String: ["a", None, "c"], pl.Int64: [1, None, 3], pl.Float64: [0.5, float("nan"), None],
              pl.Boolean: [True, False, None]}.get(dtype, [dt.datetime(2024, 1, 1, tzinfo=dt.UTC), None, None])  # fmt: skip
    values, rows = pl.Series("v", sample, dtype=dtype), pl.Series([7, 0, 3], dtype=pl.UInt32)
    small = envelope.scatter(values, rows, 10)
    large = envelope.scatter(values, rows, envelope.SCATTER_IN_PYTHON + 1).head(10)
    assert small.dtype == large.dtype == values.dtype and small.name == "v"
    want = [None] * 10
    want[7], want[0], want[3] = sample
    assert small.equals(pl.Series("v", want, dtype=dtype))
    assert small.equals(large)
    assert envelope.scatter(values.clear(), rows.clear(), 0).len() == 0


def test_samples_columns_and_metrics_follow_design_md() -> None:
    text = DESIGN.read_text("utf-8").split("**samples**", 1)[1].split("**incidents**", 1)[0]
    columns = text.split(":", 1)[1].split(". Metric names", 1)[0]
    at = {c: m.start() for c in schema.SAMPLES.names if (m := re.search(rf"\b{c}\b", columns))}
    assert sorted(at, key=at.__getitem__) == schema.SAMPLES.names  # every column, in DESIGN's order
    assert [(f.name, f.type) for f in schema.SAMPLES][-3:] == [("metric", pa.string()), ("value", pa.float64()),
                                                               ("unit", pa.string())]  # fmt: skip
    vocabulary = set(re.findall(r"`([a-z_]+)`", text.split("Metric names are a documented vocabulary:", 1)[1]
                                .split("(the full list", 1)[0]))  # fmt: skip
    assert vocabulary and vocabulary <= schema.SAMPLE_METRICS, vocabulary - schema.SAMPLE_METRICS
    assert schema.TABLES["samples"] is schema.SAMPLES


def test_every_metric_a_source_gives_is_in_the_vocabulary() -> None:
    """The samples of every real golden input name metrics of ``SAMPLE_METRICS`` (DESIGN.md "samples")."""
    import json

    from forensics.schema import SAMPLE_METRICS

    golden = Path(__file__).parent / "golden"
    used = {json.loads(line)["metric"] for f in golden.rglob("*.samples.jsonl") for line in f.open() if line.strip()}
    assert used and used <= SAMPLE_METRICS, sorted(used - SAMPLE_METRICS)
