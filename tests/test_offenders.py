"""Repeat offenders on a made fleet: a card that moves, a slot that eats cards, a bad node, noise."""

from __future__ import annotations

import random

import polars as pl
import pytest
from click.testing import CliRunner

import forensics
from forensics.cli import main

from .conftest import FIRST_CORPUS

HOSTS = [f"n{i:03d}" for i in range(200)]
BUSES = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"]


class Fleet:
    """Identities and diagnoses of incidents, like a dataset's (only what the analysis reads)."""

    def __init__(self) -> None:
        self.ids: list[dict[str, object]] = []
        self.diag: list[dict[str, object]] = []
        self.cards = {(h, b): f"S{n}" for n, (h, b) in enumerate((h, b) for h in HOSTS for b in BUSES)}
        self.next = len(self.cards)

    def incident(self, host: str, bus: str | None, cause: str) -> None:
        name = f"i{len(self.diag):04d}"
        for b in BUSES:  # the failing host's identities, as ingest gathers them
            self.ids.append({"incident": name, "host": host, "gpu": b, "serial": self.cards[(host, b)], "uuid": None})
        self.diag.append({"incident": name, "root_cause": cause, "first_host": host, "first_gpu": bus})

    def replace(self, host: str, bus: str) -> None:
        self.next += 1
        self.cards[(host, bus)] = f"S{self.next}"

    @property
    def identities(self) -> pl.LazyFrame:
        every = [{"incident": "all", "host": h, "gpu": b, "serial": s, "uuid": None} for (h, b), s in self.cards.items()]
        return pl.LazyFrame(self.ids + every)

    @property
    def incidents(self) -> pl.LazyFrame:
        return pl.LazyFrame({"incident": [d["incident"] for d in self.diag], "labels": ["{}"] * len(self.diag)})

    def diagnoses(self) -> pl.DataFrame:
        return pl.DataFrame(self.diag, schema={"incident": pl.String, "root_cause": pl.String, "first_host": pl.String,
                                               "first_gpu": pl.String})  # fmt: skip


def test_card_slot_and_node_are_told_apart_and_nothing_else_is_named() -> None:
    rng = random.Random(3)
    f = Fleet()
    card_at = ("n010", BUSES[0])
    lemon = f.cards[card_at]
    for n in range(300):
        pick = n % 10
        if pick == 0:  # the lemon card fails, comes back from repair into another slot
            f.incident(*card_at, "gpu_memory")
            other = (rng.choice(HOSTS), rng.choice(BUSES))
            f.cards[card_at], f.cards[other] = f.cards[other], f.cards[card_at]
            card_at = next(k for k, v in f.cards.items() if v == lemon)
        elif pick == 1:  # the bad slot: whatever card is in it fails, and is replaced
            f.incident("n020", BUSES[2], "pcie_link")
            f.replace("n020", BUSES[2])
        elif pick == 2:  # the bad node: any of its GPUs, or the host itself
            f.incident("n030", rng.choice([*BUSES, None]), rng.choice(["gpu_hardware", "host_memory"]))
        else:  # background: random hardware and software failures anywhere
            host, bus = rng.choice(HOSTS), rng.choice(BUSES)
            f.incident(host, bus, rng.choice(["gpu_memory", "gpu_hardware", "code_bug", "network"]))
            if rng.random() < 0.5 and f.cards[(host, bus)] != lemon:  # the lemon only ever moves
                f.replace(host, bus)
    found = forensics.repeat_offenders(f, f.diagnoses())
    named = {(r["decision"], r["who"]) for r in found.iter_rows(named=True)}
    assert named == {("card", lemon), ("slot", f"n020 {BUSES[2]}"), ("node", "n030")}, found
    card = found.filter(pl.col("decision") == "card").row(0, named=True)
    assert card["incidents"] >= 28 and card["slots"] >= 20  # one may land on the bad node and "follows the card" in card["reason"]
    assert found.filter(pl.col("decision") == "slot")["cards"].item() >= 28


def test_a_card_that_never_moved_is_undetermined() -> None:
    f = Fleet()
    for _ in range(6):
        f.incident("n005", BUSES[1], "gpu_memory")
    found = forensics.repeat_offenders(f, f.diagnoses())
    assert found.select("decision", "who", "incidents").rows() == [("undetermined", f.cards[("n005", BUSES[1])], 6)]


def test_offenders_command_on_the_corpus(tmp_path) -> None:
    forensics.ingest(FIRST_CORPUS, tmp_path / "ds", jobs=1)
    r = CliRunner().invoke(main, ["offenders", str(tmp_path / "ds")])
    assert (r.exit_code, r.output) == (0, "no repeat offenders\n")


def test_the_planted_lemons_of_a_synthetic_fleet_and_no_others(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: generated logs, ingested and diagnosed; the analysis names the generator's planted
    card, slot and node, and nothing else (150 single-host incidents: about 40 s). A quarter of the
    incidents are the lemons' (about 12 each, whatever the draw): each is significant against the
    fleet's rate, as no healthy card, slot or node can be."""
    import forensics.synth as synth_module
    from forensics.pci import canonical_bdf
    from forensics.synth import synth

    monkeypatch.setattr(synth_module, "LEMON_SHARE", 0.25)

    made = synth(tmp_path / "fleet", 150, seed=26, hosts_per_incident=(1, 1),
                 causes=["pcie_link", "gpu_hardware", "gpu_memory", "nvlink", "code_bug"])  # fmt: skip
    forensics.ingest([tmp_path / "fleet"], tmp_path / "fleet.ds", jobs=2)
    found = forensics.repeat_offenders(forensics.open_dataset(tmp_path / "fleet.ds"))
    host, bus = made.lemons["slot"].split("/")
    planted = {("card", made.lemons["card"]), ("slot", f"{host} {canonical_bdf(bus + ':00.0')}"),
               ("node", made.lemons["node"])}  # fmt: skip
    assert set(zip(found["decision"], found["who"], strict=True)) == planted
