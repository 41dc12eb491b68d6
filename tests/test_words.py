"""The words of each cause: the last reading before ``unknown`` (forensics.mine.words)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import forensics
from forensics.mine import words
from forensics.regex import ascii_classes

from .conftest import GOLDEN
from .test_mine import XID79, _events

ROOT = Path(__file__).parents[1]
VOCABULARY = words.load()


def _rows(*messages: str, kind: str = "other", severity: str = "error") -> pl.DataFrame:
    n = len(messages)
    return pl.DataFrame({"incident": ["i"] * n, "row": list(range(n)), "kind": [kind] * n, "severity": [severity] * n,
                         "message": list(messages), "catalog": [None] * n, "cat_cause": [None] * n, "follower": [False] * n,
                         "t": [None] * n},
                        schema_overrides={"catalog": pl.String, "cat_cause": pl.String, "t": pl.Int64, "row": pl.UInt32})  # fmt: skip


@pytest.mark.parametrize("word", VOCABULARY.words, ids=lambda w: w.id)
def test_every_word_reads_its_example_as_its_cause(word: words.Word) -> None:
    assert word.example and word.doc, word.id
    assert pl.Series([word.example]).str.contains(ascii_classes(word.regex)).item(), word.id
    read = words.readings(_rows(word.example))
    assert word.cause in read.get_column("cause").to_list()
    if word.alone:  # read on an untyped info line too, and kept by the one pass over all events
        frame = _rows(word.example, severity="info")
        assert frame.filter(words.candidates()).height == 1, word.id
        assert words.alone(frame).item(), word.id


def _golden_lines() -> list[str]:
    lines = []
    for path in sorted(GOLDEN.rglob("*")):
        if path.is_file() and path.suffix in (".log", ".txt", ".csv", ".out"):
            lines += path.read_text("utf-8", errors="replace").splitlines()
    return lines


def test_the_anchors_find_every_real_line_an_alone_phrase_reads() -> None:
    frame = pl.DataFrame({"message": _golden_lines()}).with_columns(kind=pl.lit("other"))
    found = frame.filter(words.candidates())
    for word in (w for w in VOCABULARY.words if w.alone):
        read = frame.filter(pl.col("message").str.contains(ascii_classes(word.regex)))
        missed = read.join(found, on="message", how="anti")
        assert missed.is_empty(), (word.id, missed.head(3).get_column("message").to_list())
    # The pass keeps few of the lines: it is a filter, not the reading.
    assert found.height < frame.height / 2


def test_a_healthy_nvidia_smi_dump_in_a_job_log_says_nothing() -> None:
    dump = (GOLDEN / "nvsmi" / "nvsmi-q-535.154.05-8x-rtx4090-01.txt").read_text("utf-8").splitlines()
    assert any("Not Active" in line for line in dump)
    assert words.readings(_rows(*dump, severity="info")).is_empty()
    assert not words.alone(_rows(*dump, severity="info")).any()


def test_an_incident_nothing_else_explains_is_read_by_its_words() -> None:
    # A service processor's thermal ring buffer (oxidecomputer/hubris#2361): no catalog knows its firmware.
    folder = ROOT / "corpus" / "thermal-hubris-2361-cosmo-sp-overheat-poweroff" / "cosmo-b"
    lines = (folder / "sp-ringbuf-thermal.txt").read_text("utf-8").splitlines()
    rows = [{"file": "cosmo-b/sp-ringbuf-thermal.txt", "line": n, "source": "joblog", "message": m}
            for n, m in enumerate(lines, 1)]  # fmt: skip
    d = forensics.diagnose(_events(*rows)).row(0, named=True)
    assert (d["root_cause"], d["rule"]) == ("thermal", "words:thermal")
    assert d["confidence"] < words.CEILING
    assert any("Overheated" in e["message"] for e in d["evidence"])


def test_the_words_never_outweigh_a_rule_or_a_catalog() -> None:
    overheat = {"line": 2, "message": "12 1120     3610        1 AutoState(Overheated)"}
    d = forensics.diagnose(_events(XID79, overheat)).row(0, named=True)
    assert d["root_cause"] == "gpu_hardware" and not d["rule"].startswith("words:")


def test_the_causes_words_compete_by_weight() -> None:
    read = words.readings(_rows("ERROR: connection refused by the storage mount", "RuntimeError: loss: nan"))
    assert set(read.get_column("cause")) >= {"network", "storage", "numerical"}
    # A row counts once per cause: its heaviest word.
    assert read.group_by("row", "cause").len().get_column("len").max() == 1


def test_an_exception_whose_message_names_another_cause_is_that_cause() -> None:
    # A trainer's own exception for a diverged run (detectron2's FloatingPointError wording, with a type the
    # catalogs do not know): the phrase in its message names the numbers, not the program.
    line = {"kind": "other", "message": "TrainingError: Predicted boxes or scores contain Inf/NaN. Training has diverged."}
    d = forensics.diagnose(_events(line)).row(0, named=True)
    assert d["root_cause"] == "numerical"
    plain = {"kind": "other", "message": "TrainingError: the batch has 3 dimensions, expected 4"}
    assert forensics.diagnose(_events(plain)).row(0, named=True)["root_cause"] == "code_bug"


def test_a_line_that_states_its_level_is_an_error() -> None:
    quiet = _rows("allocating the batch failed: shm is too small", severity="info")
    loud = _rows("ERROR: allocating the batch failed: shm is too small", severity="info")
    assert words.readings(loud).get_column("weight").max() == 2 * words.readings(quiet).get_column("weight").max()


def test_a_new_vocabulary_redoes_the_stored_diagnoses(monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.mine import stored
    from forensics.mine.language import load_library

    library = load_library()
    stored._fingerprint.cache_clear()
    before = stored.fingerprint(library)
    monkeypatch.setattr(words, "load", lambda: words.Vocabulary(VOCABULARY.words[:-1], VOCABULARY.healthy))
    stored._fingerprint.cache_clear()
    try:
        assert stored.fingerprint(library) != before
    finally:
        stored._fingerprint.cache_clear()


@pytest.mark.parametrize(
    ("line", "cause"),
    [
        ("WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.", "driver"),
        ("ERROR: this build requires NVIDIA driver 535.54 or later", "driver"),
        ("nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -2)", "driver"),
        ("docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
         "container_runtime"),
        ("RuntimeError: failed to connect to the master at 10.1.2.3:29500", "network"),
    ],
)  # fmt: skip
def test_the_synonyms_of_a_cause_s_failures_read_as_it(line: str, cause: str) -> None:
    read = words.readings(_rows(line))
    best = read.sort("weight", descending=True).row(0, named=True)
    assert best["cause"] == cause, read
